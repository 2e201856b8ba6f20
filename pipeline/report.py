"""Tables people read: the summary of a least-squares fit as statsmodels prints it.

The coefficient table (``coef``, ``std err``, ``t`` or ``z``, ``P>|t|``, the interval)
as a :class:`pandas.DataFrame` with the model statistics in its ``attrs["model"]``, and
the same as text: what ``streamlsq.summary``, ``streamlsq info RESULT`` and the
estimators' ``summary()`` show. Formatting only: the statistics come from
:mod:`streamlsq.kernels.inference`.
"""

from __future__ import annotations

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


def summary_lines(frame, title: str) -> str:
    """The summary as text: ``title``, the model statistics of ``frame.attrs["model"]`` in
    two columns (or why there are none: its ``statistics``), the coefficient table."""
    model = frame.attrs["model"]
    width = 78
    lines = [title.center(width), "=" * width]
    if "statistics" in model:
        lines.append(f"no statistics: {model['statistics']}")
    else:
        for left, right in zip(_LEFT, _RIGHT, strict=True):
            lines.append(f"{_cell(left, model):<39}{_cell(right, model):>39}")
    lines += ["=" * width, frame.to_string(float_format=lambda v: f"{v:.4g}"), "=" * width]
    if "family" in model:  # a generalised linear model: the rows of statsmodels' GLM summary
        glm = ((("Model Family:", "family", "{}"), ("Link Function:", "link", "{}")),
               (("Deviance:", "deviance", "{:.5g}"), ("Pearson chi2:", "pearson_chi2", "{:.3g}")),
               (("No. Iterations:", "iterations", "{}"), ("Converged:", "converged", "{}")))
        lines[2:2] = [f"{_cell(left, model):<39}{_cell(right, model):>39}"
                      for left, right in glm]
    if model.get("undefined_statistics"):
        lines.append(f"undefined for these data: {', '.join(model['undefined_statistics'])}")
    if "identified_from_row" in model:
        lines.append(f"coefficients identified from row {model['identified_from_row']}")
    return "\n".join(lines)


def _cell(spec, model) -> str:
    label, key, fmt = spec
    value = model.get(key)
    text = "n/a" if value is None else fmt.format(value)
    return f"{label:<20}{text:>18}"
