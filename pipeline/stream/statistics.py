"""The statistics of a stream fit in its result, and what people read from them: the
summary table and F tests of linear restrictions.

A least-squares fit (KF4LLS, RLS with ``forgetting=1`` and ``ridge=0``) ends with the
factor of its rows and a few moments in its final state; the statistics follow from them
without another pass over the rows (:mod:`streamlsq.kernels.inference`): this module only
reads the state out of the result, calls the kernels and stores what they return, under
statsmodels' names, one value per target (``docs/inference.md``):

- ``nobs``, ``df_model``, ``df_resid``, ``ssr``, ``ess``, ``scale``, ``rsquared``,
  ``rsquared_adj``, ``fvalue``, ``f_pvalue``, ``llf``, ``aic``, ``bic`` ``(target)``;
- ``bse``, ``tvalues``, ``pvalues``, ``conf_int_lower``, ``conf_int_upper``
  ``(feature, target)``; ``cov_params (feature, feature2, target)``;
- along the trajectory, the recursive confidence bands of statsmodels' ``RecursiveLS``:
  ``recursive_bse``, ``recursive_conf_int_lower``, ``recursive_conf_int_upper``
  ``(step, feature, target)`` from the recorded ``normalized_variance (step, feature)``;
- the attributes ``cov_type``, ``use_t``, ``conf_int_alpha``, ``k_constant``,
  ``rows_dropped`` (and ``n_groups``, ``df_resid_inference`` for clusters).

A statistic that is not defined for the data (no residual degree of freedom, a constant
target) is not stored, and the attribute ``undefined_statistics`` names it: a result never
holds a NaN. Where no statistic applies (a forgetting factor, a ridge, a recursion that is
not least squares) the attribute ``statistics_unavailable`` says why.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

import numpy as np

from streamlsq.errors import InputError, checked
from streamlsq.kernels.inference import (
    STATISTIC_AXES,
    RegressionFactor,
    WaldTest,
    classical_statistics,
    recursive_bands,
)
from streamlsq.kernels.inference import wald_test as wald_f_test
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.options.fit import CONF_ALPHA
from streamlsq.report import coefficient_table, summary_lines
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.methods import RECURSIONS, make_method

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = ["CONF_ALPHA", "add_statistics", "result_factor", "statistics_note", "summary",
           "summary_text", "wald_test", "with_statistics"]

#: the trajectory's recursive confidence bands
RECURSIVE_BANDS = ("recursive_bse", "recursive_conf_int_lower", "recursive_conf_int_upper")
#: the attributes the statistics set (removed when they are computed again)
STATISTICS_ATTRS = ("cov_type", "use_t", "conf_int_alpha", "k_constant", "rows_dropped",
                    "n_groups", "df_resid_inference", "undefined_statistics", "undefined_because",
                    "statistics_unavailable", "cov_description", "maxlags", "kernel")
_DIMS = {"coef": "feature", "coef2": "feature2", "target": "target"}


def fit_recursion(attrs: dict) -> Recursion:
    """The recursion of a stream fit, rebuilt from its result's ``method`` and
    ``parameters`` attributes."""
    import json

    name = attrs.get("method")
    if name not in RECURSIONS.stream_methods():
        raise InputError(f"not the result of a stream fit (method {name!r})")
    return make_method(name, **json.loads(attrs.get("parameters", "{}")))


def result_factor(ds: xr.Dataset, rec: Recursion | None = None) -> RegressionFactor:
    """The factored least-squares problem of a fit (its final state, as the recursion
    reads it: :meth:`~streamlsq.kernels.recursions.contract.Recursion.regression`)."""
    from streamlsq.stream.resume import previous_state

    rec = rec or fit_recursion(ds.attrs)
    return rec.regression(previous_state(ds, rec))


def unavailable(rec: Recursion, epochs: int = 1) -> str | None:
    """Why a fit by ``rec`` has no statistics (a phrase), or None."""
    why = rec.inference_unavailable()
    if why is None and epochs != 1:
        why = f"its rows were read {epochs} times (--epochs)"
    return why


def without_statistics(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` without any statistic (before they are computed again: a continued fit, a
    robust covariance)."""
    names = [n for n in (*STATISTIC_AXES, *RECURSIVE_BANDS) if n in ds]
    ds = ds.drop_vars(names)
    if "feature2" in ds.coords:
        ds = ds.drop_vars("feature2")
    for key in STATISTICS_ATTRS:
        ds.attrs.pop(key, None)
    return ds


