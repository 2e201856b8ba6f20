"""GLM fits by IRLS over the stream against statsmodels' GLM on data sets packages ship:
star98 (binomial counts), scotland (Gamma), cpunish (Poisson with an exposure and a
categorical term), from a Zarr store, a Parquet folder and a frame; chunkings agree; the
refusals (separation, support, non-convergence) leave nothing behind."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import xarray as xr

import streamlsq
from streamlsq.errors import InputError
from streamlsq.kernels import glm as kernels

REL = 1e-8


def close(a, b, rel=REL):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.allclose(a, b, rtol=rel, atol=0), (a, b, np.max(np.abs(a / b - 1)))


def check_against(fit, res, iterations=True):
    labels = [str(f) for f in fit.feature.values]
    # statsmodels' constant as the fit labels it: 'Intercept' in a formula fit (formulaic's),
    # 'intercept' for named columns
    constant = labels[0] if labels and labels[0] in ("Intercept", "intercept") else "const"
    names = [constant if n in ("Intercept", "const") else n for n in res.model.exog_names]
    order = [names.index(label) for label in labels] if set(names) == set(labels) \
        else list(range(len(labels)))
    coef = fit.coef.isel(step=-1, target=0).values
    close(coef, np.asarray(res.params)[order])
    close(fit.bse[:, 0], np.asarray(res.bse)[order])
    close(fit.pvalues[:, 0], np.asarray(res.pvalues)[order], rel=1e-7)
    for name in ("deviance", "null_deviance", "pearson_chi2", "llf", "aic", "scale"):
        close(fit[name].values[0], getattr(res, name))
    close(fit.bic.values[0], res.bic_llf)
    close(fit.cov_params[:, :, 0], np.asarray(res.cov_params())[np.ix_(order, order)])
    assert fit.df_resid.values[0] == res.df_resid and fit.df_model.values[0] == res.df_model
    if iterations:
        assert abs(fit.attrs["iterations"] - res.fit_history["iteration"]) <= 1
    assert fit.attrs["converged"] is True


@pytest.fixture(scope="module")
def star98():
    frame = sm.datasets.star98.load_pandas().data
    frame = frame[["NABOVE", "NBELOW", "LOWINC", "PERASIAN", "PERBLACK", "PERHISP",
                   "PERMINTE", "AVYRSEXP"]].astype(float)
    frame["TRIALS"] = frame.NABOVE + frame.NBELOW
    return frame


@pytest.fixture(scope="module")
def scotland(tmp_path_factory):
    data = sm.datasets.scotland.load_pandas().data.astype(float)
    path = tmp_path_factory.mktemp("glm") / "scotland.zarr"
    ds = xr.Dataset({c: ("row", data[c].to_numpy()) for c in data.columns})
    ds.chunk({"row": 10}).to_zarr(path)
    return data, path


@pytest.fixture(scope="module")
def cpunish(tmp_path_factory):
    frame = sm.datasets.cpunish.load_pandas().data.astype(float)
    frame["POP"] = frame.INCOME / 1000.0  # a positive exposure
    frame["W"] = 1.0 + (np.arange(len(frame)) % 3) / 2.0
    folder = tmp_path_factory.mktemp("glm") / "cpunish"
    folder.mkdir()
    for i, a in enumerate(range(0, len(frame), 6)):
        frame.iloc[a:a + 6].to_parquet(folder / f"part-{i}.parquet", row_group_size=4)
    return frame, folder


def test_kernel_families_match_statsmodels():
    """Every family's IRLS in one chunk and in chunks of 7 rows equals statsmodels'."""
    data = sm.datasets.scotland.load_pandas()
    X, y = sm.add_constant(data.exog).to_numpy(), data.endog.to_numpy()
    cases = [("gaussian", None, sm.families.Gaussian()),
             ("gaussian", "log", sm.families.Gaussian(sm.families.links.Log())),
             ("gamma", None, sm.families.Gamma()),
             ("gamma", "log", sm.families.Gamma(sm.families.links.Log())),
             ("inverse_gaussian", None, sm.families.InverseGaussian()),
             ("poisson", None, sm.families.Poisson()),
             ("negative_binomial", None, sm.families.NegativeBinomial(alpha=0.5)),
             ("tweedie", None, sm.families.Tweedie(var_power=1.5))]
    for name, link, family in cases:
        spec = kernels.GLMSpec(name, link, alpha=0.5 if name == "negative_binomial" else None)
        m = kernels.mean_sums(spec, y)
        ybar = float(m["sum_y"]) / int(m["rows"])

        def step(c, size=7, spec=spec, ybar=ybar):
            parts = [kernels.irls_sums(spec, X[a:a + size], y[a:a + size], c, ybar=ybar)
                     for a in range(0, len(y), size)]
            return kernels.combine_sums(*parts)

        from streamlsq.kernels.glm.irls import run_irls

        fit = run_irls(spec, step, df_resid=len(y) - X.shape[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = sm.GLM(y, X, family=family).fit()
        close(fit.coef, res.params, rel=1e-7)
        close(fit.last["deviance"], res.deviance)
        assert abs(fit.iterations - res.fit_history["iteration"]) <= 1, name


@pytest.mark.parametrize("solver", ["qr", "normal"])
def test_a_constant_made_by_the_kernels_equals_a_column_of_ones(solver):
    """The IRLS, final and robust sums with ``constant=True`` (the intercept's column made
    in the kernels' slices) equal those of the design with the column of ones stacked."""
    data = sm.datasets.scotland.load_pandas()
    X, y = data.exog.to_numpy(float), data.endog.to_numpy(float)
    Z = sm.add_constant(X)
    rng = np.random.default_rng(5)
    prior = {"offset": rng.normal(0, 0.01, len(y)), "var_weights": rng.uniform(0.5, 2, len(y)),
             "keep": rng.random(len(y)) > 0.1}
    spec = kernels.GLMSpec("gamma", "log", solver=solver)
    coef = np.linalg.lstsq(Z, np.log(y), rcond=None)[0]
    for c in (None, coef):
        made = kernels.irls_sums(spec, X, y, c, ybar=float(y.mean()), constant=True, **prior)
        ref = kernels.irls_sums(spec, Z, y, c, ybar=float(y.mean()), **prior)
        assert made.keys() == ref.keys()
        for key in ref:
            np.testing.assert_allclose(made[key], ref[key], rtol=1e-12, atol=1e-12 * (
                np.abs(ref[key]).max() if np.ndim(ref[key]) else abs(ref[key])), err_msg=key)
    made = kernels.final_sums(spec, X, y, coef, 0.1, constant=True, null_mean=float(y.mean()),
                              **prior)
    ref = kernels.final_sums(spec, Z, y, coef, 0.1, null_mean=float(y.mean()), **prior)
    for key in ref:
        close(made[key], ref[key], rel=1e-12)
    labels = np.arange(len(y)) % 4
    for cov_type in ("HC0", "cluster"):
        made = kernels.robust_sums(spec, X, y, coef, 0.1, cov_type=cov_type, labels=labels,
                                   constant=True, **prior)
        ref = kernels.robust_sums(spec, Z, y, coef, 0.1, cov_type=cov_type, labels=labels,
                                  **prior)
        for key in ("hessian", "meat", "sums"):
            if key in ref:  # η = β₀ + Xβ rounds apart from [1 X]β by an ulp
                np.testing.assert_allclose(made[key], ref[key], rtol=1e-12,
                                           atol=1e-12 * np.abs(ref[key]).max())


def test_robust_cov_of_one_group_is_none():
    """The cluster-robust covariance needs 2 groups (its correction divides by G − 1):
    the kernel returns none for one, with the count, rather than dividing by zero."""
    data = sm.datasets.scotland.load_pandas()
    X, y = sm.add_constant(data.exog).to_numpy(float), data.endog.to_numpy(float)
    spec = kernels.GLMSpec("gamma", "log")
    coef = np.linalg.lstsq(X, np.log(y), rcond=None)[0]
    one = kernels.robust_sums(spec, X, y, coef, 0.1, cov_type="cluster",
                              labels=np.zeros(len(y)))
    assert kernels.robust_cov(one, X.shape[1]) == (None, 1)
    two = kernels.robust_sums(spec, X, y, coef, 0.1, cov_type="cluster",
                              labels=np.arange(len(y)) % 2)
    cov, groups = kernels.robust_cov(two, X.shape[1])
    assert groups == 2 and np.isfinite(cov).all()


def test_binomial_counts_frame(star98, client):
    """star98: successes out of --trials, a formula, the default logit and probit."""
    formula = "NABOVE ~ LOWINC + PERASIAN + PERBLACK + PERHISP + PERMINTE + AVYRSEXP"
    exog = sm.add_constant(star98[["LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE",
                                   "AVYRSEXP"]])
    endog = star98[["NABOVE", "NBELOW"]]
    for link, sm_link in (("logit", sm.families.links.Logit()),
                          ("probit", sm.families.links.Probit())):
        fit = streamlsq.fit_glm(star98, formula=formula, family="binomial", link=link,
                                trials="TRIALS", client=client)
        res = sm.GLM(endog, exog, family=sm.families.Binomial(sm_link)).fit()
        check_against(fit, res)
        assert list(fit.feature.values) == ["Intercept", "LOWINC", "PERASIAN", "PERBLACK",
                                            "PERHISP", "PERMINTE", "AVYRSEXP"]
    # the normal equations give the same fit to rounding
    normal = streamlsq.fit_glm(star98, formula=formula, family="binomial", trials="TRIALS",
                               solver="normal", client=client)
    close(normal.coef, fit.coef if link == "logit" else normal.coef)


def test_gamma_from_zarr_store_chunkings_agree(scotland, client, tmp_path):
    """scotland from a Zarr store (chunks of 10 rows), a Gamma fit; pieces of other sizes
    give the same numbers to 1e-10; the result store holds statsmodels' statistics."""
    data, path = scotland
    x = ["COUTAX", "UNEMPF", "MOR", "ACT", "GDP", "AGE", "COUTAX_FEMALEUNEMP"]
    out = tmp_path / "gamma.zarr"
    fit = streamlsq.fit_glm(path, x=x, y="YES", sample_dim="row", fit_intercept=True,
                            family="gamma", out=out, client=client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.GLM(data.YES, sm.add_constant(data[x]), family=sm.families.Gamma()).fit()
    check_against(fit, res)
    stored = streamlsq.open_result(out, lazy=False)
    close(stored.coef, fit.coef, rel=0)
    assert stored.attrs["family"] == "gamma" and stored.attrs["link"] == "inverse_power"
    assert stored.deviance_history.sizes["iteration"] == fit.attrs["iterations"] + 1
    small = streamlsq.fit_glm(path, x=x, y="YES", sample_dim="row", fit_intercept=True,
                              family="gamma", segment_bytes=1, client=client)
    close(small.coef, fit.coef, rel=1e-10)
    close(small.bse, fit.bse, rel=1e-10)
    table = streamlsq.summary(stored)
    assert list(table.columns)[:4] == ["coef", "std err", "z", "P>|z|"]
    assert table.attrs["model"]["family"] == "gamma"
    from streamlsq.stream.statistics import summary_text

    text = summary_text(stored)
    assert "Model Family:" in text and "inverse_power" in text and "Converged:" in text
    # the Wald test is statsmodels' f_test on GLMResults
    test = streamlsq.wald_test(stored, "COUTAX = 0, UNEMPF = 0")
    ref = res.f_test("COUTAX = 0, UNEMPF = 0")
    close(test.fvalue, float(np.squeeze(ref.fvalue)))
    close(test.pvalue, float(ref.pvalue), rel=1e-7)


def test_poisson_exposure_weights_categorical_parquet(cpunish, client):
    """cpunish from a Parquet folder: Poisson with an exposure, var_weights and a
    categorical term, a missing value dropped."""
    frame, folder = cpunish
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY + C(SOUTH)"
    fit = streamlsq.fit_glm(str(folder), formula=formula, family="poisson",
                            exposure="POP", weights="W", client=client)
    res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson(),
                              exposure=frame.POP, var_weights=frame.W).fit()
    check_against(fit, res)
    assert "C(SOUTH)[T.1.0]" in list(fit.feature.values)
    # a missing value in the exposure dropped, as statsmodels' missing="drop"
    holed = frame.copy()
    holed.loc[3, "POP"] = np.nan
    fit = streamlsq.fit_glm(holed, formula=formula, family="poisson", exposure="POP",
                            missing="drop", client=client)
    kept = holed.dropna()
    res = sm.GLM.from_formula(formula, kept, family=sm.families.Poisson(),
                              exposure=kept.POP).fit()
    check_against(fit, res)
    assert fit.attrs["rows_dropped"] == 1


def test_freq_weights_and_offset(cpunish, client):
    frame, _ = cpunish
    frame = frame.assign(F=(np.arange(len(frame)) % 3 + 1).astype(float),
                         OFF=np.log(frame.POP))
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY"
    fit = streamlsq.fit_glm(frame, formula=formula, family="poisson", freq_weights="F",
                            offset="OFF", client=client)
    res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson(),
                              freq_weights=frame.F, offset=frame.OFF).fit()
    check_against(fit, res)
    assert fit.nobs.values[0] == frame.F.sum()


