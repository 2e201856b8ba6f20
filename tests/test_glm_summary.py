"""The printed summary of a GLM fit (``streamlsq info RESULT``, ``summary_text``) is
statsmodels' ``GLMResults.summary()``: its header's fields hold statsmodels' values in
statsmodels' formats (binomial counts, Poisson with an exposure, Gaussian with its
concentrated likelihood), the coefficient table has z and P>|z|; the CLI prints it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from click.testing import CliRunner

import streamlsq
from streamlsq.stream.statistics import summary_text

#: the header's fields whose printed values equal statsmodels' text (its formats)
SAME_TEXT = ("Model:", "Method:", "No. Observations:", "Df Residuals:", "Df Model:",
             "Scale:", "Log-Likelihood:", "Deviance:", "Pearson chi2:",
             "Pseudo R-squ. (CS):", "Covariance Type:")


def header(text: str) -> dict[str, str]:
    """The header's fields of our summary: label → value (two columns of 39 characters,
    each a label in 20 and a value in 18)."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if set(line) == {"="}]
    out = {}
    for line in lines[rules[0] + 1:rules[1]]:
        for cell in (line[:39], line[40:]):
            if cell.strip():
                out[cell[:20].strip()] = cell[20:].strip()
    return out


def statsmodels_header(res) -> dict[str, str]:
    out = {}
    for row in res.summary().tables[0].data:
        for label, value in (row[:2], row[2:]):
            value = value[0] if isinstance(value, list) else value  # a field given as a list
            if label.strip():
                out[label.strip()] = str(value).strip()
    return out


def check_mcfadden(model, ours, res):
    """McFadden's pseudo R² equals statsmodels' ``pseudo_rsquared(kind="mcf")``, stored and
    printed as its ``Logit`` summary prints ``Pseudo R-squ.`` (statsmodels' GLM summary
    prints Cox and Snell's only)."""
    expected = res.pseudo_rsquared(kind="mcf")
    assert np.isclose(model["prsquared_mcf"], expected, rtol=1e-9, atol=0)
    assert ours["Pseudo R-squ. (McF):"] == f"{expected:#6.4g}"


def check_summary(fit, res, target):
    text = summary_text(fit)
    ours, theirs = header(text), statsmodels_header(res)
    assert text.splitlines()[0].strip() == "Generalized Linear Model Regression Results"
    for label in SAME_TEXT:
        assert ours[label] == theirs[label], (label, ours[label], theirs[label])
    assert ours["Dep. Variable:"] == target
    # the family and link as fit glm names them (statsmodels: their classes' names)
    assert ours["Model Family:"] == theirs["Model Family:"].lower()
    assert ours["Link Function:"].replace("_", "") == theirs["Link Function:"].lower()
    assert abs(int(ours["No. Iterations:"]) - int(theirs["No. Iterations:"])) <= 1
    assert ours["Converged:"] == "True"
    # the values behind the printed ones, to more digits than printed
    model = streamlsq.summary(fit).attrs["model"]
    assert np.isclose(model["prsquared_cs"], res.pseudo_rsquared(kind="cs"), rtol=1e-9)
    assert np.isclose(model["llnull"], res.llnull, rtol=1e-9)
    check_mcfadden(model, ours, res)
    # the coefficient table: the normal's z and P>|z| (use_t False, as statsmodels' GLM)
    table = streamlsq.summary(fit)
    assert list(table.columns) == ["coef", "std err", "z", "P>|z|", "[0.025", "0.975]"]
    assert np.allclose(table["z"], np.asarray(res.tvalues), rtol=1e-8, atol=0)
    assert np.allclose(table["P>|z|"], np.asarray(res.pvalues), rtol=1e-7, atol=0)
    coefficients = text.split("=" * 78)[2].splitlines()[1]
    assert coefficients.split() == ["coef", "std", "err", "z", "P>|z|", "[0.025", "0.975]"]
    return text


def test_binomial_counts_summary_is_statsmodels(client):
    frame = sm.datasets.star98.load_pandas().data
    frame = frame[["NABOVE", "NBELOW", "LOWINC", "PERASIAN", "PERBLACK"]].astype(float)
    fit = streamlsq.fit_glm(frame, formula="NABOVE + NBELOW ~ LOWINC + PERASIAN + PERBLACK",
                            family="binomial", client=client)
    res = sm.GLM(frame[["NABOVE", "NBELOW"]], sm.add_constant(
        frame[["LOWINC", "PERASIAN", "PERBLACK"]]), family=sm.families.Binomial()).fit()
    check_summary(fit, res, "NABOVE")