def add_statistics(ds: xr.Dataset, rec: Recursion, alpha: float = 0.05,
                   epochs: int = 1) -> xr.Dataset:
    """``ds`` (a stream fit by ``rec``) with its classical statistics, from its final state;
    or with the attribute ``statistics_unavailable`` saying why it has none."""
    ds = without_statistics(ds)
    why = unavailable(rec, epochs)
    if why is not None:
        ds.attrs["statistics_unavailable"] = why
        return ds
    fac = result_factor(ds, rec)
    return with_statistics(ds, classical_statistics(fac, alpha, constant_index(ds)))


def constant_index(ds: xr.Dataset) -> int | None:
    """The index of the intercept the reading path prepends (the first coefficient), or
    None: a constant among the stored columns is found from the factor."""
    return 0 if FitInputs.from_attrs(ds.attrs).intercept else None


def with_statistics(ds: xr.Dataset, stats: dict) -> xr.Dataset:
    """``ds`` with the statistics ``stats`` (:func:`~streamlsq.kernels.inference.
    classical_statistics` or ``robust_statistics``) as variables and attributes: those
    that are not finite are left out and named in ``undefined_statistics``."""
    ds = without_statistics(ds)
    undefined, variables = [], {}
    for name, axes in STATISTIC_AXES.items():
        values = np.asarray(stats[name])
        if not np.isfinite(values).all():
            undefined.append(name)
            continue
        if name == "nobs":
            values = values.astype(np.int64)
        variables[name] = (tuple(_DIMS[a] for a in axes), values)
    if "normalized_variance" in ds and "scale" in variables:
        bands = recursive_bands(ds.coef.values, ds.normalized_variance.values,
                                variables["scale"][1], stats["alpha"])
        for name, key in zip(RECURSIVE_BANDS, ("bse", "lower", "upper"), strict=True):
            variables[name] = (("step", "feature", "target"), bands[key])
    # one assignment: the variables are aligned with the result once, not one by one
    ds = ds.assign_coords(feature2=("feature2", ds.feature.values)).assign(variables)
    nobs = int(np.asarray(stats["nobs"]).ravel()[0])
    ds.attrs.update({
        "cov_type": stats.get("cov_type", "nonrobust"), "use_t": bool(stats["use_t"]),
        "conf_int_alpha": float(stats["alpha"]), "k_constant": int(stats["k_constant"]),
        "rows_dropped": int(ds.attrs.get("n_rows", nobs)) - nobs,
    })
    for key in ("n_groups", "df_resid_inference"):
        if key in stats:
            ds.attrs[key] = stats[key]
    if undefined:
        ds.attrs["undefined_statistics"] = undefined
        negative = [str(ds.feature.values[j]) for j in stats.get("negative_variance", ())]
        if negative:
            ds.attrs["undefined_because"] = (
                f"the {ds.attrs['cov_type']} covariance has a negative variance for "
                f"{', '.join(map(repr, negative))}: "
                + ("a two-way cluster covariance (V_A + V_B - V_AB)"
                   if ds.attrs["cov_type"] == "cluster" else "a HAC covariance with the "
                   "uniform kernel") + " need not be positive semi-definite; cov_params is "
                "stored as it is")
    return ds