def test_refusals_leave_nothing(client, tmp_path, star98):
    out = tmp_path / "r.zarr"
    rng = np.random.default_rng(0)
    x = rng.standard_normal(60)
    counts = pd.DataFrame({"x": x, "y": rng.poisson(2.0, 60).astype(float)})
    counts.loc[17, "y"] = -1.0
    with pytest.raises(InputError, match=r"row 17: response -1 is outside the support of the "
                                         r"poisson family"):
        streamlsq.fit_glm(counts, formula="y ~ x", family="poisson", out=out, client=client)
    assert not out.exists()
    separated = pd.DataFrame({"x": x, "y": (x > 0).astype(float)})
    with pytest.raises(InputError, match="separation"):
        streamlsq.fit_glm(separated, formula="y ~ x", family="binomial", out=out,
                          client=client)
    assert not out.exists()
    formula = "NABOVE ~ LOWINC + PERASIAN"
    with pytest.raises(InputError, match="did not converge in 2 iterations"):
        streamlsq.fit_glm(star98, formula=formula, family="binomial", trials="TRIALS",
                          maxiter=2, out=out, client=client)
    assert not out.exists()
    fit = streamlsq.fit_glm(star98, formula=formula, family="binomial", trials="TRIALS",
                            maxiter=2, allow_nonconverged=True, out=out, client=client)
    assert fit.attrs["converged"] is False and out.exists()
    assert "did not converge" in fit.attrs["nonconverged_reason"]


