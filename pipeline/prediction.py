"""One prediction for every result: :func:`predict` applies a stream fit to new rows
(:func:`~streamlsq.stream.apply.predict_stream`) or a meta-learned model to the tasks of a
multi-task store (:func:`streamlsq.mlr.predict.predict`), whichever the result is.

What a result is, its ``method`` attribute says (:func:`applies_to_rows`): a registered
recursion made a stream fit; ``metalearn``, ``pooled`` and ``em`` made models of tasks. The
command ``streamlsq predict MODEL DATA`` asks the same question here.
"""

from __future__ import annotations

import os
from typing import Any, Unpack

import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.results import check_coefficient_labels, check_kept_formula
from streamlsq.io.tasks import CHUNK_TASKS
from streamlsq.jobs import Run, RunOptions
from streamlsq.mlr.predict import predict as predict_tasks
from streamlsq.options.fit import PREDICT_STREAM
from streamlsq.options.mlr import PREDICT
from streamlsq.stream.apply import check_names_of_rows, is_stream_fit, predict_stream
from streamlsq.stream.glm_predict import is_glm_fit, predict_glm

__all__ = ["applies_to_rows", "predict", "predict_rows", "refuse_other_kind"]

#: the options of applying a stream fit, with their defaults (as declared)
ROW_OPTIONS = PREDICT_STREAM.without("group").defaults()
#: the options of predicting tasks under a meta-learned model, with their defaults
TASK_OPTIONS = PREDICT.without("group").defaults()
#: the methods of models of tasks (``metalearn``, ``fit_pooled``, ``fit_em``)
TASK_MODELS = ("metalearn", "pooled", "em")


def _result_attrs(result, storage_options: dict | None) -> dict:
    """The attributes of a result: a Dataset's, or a store's, opened and checked
    (:func:`~streamlsq.io.results.open_result`: an incomplete store is refused)."""
    if isinstance(result, xr.Dataset):
        attrs, label = dict(result.attrs), "the fit"
        # as a store is checked when opened: its record against its coefficients' labels
        check_kept_formula(attrs, label, variables=set(result.variables))
        check_coefficient_labels(attrs, label, *(
            result[n].values.tolist() if n in result.variables else None
            for n in ("feature", "target")))
    else:
        attrs = dict(Run(storage_options=storage_options).open_input("result", result).attrs)
        label = str(result)
    if attrs["method"] == "glm" and not is_glm_fit(attrs):
        raise InputError(f"{label}: its attribute model is {attrs.get('model')!r}, where a "
                         "GLM's (method 'glm') is 'glm'; the result is damaged: compute it "
                         "again")
    if not (is_stream_fit(attrs) or is_glm_fit(attrs) or attrs["method"] in TASK_MODELS):
        raise InputError(f"{label}: its attribute method is {attrs['method']!r}: not a result "
                         "predict applies (a fit of one stream, 'fit glm', to rows; a model "
                         f"of tasks, {', '.join(TASK_MODELS)}, to tasks)")
    return attrs


def _shown(result) -> str:
    return "the fit" if isinstance(result, xr.Dataset) else str(result)


def applies_to_rows(result, storage_options: dict | None = None, *, x=None, y=None,
                    given=(), spelled=lambda name: f"{name}=") -> bool:
    """Whether ``result`` (a result store: path, URL or zarr store object; or a Dataset) is a
    stream fit, applied to rows, rather than a meta-learned model, applied to tasks: its
    ``method`` attribute names a registered recursion. Refused before a run starts: ``x``,
    ``y`` (the variables of the rows named anew) for a formula fit, whose formula builds
    them; the options among ``given`` that the other kind of result takes
    (:func:`refuse_other_kind`).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> from streamlsq.prediction import applies_to_rows
    >>> tmp = tempfile.TemporaryDirectory()
    >>> rows = streamlsq.simulate_stream(f"{tmp.name}/rows.zarr", n_rows=1_000, n_features=2)
    >>> applies_to_rows(streamlsq.fit_stream(rows, "rls"))
    True
    >>> tmp.cleanup()
    """
    attrs = _result_attrs(result, storage_options)
    refuse_other_kind(result, attrs, given, spelled)
    to_rows = is_stream_fit(attrs) or is_glm_fit(attrs)
    if to_rows:
        check_names_of_rows(attrs, _shown(result), x, y)
    return to_rows


def _changed(value, default) -> bool:
    return value is not None if default is None else bool(value != default)


def refuse_other_kind(result, attrs: dict, given, spelled=lambda name: f"{name}=") -> None:
    """Refuse the options among ``given`` (names the caller was given, not left at their
    defaults) that the other kind of result takes: a stream fit's rows take none of a
    model's options (:data:`TASK_OPTIONS`), a model's tasks none of a stream fit's
    (:data:`ROW_OPTIONS`); they would be ignored. ``spelled``: an option's name as the
    caller writes it (``holdout=``; the command line's ``--holdout``)."""
    to_rows = is_stream_fit(attrs) or is_glm_fit(attrs)
    wrong = [spelled(name) for name in (TASK_OPTIONS if to_rows else ROW_OPTIONS)
             if name in given]
    if not wrong:
        return
    kind, applies = (("a stream fit", "a meta-learned model's tasks, not to rows") if to_rows
                     else ("a meta-learned model", "a stream fit's rows, not to tasks"))
    raise InputError(f"{_shown(result)} is {kind} (method {attrs.get('method')!r}): "
                     f"{', '.join(wrong)} appl{'ies' if len(wrong) == 1 else 'y'} to "
                     f"{applies}")


