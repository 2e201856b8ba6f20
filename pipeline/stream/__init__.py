"""Recursions over stream stores, in order: which method, which blocks, which engine.

- :mod:`.methods`: a configured recursion from a registered name and its parameters
- :mod:`.plans`: the virtual stream of blocks a recursion sees (one store, epochs
  in a seeded shuffled order, or two populations interleaved), cut into segments
- :mod:`.engines`: the ``sequential`` and ``scan`` engines
- :mod:`.fit`: :func:`~streamlsq.fit_stream` and the layout of its result
- :mod:`.interleaved`: :func:`~streamlsq.fit_interleaved` over two stores
"""
