"""Meta-learning for mixed linear regression over multi-task stores.

- :mod:`.metalearn`: Kong et al.'s Algorithm 1 as parallel chunked reductions
  (:func:`~streamlsq.metalearn`), and one pooled regression (:func:`~streamlsq.fit_pooled`)
- :mod:`.predict`: posterior-mean, MAP and per-task least-squares prediction for new
  tasks (:func:`~streamlsq.predict`)
- :mod:`.em`: the task-level EM baseline (:func:`~streamlsq.fit_em`)
- :mod:`.examples`: real multilevel datasets converted to multi-task stores
"""