def statistics_note(ds: xr.Dataset) -> str:
    """A short phrase on a fit's statistics for the command line's summary line."""
    if "statistics_unavailable" in ds.attrs:
        return f"no statistics: {ds.attrs['statistics_unavailable']}"
    if "nobs" not in ds:
        return "no statistics"
    parts = []
    if "rsquared" in ds:
        parts.append("R-squared " + ", ".join(f"{v:.4g}" for v in ds.rsquared.values))
    parts.append(f"nobs {int(ds.nobs.values[0])}")
    if ds.attrs.get("rows_dropped"):
        parts.append(f"{ds.attrs['rows_dropped']} rows dropped")
    parts.append(f"covariance {ds.attrs.get('cov_type', 'nonrobust')}")
    if "undefined_statistics" in ds.attrs:
        parts.append(f"undefined: {', '.join(ds.attrs['undefined_statistics'])}")
    return ", ".join(parts) + " (streamlsq info RESULT: the summary)"


# -- reading them -----------------------------------------------------------------------


def _open(result) -> xr.Dataset:
    """The result as a Dataset, refused in one line unless it holds a fit's coefficient table
    (``coef (step, feature, target)``: a stream fit's, an interleaved fit's, a GLM's); the
    same for a lazily opened result as for one in memory."""
    import xarray as xr
    if isinstance(result, xr.Dataset):
        ds, shown = result, "the result"
    else:
        from streamlsq.io.results import open_result

        ds, shown = open_result(result, lazy=False), str(result)
    dims = ds.coef.dims if "coef" in ds else ()
    if set(dims) != {"step", "feature", "target"}:
        held = f"whose coef is ({', '.join(map(str, dims))})" if dims else "which has no coef"
        method = ds.attrs.get("method")
        # a data store (simulate's, convert's) has no method: no 'result of None'
        what = (f"the result of {method!r}" if method is not None else
                "not a result (no attribute method: a data store?)")
        raise InputError(f"{shown}: {what}, {held}, not a "
                         "fit's coefficients (step, feature, target): summary, summary_text "
                         "and wald_test read those of a stream fit, an interleaved fit or a "
                         "GLM")
    return ds


def _target(ds: xr.Dataset, target) -> object:
    """The label of the target asked for (default: the only one, else the first)."""
    labels = list(ds.target.values)
    if target is None:
        return labels[0]
    if target not in labels:  # the labels as Python values, not np.int64(0)
        shown = [v.item() if isinstance(v, np.generic) else v for v in labels]
        raise InputError(f"target must be one of {shown}, got {target!r}")
    return target


def _require_statistics(ds: xr.Dataset) -> None:
    if "bse" not in ds:
        why = ds.attrs.get("statistics_unavailable") or "it was fitted before statistics " \
            "were stored, or they are undefined"
        raise InputError(f"the fit has no statistics: {why}")


def summary(result, target=None):
    """The coefficient table of a least-squares fit (a store or its Dataset) as a
    :class:`pandas.DataFrame`, one row per coefficient: ``coef``, ``std err``, ``t`` (``z``
    for a robust covariance), ``P>|t|``, and the interval ``[α/2``, ``1−α/2]``, as
    statsmodels' summary prints them; the model statistics are in ``frame.attrs["model"]``
    (R², adjusted R², F and its p-value, nobs, rows dropped, covariance type, digits
    trusted, …). A fit without statistics gives the coefficients alone and
    ``attrs["model"]["statistics"]`` says why. ``target``: the target of a fit of several
    (default: the first).

    Examples
    --------
    >>> import numpy as np, xarray as xr, streamlsq
    >>> rng = np.random.default_rng(0)
    >>> table = xr.Dataset({"x": ("row", rng.standard_normal(200))})
    >>> table["y"] = 1.0 + 2.0 * table.x + rng.standard_normal(200)
    >>> fit = streamlsq.fit_stream(table, x="x", y="y", fit_intercept=True)
    >>> frame = streamlsq.summary(fit)
    >>> list(frame.columns), list(frame.index)
    (['coef', 'std err', 't', 'P>|t|', '[0.025', '0.975]'], ['intercept', 'x'])
    >>> frame.attrs["model"]["nobs"], round(frame.attrs["model"]["rsquared"], 3)
    (200, 0.767)
    """
    ds = _open(result)
    label = _target(ds, target)
    coef = ds.coef.isel(step=-1).sel(target=label).values
    stats = None
    if "bse" in ds:
        stats = {n: ds[n].sel(target=label).values for n in
                 ("bse", "tvalues", "pvalues", "conf_int_lower", "conf_int_upper")}
    return coefficient_table(ds.feature.values, coef, stats,
                             float(ds.attrs.get("conf_int_alpha", 0.05)),
                             bool(ds.attrs.get("use_t", True)), _model_statistics(ds, label))