def predict(
    model_or_fit: Any,
    data: Any,
    *,
    out: str | os.PathLike | None = None,
    estimator: str = "bayes",
    holdout: int = 0,
    yhat: bool = False,
    new_rows: str | os.PathLike | None = None,
    chunk_tasks: int = CHUNK_TASKS,
    group: str | None = None,
    x=None,
    y=None,
    sample_dim: str | None = None,
    step: int | None = None,
    intervals: bool = False,
    alpha: float | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Apply any result to new data: a stream fit to rows, a meta-learned model to tasks.

    What ``model_or_fit`` is decides (its ``method`` attribute, :func:`applies_to_rows`):

    - a **stream fit** (``fit_stream``, ``fit_interleaved``, ``streamlsq fit``; a result
      store or its Dataset) is applied to the rows of ``data`` (a stream store, a Dataset or
      a table) as :func:`streamlsq.predict_stream` applies it: ``yhat (sample, target)`` and,
      where ``data`` has the targets, ``residual (sample, target)``;
    - a **meta-learned model** (``metalearn``, ``fit_pooled``, ``fit_em``: a model store)
      estimates every task of the multi-task store ``data``
      (:func:`streamlsq.mlr.predict.predict`): ``coef (task, feature)``,
      ``posterior (task, cluster)``, …

    Parameters
    ----------
    model_or_fit
        A result store (path, fsspec URL, zarr store object), or a stream fit's Dataset.
    data
        The new rows (a stream fit) or the new tasks (a model).
    out : str or os.PathLike or None
        The result store to write, chunk by chunk (None: in memory).
    group : str or None
        The group of ``data`` that holds the rows or the tasks.
    estimator, holdout, yhat, new_rows, chunk_tasks
        A model only: as for :func:`streamlsq.mlr.predict.predict`.
    x, y, sample_dim, step, intervals, alpha
        A stream fit only: as for :func:`streamlsq.predict_stream`.
    **run
        The options of the run (:class:`streamlsq.jobs.RunOptions`); ``storage_options``
        reach every store named by URL, the result's included.

    Returns
    -------
    xarray.Dataset
        The prediction (the published store, opened, with ``out``).

    Raises
    ------
    InputError
        An option of the other kind of result (``holdout=`` with a stream fit,
        ``intervals=`` with a model), or whatever the prediction refuses.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> rows = streamlsq.simulate_stream(f"{tmp.name}/rows.zarr", n_rows=2_000, n_features=3)
    >>> fit = streamlsq.fit_stream(rows, "kf4lls", out=f"{tmp.name}/fit.zarr")
    >>> pred = streamlsq.predict(f"{tmp.name}/fit.zarr", rows)  # a stream fit: rows
    >>> pred.yhat.dims, pred.attrs["model_method"]
    (('sample', 'target'), 'kf4lls')
    >>> tasks = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=4_000,
    ...                                t_light=4, n_heavy=100, t_heavy=60, n_light2=1_000,
    ...                                t_light2=10, seed=1)
    >>> model = streamlsq.metalearn(tasks, 2, out=f"{tmp.name}/model.zarr")
    >>> pred = streamlsq.predict(f"{tmp.name}/model.zarr", tasks, holdout=2)  # a model: tasks
    >>> pred.coef.dims, pred.attrs["model_method"]
    (('task', 'feature'), 'metalearn')
    >>> try:
    ...     streamlsq.predict(f"{tmp.name}/fit.zarr", rows, holdout=2)
    ... except streamlsq.InputError as exc:
    ...     print(exc)
    /.../fit.zarr is a stream fit (method 'kf4lls'): holdout= applies to a meta-learned
    model's tasks, not to rows
    >>> tmp.cleanup()
    """
    given = {name: value for name, value in locals().items()
             if name in ROW_OPTIONS or name in TASK_OPTIONS}
    for declared in (PREDICT_STREAM, PREDICT):  # every value checked before any input opens
        declared.check({name: given[name] for name in declared.names if name in given})
    attrs = _result_attrs(model_or_fit, run.get("storage_options"))
    to_rows = is_stream_fit(attrs) or is_glm_fit(attrs)
    refuse_other_kind(model_or_fit, attrs, [
        name for name, default in (ROW_OPTIONS | TASK_OPTIONS).items()
        if _changed(given[name], default)])
    options = {name: given[name] for name in (ROW_OPTIONS if to_rows else TASK_OPTIONS)}
    if to_rows:  # the job checks the rows' names as it opens them, before any cluster
        apply = predict_glm if is_glm_fit(attrs) else predict_stream
        return apply(model_or_fit, data, out=out, group=group, **options, **run)
    return predict_tasks(model_or_fit, data, out=out, group=group, **options, **run)


def predict_rows(result, data, **options) -> xr.Dataset:
    """A fit applied to rows, whichever it is: a stream fit (:func:`predict_stream`) or a GLM
    (:func:`~streamlsq.stream.glm_predict.predict_glm`); ``options`` as theirs."""
    attrs = _result_attrs(result, options.get("storage_options"))
    apply = predict_glm if is_glm_fit(attrs) else predict_stream
    return apply(result, data, **options)