def test_resume_continues_after_last_iteration(star98, client, tmp_path, monkeypatch):
    """A checkpointed fit commits each pass; killed after its fourth pass, the resumed run
    takes the first four from the checkpoint, runs only the rest, and gives the same fit."""
    from streamlsq.stream.glm import GLMPass

    formula = "NABOVE ~ LOWINC + PERASIAN"
    options = dict(formula=formula, family="binomial", trials="TRIALS", client=client)
    whole = streamlsq.fit_glm(star98, **options)
    assert whole.attrs["passes"] == whole.attrs["iterations"] + 3
    computed = []
    original = GLMPass.compute

    def dies_after_four(self, ctx):
        if len(computed) == 4:
            raise KeyboardInterrupt("killed")
        computed.append(self.label)
        return original(self, ctx)

    monkeypatch.setattr(GLMPass, "compute", dies_after_four)
    ck, out = tmp_path / "ck", tmp_path / "fit.zarr"
    with pytest.raises(KeyboardInterrupt):
        streamlsq.fit_glm(star98, out=out, checkpoint=ck, **options)
    assert computed == ["glm-mean", "glm-irls-0", "glm-irls-1", "glm-irls-2"] and not out.exists()
    computed.clear()
    monkeypatch.setattr(GLMPass, "compute", lambda self, ctx: (computed.append(self.label),
                                                               original(self, ctx))[1])
    resumed = streamlsq.fit_glm(star98, out=out, checkpoint=ck, resume=True, **options)
    assert computed[0] == "glm-irls-3" and len(computed) == whole.attrs["passes"] - 4
    close(resumed.coef, whole.coef, rel=0)
    close(resumed.deviance_history, whole.deviance_history, rel=0)