def test_poisson_exposure_summary_is_statsmodels(client):
    """An exposure: the null model is a fit of its own (IRLS with the offset)."""
    frame = sm.datasets.cpunish.load_pandas().data.astype(float)
    frame["POP"] = frame.INCOME / 1000.0
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY + SOUTH"
    fit = streamlsq.fit_glm(frame, formula=formula, family="poisson", exposure="POP",
                            client=client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson(),
                                  exposure=frame.POP).fit()
    check_summary(fit, res, "EXECUTIONS")


def test_gaussian_summary_is_statsmodels(client):
    """Gaussian identity: ℓ at the concentrated scale, ℓ₀ at the fit's (statsmodels)."""
    rng = np.random.default_rng(3)
    import pandas as pd

    frame = pd.DataFrame({"a": rng.standard_normal(120), "b": rng.standard_normal(120)})
    frame["y"] = 1.0 + frame.a - 0.5 * frame.b + rng.standard_normal(120)
    fit = streamlsq.fit_glm(frame, formula="y ~ a + b", family="gaussian", client=client)
    res = sm.GLM.from_formula("y ~ a + b", frame, family=sm.families.Gaussian()).fit()
    check_summary(fit, res, "y")


@pytest.fixture
def poisson_result(tmp_path, client):
    frame = sm.datasets.cpunish.load_pandas().data.astype(float)
    out = tmp_path / "poisson.zarr"
    streamlsq.fit_glm(frame, formula="EXECUTIONS ~ INCOME + SOUTH", family="poisson",
                      out=str(out), client=client)
    return frame, out


def test_info_prints_the_glm_summary(poisson_result):
    frame, out = poisson_result
    from streamlsq.cli import main

    run = CliRunner().invoke(main, ["info", str(out)])
    assert run.exit_code == 0, run.output
    res = sm.GLM.from_formula("EXECUTIONS ~ INCOME + SOUTH", frame,
                              family=sm.families.Poisson()).fit()
    printed = run.output[run.output.index("Generalized Linear Model"):]
    ours, theirs = header(printed), statsmodels_header(res)
    for label in SAME_TEXT:
        assert ours[label] == theirs[label], label
    assert "R-squared:" not in printed and "F-statistic:" not in printed
    assert ours["Pseudo R-squ. (McF):"] == f"{res.pseudo_rsquared(kind='mcf'):#6.4g}"


def test_freq_weights_pseudo_rsquared_counts_rows(client):
    """Frequency weights: the pseudo R² divides by the rows (statsmodels' nobs), the
    printed No. Observations is Σ f (statsmodels prints the rows), the rest is equal."""
    frame = sm.datasets.cpunish.load_pandas().data.astype(float)
    frame["F"] = (np.arange(len(frame)) % 3 + 1).astype(float)
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY"
    fit = streamlsq.fit_glm(frame, formula=formula, family="poisson", freq_weights="F",
                            client=client)
    res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson(),
                              freq_weights=frame.F).fit()
    ours, theirs = header(summary_text(fit)), statsmodels_header(res)
    for label in set(SAME_TEXT) - {"No. Observations:"}:
        assert ours[label] == theirs[label], (label, ours[label], theirs[label])
    assert int(ours["No. Observations:"]) == frame.F.sum() != int(theirs["No. Observations:"])
    model = streamlsq.summary(fit).attrs["model"]
    assert np.isclose(model["prsquared_cs"], res.pseudo_rsquared(kind="cs"), rtol=1e-9)
    check_mcfadden(model, ours, res)


def test_var_weights_mcfadden_pseudo_rsquared(client):
    """Variance weights on a binomial count response (star98): both pseudo R²s and ℓ₀
    are statsmodels' with ``var_weights``, and the summary prints McFadden's."""
    frame = sm.datasets.star98.load_pandas().data
    frame = frame[["NABOVE", "NBELOW", "LOWINC", "PERASIAN", "PERBLACK"]].astype(float)
    frame["W"] = 0.5 + (np.arange(len(frame)) % 4) / 2.0
    fit = streamlsq.fit_glm(frame, formula="NABOVE + NBELOW ~ LOWINC + PERASIAN + PERBLACK",
                            family="binomial", weights="W", client=client)
    res = sm.GLM(frame[["NABOVE", "NBELOW"]], sm.add_constant(
        frame[["LOWINC", "PERASIAN", "PERBLACK"]]), family=sm.families.Binomial(),
        var_weights=frame.W).fit()
    model = streamlsq.summary(fit).attrs["model"]
    assert np.isclose(model["llnull"], res.llnull, rtol=1e-9)
    assert np.isclose(model["prsquared_cs"], res.pseudo_rsquared(kind="cs"), rtol=1e-9)
    assert np.isclose(fit.prsquared_mcf.item(), res.pseudo_rsquared(kind="mcf"), rtol=1e-9)
    check_mcfadden(model, header(summary_text(fit)), res)
