"""Synthetic stores written in parallel, one Dask task per chunk, larger than memory if asked.

- :mod:`.streams`: stream stores (:func:`~streamlsq.simulate_stream`), the three
  populations of the interleaved study and the IRMA study's samples
- :mod:`.tasks`: multi-task stores of a mixture of linear regressions
  (:func:`~streamlsq.simulate_mlr`)
- :mod:`.common`: the checks of a store's layout and its chunks written in parallel
"""