def test_cli_refusal_one_line(cli, tmp_path):
    """``streamlsq fit glm`` on a negative count: exit code 2, one line naming the row and
    the remedy, no output left."""
    from conftest import one_line

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": rng.standard_normal(40), "y": rng.poisson(2.0, 40)
                          .astype(float)})
    frame.loc[5, "y"] = -2.0
    frame.to_parquet(tmp_path / "counts.parquet")
    out = tmp_path / "fit.zarr"
    result = cli("fit", "glm", tmp_path / "counts.parquet", "--out", out, "--family",
                 "poisson", "--formula", "y ~ x")
    line = one_line(result)
    assert "row 5: response -2 is outside the support of the poisson family" in line
    assert "drop the row" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.parquet"]
    done = cli("fit", "glm", tmp_path / "counts.parquet", "--out", out, "--family",
               "poisson", "--formula", "y ~ x", "--missing", "drop")
    assert done.exit_code == 2  # -2 is not missing: still refused



def test_two_group_variables_are_refused_not_read_as_one(cli, tmp_path):
    """--groups A,B (two-way clusters, least squares' only) is refused in one line before
    anything is read: a GLM's cluster covariance once read the first variable alone."""
    from conftest import one_line

    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.standard_normal(40), "y": rng.poisson(2.0, 40)
                          .astype(float), "a": rng.integers(0, 4, 40),
                          "b": rng.integers(0, 3, 40)})
    frame.to_parquet(tmp_path / "counts.parquet")
    out = tmp_path / "fit.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "counts.parquet", "--out", out, "--family",
                        "poisson", "--formula", "y ~ x", "--cov-type", "cluster",
                        "--groups", "a,b"))
    assert line.endswith("--groups a,b: a GLM's cluster-robust covariance takes one group "
                         "variable (two-way clusters are least squares' only)"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.parquet"]


def test_robust_and_cluster_covariances(cpunish, client):
    """HC0 (statsmodels' GLM gives the same for HC1–HC3) and the cluster-robust
    covariance (CRV1) from one more pass; the Wald test takes G − 1 denominator degrees of
    freedom as statsmodels' f_test."""
    frame, folder = cpunish
    frame = frame.assign(G=(np.arange(len(frame)) % 4).astype(float))
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY"
    for cov_type, kw, cov_kwds in (("HC1", {}, None),
                                   ("cluster", {"groups": "G"}, {"groups": frame.G})):
        fit = streamlsq.fit_glm(frame, formula=formula, family="poisson", cov_type=cov_type,
                                segment_bytes=1, client=client, **kw)
        res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson()).fit(
            cov_type=cov_type, cov_kwds=cov_kwds)
        check_against(fit, res)
        assert fit.attrs["cov_type"] == cov_type
    assert fit.attrs["n_groups"] == 4
    test = streamlsq.wald_test(fit, "INCOME = 0, PERPOVERTY = 0")
    ref = res.f_test("INCOME = 0, PERPOVERTY = 0")
    close(test.fvalue, float(np.squeeze(ref.fvalue)))
    assert test.df_denom == ref.df_denom == 3