def _model_statistics(ds: xr.Dataset, label) -> dict:
    a = ds.attrs
    out = {"method": a.get("method"), "target": label, "rows": int(a.get("n_rows", 0))}
    if "nobs" not in ds:
        out["statistics"] = a.get("statistics_unavailable", "none stored")
        return out
    for name in ("nobs", "df_model", "df_resid", "rsquared", "rsquared_adj", "fvalue",
                 "f_pvalue", "llf", "aic", "bic", "scale", "ssr"):
        if name in ds:
            value = ds[name].sel(target=label).values.item()  # a lazy array too
            out[name] = int(value) if name == "nobs" else float(value)
    out.update({"rows_dropped": int(a.get("rows_dropped", 0)),
                "cov_type": a.get("cov_description", a.get("cov_type", "nonrobust")),
                "digits_trusted": a.get("digits_trusted")})
    for key in ("identified_from_row", "n_groups", "undefined_statistics",
                "undefined_because"):
        if key in a:
            out[key] = a[key]
    if "rolling_params" in ds:  # the windows' own covariance (RollingOLS' cov_type)
        out["windows"] = (f"{a.get('rolling_window')} rows, "
                          f"{a.get('rolling_cov_type', 'nonrobust')} covariance")
    if a.get("model") == "glm":  # a generalised linear model's own (statsmodels' GLM summary)
        out.update({"kind": "glm", "family": a["family"], "link": a["link"],
                    "iterations": int(a["iterations"]), "converged": bool(a["converged"])})
        for name in ("deviance", "null_deviance", "pearson_chi2", "llnull", "prsquared_cs",
                     "prsquared_mcf"):
            if name in ds:  # llnull and the pseudo R²s: not in results written before them
                out[name] = float(ds[name].sel(target=label).values.item())
    return out


def summary_text(result, target=None) -> str:
    """The summary of a fit as text people read (``streamlsq info RESULT``): the model
    statistics in two columns and the coefficient table, one block per target."""
    ds = _open(result)
    targets = [target] if target is not None else list(ds.target.values)
    return "\n\n".join(summary_lines(summary(ds, label), f"{ds.attrs.get('method')} results: "
                                     f"target {np.asarray(label).item()!r}",
                                     dep_variable=str(np.asarray(label).item()))
                         for label in targets)


