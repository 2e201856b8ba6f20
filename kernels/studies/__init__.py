"""The papers' studies as vectorised NumPy: their data, Monte-Carlo batches and statistics.

One module per study (:mod:`.interleaved`, :mod:`.irma`, :mod:`.lms`, :mod:`.bfgs`,
:mod:`.mlr`) and :mod:`.common` for what they share. The pipeline's
``streamlsq.studies`` spreads these batches over the Dask cluster and writes the tables,
figures and summaries.
"""