def test_predict_with_intervals_equals_get_prediction(cpunish, client, tmp_path):
    """streamlsq.predict of a GLM fit (with an exposure) on new rows: the mean and the
    linear predictor with their delta-method intervals, as statsmodels' get_prediction."""
    frame, folder = cpunish
    formula = "EXECUTIONS ~ INCOME + PERPOVERTY + C(SOUTH)"
    streamlsq.fit_glm(str(folder), formula=formula, family="poisson", exposure="POP",
                      out=tmp_path / "fit.zarr", client=client)
    res = sm.GLM.from_formula(formula, frame, family=sm.families.Poisson(),
                              exposure=frame.POP).fit()
    pred = streamlsq.predict(tmp_path / "fit.zarr", str(folder), intervals=True, alpha=0.1,
                             out=tmp_path / "pred.zarr", client=client)
    frame_ref = res.get_prediction(frame, exposure=frame.POP).summary_frame(alpha=0.1)
    close(pred.yhat[:, 0], frame_ref["mean"])
    for name in ("mean_se", "mean_ci_lower", "mean_ci_upper"):
        close(pred[name][:, 0], frame_ref[name])
    linear = res.get_prediction(frame, exposure=frame.POP, which="linear")
    close(pred.linpred[:, 0], linear.predicted)
    close(pred.linpred_se[:, 0], linear.se)
    close(pred.linpred_ci_lower[:, 0], linear.conf_int(alpha=0.1)[:, 0])
    assert pred.attrs["model_method"] == "glm"


def test_declarations_name_the_kernels_families_and_links():
    from streamlsq.options.glm import FAMILY_NAMES, LINK_NAMES

    assert FAMILY_NAMES == kernels.FAMILY_NAMES
    assert set(LINK_NAMES) == set(kernels.LINKS)
    for name in FAMILY_NAMES:
        assert set(kernels.family(name).links) <= set(LINK_NAMES)


