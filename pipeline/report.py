"""Tables people read: the summary of a least-squares fit as statsmodels prints it.

The coefficient table (``coef``, ``std err``, ``t`` or ``z``, ``P>|t|``, the interval)
as a :class:`pandas.DataFrame` with the model statistics in its ``attrs["model"]``, and
the same as text: what ``streamlsq.summary``, ``streamlsq info RESULT`` and the
estimators' ``summary()`` show. Formatting only: the statistics come from
:mod:`streamlsq.kernels.inference`.
"""

from __future__ import annotations

from itertools import zip_longest

import numpy as np

__all__ = ["coefficient_table", "summary_lines"]

#: the rows of the text summary: (label, key of the model statistics, format), two columns
_LEFT = (("Method:", "method", "{}"), ("Rows:", "rows", "{}"),
         ("Rows dropped:", "rows_dropped", "{}"), ("No. Observations:", "nobs", "{}"),
         ("Df Residuals:", "df_resid", "{:g}"), ("Df Model:", "df_model", "{:g}"),
         ("Covariance Type:", "cov_type", "{}"), ("Digits trusted:", "digits_trusted", "{}"))
_RIGHT = (("R-squared:", "rsquared", "{:.4f}"), ("Adj. R-squared:", "rsquared_adj", "{:.4f}"),
          ("F-statistic:", "fvalue", "{:.4g}"), ("Prob (F-statistic):", "f_pvalue", "{:.3g}"),
          ("Log-Likelihood:", "llf", "{:.5g}"), ("AIC:", "aic", "{:.5g}"),
          ("BIC:", "bic", "{:.5g}"), ("Scale:", "scale", "{:.5g}"))

#: a generalised linear model's header: the rows of statsmodels' ``GLMResults.summary()``
#: (its formats; no Date and Time), the family and link as ``fit glm`` names them, and
#: the rows dropped, whether IRLS converged and McFadden's pseudo R² beside them (the
#: ``Pseudo R-squ.`` statsmodels' ``Logit`` summary prints; its GLM summary has Cox and
#: Snell's only)
_GLM_LEFT = (("Dep. Variable:", "dep_variable", "{}"), ("Model:", "model_name", "{}"),
             ("Model Family:", "family", "{}"), ("Link Function:", "link", "{}"),
             ("Method:", "fit_method", "{}"), ("Rows dropped:", "rows_dropped", "{}"),
             ("No. Iterations:", "iterations", "{:d}"), ("Converged:", "converged", "{}"),
             ("Covariance Type:", "cov_type", "{}"))
_GLM_RIGHT = (("No. Observations:", "nobs", "{}"), ("Df Residuals:", "df_resid", "{:g}"),
              ("Df Model:", "df_model", "{:g}"), ("Scale:", "scale", "{:#8.5g}"),
              ("Log-Likelihood:", "llf", "{:#8.5g}"), ("Deviance:", "deviance", "{:#8.5g}"),
              ("Pearson chi2:", "pearson_chi2", "{:#6.3g}"),
              ("Pseudo R-squ. (CS):", "prsquared_cs", "{:#6.4g}"),
              ("Pseudo R-squ. (McF):", "prsquared_mcf", "{:#6.4g}"))

#: the summary's layout by the kind of fit (``attrs["model"]["kind"]``): its title (None:
#: the caller's), the header's two columns and the values it shows without a statistic
_LAYOUTS = {
    "least_squares": {"title": None, "left": _LEFT, "right": _RIGHT, "fixed": {}},
    "glm": {"title": "Generalized Linear Model Regression Results", "left": _GLM_LEFT,
            "right": _GLM_RIGHT, "fixed": {"model_name": "GLM", "fit_method": "IRLS"}},
}


def coefficient_table(names, coef, stats: dict | None, alpha: float = 0.05,
                      use_t: bool = True, model: dict | None = None):
    """The coefficient table: one row per coefficient (``names``), the columns of
    statsmodels' summary (``coef``, ``std err``, ``t``/``z``, ``P>|t|``/``P>|z|``,
    ``[α/2``, ``1−α/2]``) from ``stats`` (``bse``, ``tvalues``, ``pvalues``,
    ``conf_int_lower``, ``conf_int_upper``: one value per coefficient), or ``coef`` alone
    when ``stats`` is None; ``model`` goes to ``attrs["model"]``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.report import coefficient_table
    >>> t = coefficient_table(["a"], [1.0], {"bse": [0.5], "tvalues": [2.0], "pvalues": [0.05],
    ...                                      "conf_int_lower": [0.0], "conf_int_upper": [2.0]})
    >>> list(t.columns)
    ['coef', 'std err', 't', 'P>|t|', '[0.025', '0.975]']
    """
    import pandas as pd

    index = [str(n) for n in names]
    if stats is None:
        frame = pd.DataFrame({"coef": np.asarray(coef, np.float64)}, index=index)
    else:
        letter = "t" if use_t else "z"
        frame = pd.DataFrame({
            "coef": np.asarray(coef, np.float64), "std err": stats["bse"],
            letter: stats["tvalues"], f"P>|{letter}|": stats["pvalues"],
            f"[{alpha / 2:g}": stats["conf_int_lower"],
            f"{1 - alpha / 2:g}]": stats["conf_int_upper"]}, index=index)
    frame.attrs["model"] = dict(model or {})
    return frame


def summary_lines(frame, title: str, dep_variable: str | None = None) -> str:
    """The summary as text: ``title``, the model statistics of ``frame.attrs["model"]`` in
    two columns (or why there are none: its ``statistics``), the coefficient table. The
    layout is the one of the fit's kind (``attrs["model"]["kind"]``, default least
    squares): a GLM's is statsmodels' ``GLMResults.summary()``'s, under its title, with
    ``dep_variable`` (the target) as its Dep. Variable."""
    model = frame.attrs["model"]
    layout = _LAYOUTS[model.get("kind", "least_squares")]
    values = {**model, **layout["fixed"], "dep_variable": dep_variable}
    width = 78
    lines = [(layout["title"] or title).center(width), "=" * width]
    if "statistics" in model:
        lines.append(f"no statistics: {model['statistics']}")
    else:
        for left, right in zip_longest(layout["left"], layout["right"]):
            lines.append(f"{_cell(left, values):<39}{_cell(right, values):>39}".rstrip())
    lines += ["=" * width, frame.to_string(float_format=lambda v: f"{v:.4g}"), "=" * width]
    if model.get("undefined_statistics"):
        lines.append(f"undefined for these data: {', '.join(model['undefined_statistics'])}")
        if model.get("undefined_because"):
            lines.append(f"  {model['undefined_because']}")
    if "identified_from_row" in model:
        lines.append(f"coefficients identified from row {model['identified_from_row']}")
    if "windows" in model:
        lines.append(f"rolling windows of {model['windows']}")
    return "\n".join(lines)


def _cell(spec, model) -> str:
    if spec is None:  # the shorter column's end
        return ""
    label, key, fmt = spec
    value = model.get(key)
    text = "n/a" if value is None else fmt.format(value)
    return f"{label:<20}{text:>18}"
