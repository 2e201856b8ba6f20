"""Reading and writing stores: everything that touches a file goes through here.

- :mod:`.stores`: opening Zarr groups, layout checks, chunk and value checks shared
  by every kind of store
- :mod:`.stream`: stream stores (``X (sample, feature)``, ``y (sample, target)``)
- :mod:`.tasks`: multi-task stores (rows of all tasks, CSR ``task_ptr``, roles)
- :mod:`.results`: result stores, published atomically and marked complete
- :mod:`.checkpoint`: checkpoints of long runs, for ``--resume``
- :mod:`.describe`: ``streamlsq info``
"""