def test_nonfinite_working_weights_name_the_row():
    """A mean of 0 under the identity link of the Poisson family (V(0) = 0): the working
    weight is infinite; the kernel names the row, the pipeline the store and the remedy."""
    spec = kernels.GLMSpec("poisson", "identity")
    X = np.ones((3, 1))
    with pytest.raises(kernels.RowError, match="row 0: its working weight or response is "
                                               "not finite") as info:
        kernels.irls_sums(spec, X, np.array([1.0, 2.0, 0.0]), np.zeros(1))
    assert info.value.kind == "weights"
    with pytest.raises(ValueError, match="the gamma family takes the links"):
        kernels.family("gamma").link("logit")


def test_robust_covariance_of_noncanonical_links(star98, client):
    """The bread of a non-canonical link is the observed information, as statsmodels'
    GLM.hessian: binomial counts with the probit link, HC0 and clustered."""
    formula = "NABOVE ~ LOWINC + PERASIAN + PERBLACK"
    frame = star98.assign(G=(np.arange(len(star98)) % 7).astype(float))
    exog = sm.add_constant(frame[["LOWINC", "PERASIAN", "PERBLACK"]])
    family = sm.families.Binomial(sm.families.links.Probit())
    for cov_type, kw, cov_kwds in (("HC0", {}, None),
                                   ("cluster", {"groups": "G"}, {"groups": frame.G})):
        fit = streamlsq.fit_glm(frame, formula=formula, family="binomial", link="probit",
                                trials="TRIALS", cov_type=cov_type, client=client, **kw)
        res = sm.GLM(frame[["NABOVE", "NBELOW"]], exog, family=family).fit(
            cov_type=cov_type, cov_kwds=cov_kwds)
        check_against(fit, res)


def test_worker_counts_agree(scotland, client):
    """The session's two worker processes and a cluster of one threaded worker give the
    same fit (pieces and the tree of combines depend on the chunks, not on the workers)."""
    from distributed import Client, LocalCluster

    data, path = scotland
    x = ["COUTAX", "UNEMPF", "MOR"]
    options = dict(x=x, y="YES", sample_dim="row", fit_intercept=True, family="gamma",
                   link="log", segment_bytes=1)
    two = streamlsq.fit_glm(path, client=client, **options)
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as single:
        one = streamlsq.fit_glm(path, client=single, **options)
    close(one.coef, two.coef, rel=1e-10)
    close(one.bse, two.bse, rel=1e-10)
    close(one.llf, two.llf, rel=1e-10)


def test_fit_glm_keywords_are_the_declared_options():
    import inspect

    from streamlsq.options.glm import GLM

    params = inspect.signature(streamlsq.fit_glm).parameters
    keywords = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "out"]
    assert sorted(keywords) == sorted(GLM.names)
    for name in GLM.names:
        assert params[name].default == GLM.param(name).default, name


def test_two_column_binomial_response_equals_trials_and_statsmodels(star98, client, cli,
                                                                   tmp_path):
    """``successes + failures ~ x`` (statsmodels' 2-column endog, star98's own shape): the
    trials are the sum; the fit equals the ``--trials`` form and statsmodels' formula GLM to
    1e-8, from a frame and from ``fit glm --formula`` on a Parquet file; a count that is not
    a whole number is taken, as statsmodels takes it."""
    import statsmodels.formula.api as smf

    rhs = "LOWINC + PERASIAN + PERBLACK + PERHISP + PERMINTE * AVYRSEXP"
    counts = streamlsq.fit_glm(star98, formula=f"NABOVE + NBELOW ~ {rhs}", family="binomial",
                               cov_type="HC1", client=client)
    trials = streamlsq.fit_glm(star98, formula=f"NABOVE ~ {rhs}", family="binomial",
                               trials="TRIALS", cov_type="HC1", client=client)
    res = smf.glm(f"NABOVE + NBELOW ~ {rhs}", star98, family=sm.families.Binomial()).fit(
        cov_type="HC1")
    assert res.model.endog_names == ["NABOVE", "NBELOW"]
    check_against(counts, res)
    for name in ("coef", "bse", "cov_params", "deviance", "llf", "pearson_chi2"):
        close(counts[name], trials[name], rel=1e-12)
    assert counts.attrs["trials_variable"] == "NABOVE + NBELOW"
    assert list(counts.target.values) == ["NABOVE"]
    # applied to rows (which hold the two counts, unused): statsmodels' predicted proportion
    pred = streamlsq.predict(counts, star98, client=client)
    close(pred.yhat[:, 0], res.predict(star98))
    # the command line on a Parquet file, the same fit
    star98.to_parquet(tmp_path / "star98.parquet")
    out = tmp_path / "fit.zarr"
    done = cli("fit", "glm", tmp_path / "star98.parquet", "--out", out, "--family",
               "binomial", "--formula", f"NABOVE + NBELOW ~ {rhs}", "--cov-type", "HC1")
    assert done.exit_code == 0, done.output
    stored = streamlsq.open_result(out, lazy=False)
    check_against(stored, res)
    # counts that are not whole numbers: statsmodels takes them, so does the fit
    halves = star98.assign(NABOVE=star98.NABOVE + 0.5)
    fit = streamlsq.fit_glm(halves, formula="NABOVE + NBELOW ~ LOWINC + PERASIAN",
                            family="binomial", client=client)
    check_against(fit, smf.glm("NABOVE + NBELOW ~ LOWINC + PERASIAN", halves,
                               family=sm.families.Binomial()).fit())
    # a missing failure count dropped with --missing drop, as statsmodels' missing="drop"
    holed = star98.copy()
    holed.loc[11, "NBELOW"] = np.nan
    fit = streamlsq.fit_glm(holed, formula="NABOVE + NBELOW ~ LOWINC + PERASIAN",
                            family="binomial", missing="drop", client=client)
    check_against(fit, smf.glm("NABOVE + NBELOW ~ LOWINC + PERASIAN", holed.dropna(),
                               family=sm.families.Binomial()).fit())
    assert fit.attrs["rows_dropped"] == 1


