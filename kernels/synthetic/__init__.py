"""Reproducible generators of synthetic data (pure NumPy).

Every generator draws a row, a block of the interleaved study or a task from a seed and
its index only, so any worker can write any part of a store and every chunking gives the
same numbers.

- :mod:`.streams`: regression streams (correlated Gaussian features) and the IRMA
  study's function samples
- :mod:`.interleaved`: the three populations of the interleaved-KF4LLS study
- :mod:`.mlr`: tasks of a mixture of linear regressions
"""