def wald_test(result, constraints, q=None, *, target=None) -> WaldTest:
    """The F test of linear restrictions on the coefficients of a least-squares fit, as
    statsmodels' ``f_test``: ``constraints`` a string of restrictions on the coefficients'
    labels (``"dep_delay = 0, distance = air_time"``, parsed by formulaic's linear
    constraints; back-quote a label that is not a name; a chained equality ``"a = b = 0"``
    is two restrictions, ``a = b`` and ``b = 0``, as statsmodels reads it), which holds its
    own right-hand sides (``q`` is refused beside it), or a matrix R (J, k) with ``q``
    (J,). Uses the fit's covariance (robust when it has one) and df_resid denominator
    degrees of freedom (G − 1 for clusters). Returns ``fvalue``, ``pvalue``, ``df_num``,
    ``df_denom``.

    Examples
    --------
    >>> import numpy as np, xarray as xr, streamlsq
    >>> rng = np.random.default_rng(1)
    >>> table = xr.Dataset({n: ("row", rng.standard_normal(300)) for n in ("a", "b")})
    >>> table["y"] = 0.5 * table.a + 0.5 * table.b + rng.standard_normal(300)
    >>> fit = streamlsq.fit_stream(table, x=["a", "b"], y="y", fit_intercept=True)
    >>> res = streamlsq.wald_test(fit, "a = b")
    >>> res.df_num, res.df_denom, res.pvalue > 0.05
    (1, 297.0, True)
    """
    ds = _open(result)
    _require_statistics(ds)
    label = _target(ds, target)
    features = [str(f) for f in ds.feature.values]
    if isinstance(constraints, list | tuple) and constraints and all(
            isinstance(c, str) for c in constraints):  # statsmodels' list of restrictions
        constraints = ", ".join(constraints)
    if isinstance(constraints, str):
        if q is not None:  # statsmodels reads the string's own right-hand sides, q unused
            raise InputError(f"restrictions {constraints!r} with q {q!r}: a string of "
                             "restrictions holds its own right-hand sides ('x1 = 1'): leave "
                             "q out, or give a matrix R (J, k) with q (J,)")
        R, q = _parse_constraints(constraints, features)
    else:
        R, q = _matrix_constraints(constraints, q)
    df_denom = float(ds.attrs.get("df_resid_inference",
                                  ds.df_resid.sel(target=label).values.item()))
    try:
        return wald_f_test(ds.coef.isel(step=-1).sel(target=label).values,
                           ds.cov_params.sel(target=label).values, R, q, df_denom)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _matrix_constraints(constraints, q) -> tuple[np.ndarray, np.ndarray]:
    """R and q given as numbers; anything else refused in one line (not a NumPy error, nor
    None read as a 1 x 1 matrix of NaN)."""
    def numbers(value):
        if value is None or isinstance(value, bool | str | dict):
            raise TypeError(type(value).__name__)
        return np.asarray(value, np.float64)

    try:
        R = np.atleast_2d(numbers(constraints))
        q = np.zeros(R.shape[0]) if q is None else numbers(q)
    except (TypeError, ValueError):
        raise InputError(
            f"restrictions {constraints!r}{'' if q is None else f' with q {q!r}'}: give a "
            "string of restrictions on the coefficients' labels ('x1 = 0, x2 = x3'), a list "
            "of such strings, or a matrix R (J, k) of numbers with q (J,)") from None
    return R, q


def _negated_constants(spec: str) -> str:
    """``a = -2`` as formulaic parses it, ``a = 0 - 2`` (its tokenizer reads ``=-`` as one
    unknown operator, where statsmodels reads a negative value); labels in backquotes are
    left as they are."""
    parts = re.split(r"(`[^`]*`)", spec)
    return "".join(part if i % 2 else re.sub(r"(=+)\s*-", r"\1 0 -", part)
                   for i, part in enumerate(parts))


def _unchained(spec: str) -> str:
    """``a = b = 0`` as statsmodels (patsy) reads a chained equality, two restrictions
    ``a = b, b = 0``, where formulaic reads one (``a - b + 0 = 0``); labels in backquotes,
    parentheses and the operators ``==``, ``<=``, ``>=``, ``!=`` (refused by formulaic) are
    left as they are."""
    restrictions, sides, start, depth, quoted = [], [], 0, 0, False
    for i, ch in enumerate(spec):
        if ch == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch == ",":
            restrictions.append([*sides, spec[start:i]])
            sides, start = [], i + 1
        elif depth == 0 and ch == "=" and spec[i - 1:i] not in ("=", "<", ">", "!") and \
                spec[i + 1:i + 2] != "=":
            sides.append(spec[start:i])
            start = i + 1
    restrictions.append([*sides, spec[start:]])
    if all(len(sides) <= 2 for sides in restrictions):
        return spec
    return ", ".join(" = ".join(s.strip() for s in pair) for sides in restrictions
                     for pair in (itertools.pairwise(sides) if len(sides) > 1 else [sides]))