@pytest.mark.parametrize("family, formula, extra, message", [
    ("binomial", "NABOVE + NBELOW ~ LOWINC", (),
     "NBELOW row 7: count -3 is negative: successes and failures are counts (>= 0); a "
     "binomial response of two columns is successes + failures"),
    ("binomial", "NABOVE + NBELOW + TRIALS ~ LOWINC", (),
     "formula 'NABOVE + NBELOW + TRIALS ~ LOWINC': its left side has 3 terms; a GLM takes "
     "one response, or two for a binomial one (successes + failures)"),
    ("poisson", "NABOVE + NBELOW ~ LOWINC", (),
     "formula 'NABOVE + NBELOW ~ LOWINC': a left side of two terms (successes + failures) "
     "is a binomial response; the poisson family takes one"),
    ("binomial", "NABOVE + NBELOW ~ LOWINC", ("--trials", "TRIALS"),
     "formula 'NABOVE + NBELOW ~ LOWINC': its two columns are successes + failures, the "
     "trials their sum: leave out --trials TRIALS"),
])
def test_two_column_response_refusals(star98, cli, tmp_path, family, formula, extra,
                                      message):
    """Negative counts, a left side of more than two terms, two columns for another family
    or beside --trials: exit 2, one line, nothing written."""
    from conftest import one_line

    frame = star98.copy()
    frame.loc[7, "NBELOW"] = -3.0
    frame.to_parquet(tmp_path / "star98.parquet")
    line = one_line(cli("fit", "glm", tmp_path / "star98.parquet", "--out",
                        tmp_path / "fit.zarr", "--family", family, "--formula", formula,
                        *extra))
    assert line.endswith(message), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["star98.parquet"]


@pytest.mark.parametrize("solver", ["qr", "normal"])
def test_the_rank_rule_names_aliased_columns_and_fits_ill_conditioned_designs(
        cli, tmp_path, solver):
    """The one rank rule of linear fits (decided on the column-equilibrated factor of
    √W·X): an exactly aliased column is refused naming it, in one line with nothing
    written; a well-posed Poisson design in badly scaled columns (κ ≈ 1e8 unscaled) is
    fitted, equal to statsmodels'."""
    from conftest import one_line

    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 300)
    frame = pd.DataFrame({"x": x, "xcopy": 2.0 * x, "big": 1e6 * (x ** 2),
                          "y": rng.poisson(np.exp(0.5 + x)).astype(float)})
    frame.to_parquet(tmp_path / "t.parquet")
    out = tmp_path / "fit.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", "y ~ x + xcopy", "--solver", solver))
    assert "numerical rank 2 of 3: column 'xcopy' is aliased with 'x'" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
    assert cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family", "poisson",
               "--formula", "y ~ x + big", "--solver", solver).exit_code == 0
    fit = xr.open_zarr(out)
    ref = sm.GLM(frame["y"], sm.add_constant(frame[["x", "big"]]),
                 family=sm.families.Poisson()).fit()
    close(fit.coef.values.ravel(), ref.params.values, rel=1e-7)


