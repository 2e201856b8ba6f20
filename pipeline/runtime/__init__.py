"""Running on Dask: the client, reductions over chunks, progress and worker memory.

- :mod:`.client`: a Dask client from a scheduler address, the user's client or an
  embedded ``LocalCluster``; the watch that stops a run whose workers all stay paused
- :mod:`.reduce`: maps over chunks and fixed-order tree reductions of their results
- :mod:`.progress`: progress bars over futures and rows
- :mod:`.memory`: allocator settings of data-reading Dask tasks and giving pages back
"""