#: a number with an exponent (``1e-5``, ``2.5E+1``), not part of a label (``x1e5``)
_EXPONENT = re.compile(r"(?<![\w.[])(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+(?![\w.])")

#: a character that ends a label unless the label is back-quoted
_OPERATOR = re.compile(r"[\s+\-*/=,^:~<>!|&%@]")


def _plain_numbers(spec: str) -> str:
    """``x1 = 1e-5`` as formulaic reads it, ``x1 = 0.00001`` (its tokenizer ends a number
    at the ``e``, where statsmodels reads the exponent); the same double, as the decimal
    text is exact. Labels in backquotes are left as they are; a number out of range is
    refused."""
    from decimal import Decimal

    def plain(match):
        text = match.group(0)
        if not np.isfinite(float(text)):
            raise InputError(f"{spec!r}: the number {text} is out of range (not finite in "
                             "double precision); a restriction's numbers must be finite")
        return format(Decimal(text), "f")

    parts = re.split(r"(`[^`]*`)", spec)
    return "".join(part if i % 2 else _EXPONENT.sub(plain, part)
                   for i, part in enumerate(parts))


def _quoting_hint(spec: str, features: list[str]) -> str:
    """The remedy of a restriction that names, not back-quoted, a label holding a space or
    an operator (formulaic reads it as two names, or an operator)."""
    unquoted = "".join(part for i, part in enumerate(re.split(r"(`[^`]*`)", spec))
                       if not i % 2)
    for name in features:
        if _OPERATOR.search(name) and name in unquoted:
            return (f"; write a label holding spaces or operators in backquotes: "
                    f"`{name}` = 0")
    return ""


def _parse_constraints(spec: str, features: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """R and q of restrictions written on the coefficients' labels (formulaic), a chained
    equality read as statsmodels reads it (:func:`_unchained`), a number with an exponent
    as statsmodels reads it (:func:`_plain_numbers`)."""
    from formulaic.utils.constraints import LinearConstraints

    plain = _negated_constants(_unchained(_plain_numbers(spec)))
    try:
        lc = LinearConstraints.from_spec(plain, variable_names=features)
    except KeyError as exc:
        name = str(exc.args[0])
        if re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?", name) and \
                not np.isfinite(float(name)):
            raise InputError(f"{spec!r}: the number {name} is out of range (not finite in "
                             "double precision); a restriction's numbers must be "
                             "finite") from None
        raise InputError(f"{spec!r}: no coefficient {name!r}; the coefficients are "
                         f"{features}{_quoting_hint(spec, features)}") from None
    except Exception as exc:  # formulaic's syntax errors span lines: keep the first
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        remedy = _quoting_hint(spec, features) or (
            "; write each restriction with one '=' (as 'x1 = 0', 'x1 = x2'), "
            "restrictions separated by ','" if "operator" in first else "")
        raise InputError(f"{spec!r}: not a list of linear restrictions "
                         f"({first}){remedy}") from None
    R = np.asarray(lc.constraint_matrix, np.float64)
    if R.size and not np.any(R, axis=1).all():  # '0 = 0' of a coefficient labelled 0
        raise InputError(f"{spec!r}: a restriction names no coefficient (a number is read as "
                         "a number: back-quote a label that is one, or not a name, as "
                         f"`0` = 0); the coefficients are {features}")
    return R, np.asarray(lc.constraint_values, np.float64)


def checked_alpha(alpha) -> float:
    """``alpha`` (None: 0.05) checked: in (0, 1)."""
    return checked(CONF_ALPHA, 0.05 if alpha is None else alpha)