#: star98's covariates of the in-memory binomial fits
STAR98_X = ["LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE", "AVYRSEXP"]


@pytest.mark.parametrize("weighted", [False, True])
def test_glm_regressor_two_column_binomial_is_statsmodels(star98, weighted):
    """GLMRegressor(family="binomial") on y of shape (n, 2), (successes, failures): the
    fit of statsmodels' ``GLM(np.column_stack([S, F]), X, family=Binomial())`` (with
    ``var_weights`` as sample_weight), predict its probability, score the R² of the
    proportions weighted by the trials; a DataFrame of the two columns fits the same."""
    from sklearn.metrics import r2_score

    from streamlsq.estimators.glm import GLMRegressor

    X = star98[STAR98_X].to_numpy()
    S, F = star98.NABOVE.to_numpy(), star98.NBELOW.to_numpy()
    y = np.column_stack([S, F])
    w = 0.5 + (np.arange(len(y)) % 4) / 2.0 if weighted else None
    model = GLMRegressor(family="binomial").fit(X, y, sample_weight=w)
    res = sm.GLM(y, sm.add_constant(X), family=sm.families.Binomial(), var_weights=w).fit()
    close(model.params_, res.params)
    close(model.intercept_, res.params[0])
    close(model.coef_, res.params[1:])
    close(model.bse_, res.bse)
    close(model.deviance_, res.deviance)
    assert model.converged_ and abs(model.n_iter_ - res.fit_history["iteration"]) <= 1
    probability = res.predict(sm.add_constant(X))
    close(model.predict(X), probability)
    trials = (S + F) * (1.0 if w is None else w)
    close(model.score(X, y, sample_weight=w), r2_score(S / (S + F), probability,
                                                       sample_weight=trials))
    framed = GLMRegressor(family="binomial").fit(star98[STAR98_X],
                                                 star98[["NABOVE", "NBELOW"]],
                                                 sample_weight=w)
    close(framed.params_, model.params_, rel=1e-14)
    # without an intercept: statsmodels' fit of the same columns
    bare = GLMRegressor(family="binomial", fit_intercept=False).fit(X, y, sample_weight=w)
    close(bare.coef_, sm.GLM(y, X, family=sm.families.Binomial(), var_weights=w).fit().params)
    assert bare.intercept_ == 0.0


def _with(y, row, column, value):
    y = y.copy()
    y[row, column] = value
    return y


@pytest.mark.parametrize("family, response, error, message", [
    ("binomial", lambda y: np.column_stack([y, y[:, 0]]), ValueError,
     "GLMRegressor: y of shape (303, 3): a binomial response is one column (0/1 or "
     "proportions) or two of counts (successes, failures)"),
    ("poisson", lambda y: y, ValueError,
     "GLMRegressor: y of shape (303, 2) has 2 columns; only family='binomial' takes two "
     "(successes, failures), the poisson family one"),
    ("binomial", lambda y: _with(y, 5, 1, -2.0), InputError,
     "y[:, 1] (failures): row 5: count -2 is negative: successes and failures are counts "
     "(>= 0)"),
    ("binomial", lambda y: _with(y, 9, 0, -1.0), InputError,
     "y[:, 0] (successes): row 9: count -1 is negative: successes and failures are counts "
     "(>= 0)"),
    ("binomial", lambda y: _with(_with(y, 7, 0, 0.0), 7, 1, 0.0), InputError,
     "y: row 7: 0 trials: a binomial count needs at least one trial"),
])
def test_glm_regressor_refuses_bad_two_column_responses(star98, family, response, error,
                                                        message):
    """A response of two columns for a family other than binomial, of three columns, a
    negative count (naming its column and row) or a row of 0 trials: refused in one line,
    the estimator left unfitted."""
    from sklearn.exceptions import NotFittedError

    from streamlsq.estimators.glm import GLMRegressor

    y = response(star98[["NABOVE", "NBELOW"]].to_numpy())
    model = GLMRegressor(family=family)
    with pytest.raises(error) as info:
        model.fit(star98[STAR98_X].to_numpy(), y)
    assert str(info.value) == message
    with pytest.raises(NotFittedError):
        model.predict(star98[STAR98_X].to_numpy())
