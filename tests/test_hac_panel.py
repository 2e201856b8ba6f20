"""HAC within panels (``cov_type="hac-panel"``) through the pipeline, against statsmodels'
``OLS(...).fit(cov_type="hac-panel")`` on its grunfeld panel (11 firms × 20 years, stacked
by firm): several lags, among them more than a chunk holds (the halo crosses chunk edges),
chunkings that cut the panels, both engines, stores and Parquet (with a formula), both
small-sample corrections; the same numbers whatever the chunking; the refusals of panels
out of order, too short for the lags or without a label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import xarray as xr
from test_timeseries_inference import PANEL, RTOL, _like, _parquet, _same, _store

from streamlsq import fit_stream, robust_covariance
from streamlsq.kernels import inference
from streamlsq.stream.statistics import summary_text

from conftest import one_line


@pytest.fixture(scope="module")
def grunfeld(tmp_path_factory):
    """statsmodels' grunfeld: firms as strings, years as integers; stores of 9 and 64 rows
    a chunk (a 9-row chunk cuts every 20-row panel) and a Parquet file of 25-row row
    groups."""
    d = sm.datasets.grunfeld.load_pandas().data
    frame = pd.DataFrame({"invest": d.invest, "value": d.value, "capital": d.capital,
                          "firm": d.firm.to_numpy().astype(str),
                          "year": d.year.to_numpy().astype(np.int64)})
    # the data set is stacked by firm, each firm's years in order: statsmodels' layout
    firm_runs = (frame.firm.to_numpy()[1:] != frame.firm.to_numpy()[:-1]).sum() + 1
    assert firm_runs == frame.firm.nunique() == 11
    assert (frame.groupby("firm", sort=False).year.diff().dropna() > 0).all()
    root = tmp_path_factory.mktemp("grunfeld")
    inputs = [_store(root / "g9.zarr", frame, 9), _store(root / "g64.zarr", frame, 64),
              _parquet(root / "g.parquet", frame, 25)]
    return frame, inputs


def _reference(frame, maxlags, **kwds):
    X = sm.add_constant(frame[["value", "capital"]].to_numpy())
    firm = np.unique(frame.firm, return_inverse=True)[1]
    ref = sm.OLS(frame.invest.to_numpy(), X).fit(cov_type="hac-panel", cov_kwds={
        "groups": firm, "maxlags": maxlags, **kwds})
    _ = ref.fvalue
    return ref


@pytest.mark.parametrize("maxlags", [0, 12])
def test_hac_panel_equals_statsmodels_on_both_engines_stores_and_parquet(
        grunfeld, client, maxlags):
    """12 lags reach across two 9-row chunks; the 9-row chunks and the pieces (one chunk
    each) cut every panel; the formula from Parquet builds the same design."""
    frame, inputs = grunfeld
    ref = _reference(frame, maxlags)
    runs = [(inputs[0], "sequential", PANEL), (inputs[0], "scan", PANEL),
            (inputs[1], "scan", PANEL), (inputs[2], "sequential", PANEL),
            (inputs[2], "scan", {"formula": "invest ~ value + capital"})]
    fits = []
    for data, engine, design in runs:
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=7, client=client,
                        cov_type="hac-panel", groups="firm", maxlags=maxlags,
                        segment_bytes=64, **design)
        _like(ds, ref)
        assert ds.attrs["df_resid_inference"] == ref.df_resid_inference == 10
        assert ds.attrs["n_groups"] == 11
        fits.append(ds)
    for ds in fits[1:]:
        _same(ds, fits[0])
    assert ds.attrs["cov_type"] == "hac-panel" and ds.attrs["maxlags"] == maxlags
    assert ds.attrs["groups_variable"] == "firm"
    assert (f"hac-panel (bartlett kernel, {maxlags} lags within the panels of 'firm', with "
            "the hac small-sample correction)") in summary_text(ds)


@pytest.mark.parametrize("correction", ["cluster", False, "hac", True])
def test_hac_panel_small_sample_corrections_and_the_uniform_kernel(grunfeld, client,
                                                                   correction):
    """'hac' (the default), 'cluster', False; True (--use-correction) is 'hac' (statsmodels'
    True applies none)."""
    frame, inputs = grunfeld
    ref = _reference(frame, 5, use_correction="hac" if correction is True else correction,
                     kernel="uniform")
    fit = fit_stream(inputs[0], "kf4lls", client=client, **PANEL)
    ds = robust_covariance(fit, inputs[0], cov_type="hac-panel", groups="firm", maxlags=5,
                           kernel="uniform", use_correction=correction, client=client)
    _like(ds, ref)
    words = {"cluster": "with the cluster small-sample correction",
             False: "without small-sample correction"}.get(
        correction, "with the hac small-sample correction")
    assert f"uniform kernel, 5 lags within the panels of 'firm', {words}" in summary_text(ds)


@pytest.mark.parametrize("switch, correction", [
    (["--use-correction", "cluster"], "cluster"), (["--use-correction=hac"], "hac"),
    (["--use-correction"], "hac"), (["--no-use-correction"], False)])
def test_the_command_line_takes_each_small_sample_correction(grunfeld, cli, tmp_path, switch,
                                                             correction):
    """``--use-correction [hac|cluster]`` and ``--no-use-correction``: one option of the
    command line for the one declaration, each spelling the fit Python makes."""
    frame, inputs = grunfeld
    out = tmp_path / "fit.zarr"
    done = cli("fit", "kf4lls", inputs[0], "--x", "value,capital", "--y", "invest",
               "--sample-dim", "row", "--intercept", "--cov-type", "hac-panel", "--groups",
               "firm", "--maxlags", "5", *switch, "--out", out)
    assert done.exit_code == 0, done.output
    _like(xr.open_zarr(out), _reference(frame, 5, use_correction=correction))


def test_the_command_line_refuses_another_correction_in_one_line(grunfeld, cli, tmp_path):
    out = tmp_path / "fit.zarr"
    refused = cli("fit", "kf4lls", grunfeld[1][0], "--x", "value,capital", "--y", "invest",
                  "--sample-dim", "row", "--cov-type", "hac-panel", "--groups", "firm",
                  "--maxlags", "5", "--use-correction", "both", "--out", out)
    assert ("--use-correction: alone, or with 'hac' or 'cluster' (--no-use-correction for "
            "none), got 'both'") in one_line(refused)
    assert not out.exists()


OPTION_REFUSALS = [
    ({"cov_type": "HAC", "maxlags": 2, "use_correction": "cluster"},
     "--use-correction cluster (use_correction='cluster') goes with --cov-type hac-panel"),
    ({"cov_type": "hac-groupsum", "time": "t", "maxlags": 2, "use_correction": "hac"},
     "--use-correction hac (use_correction='hac') goes with --cov-type hac-panel"),
    ({"cov_type": "hac-panel", "groups": "g", "maxlags": 2, "use_correction": "both"},
     "use_correction must be"),
    ({"cov_type": "hac-panel", "groups": "g"},
     "--cov-type hac-panel needs the rows' panel labels and the number of lags"),
    ({"cov_type": "HC1", "time": "t"}, "--time VAR goes with --cov-type hac-groupsum or "
     "hac-panel"),
]


@pytest.mark.parametrize("values, message", OPTION_REFUSALS)
def test_the_options_of_hac_panel_are_checked_before_anything_runs(values, message):
    from streamlsq.errors import InputError
    from streamlsq.options.fit import FIT, ROBUST

    for options in (FIT, ROBUST):
        with pytest.raises(InputError, match=None) as info:
            options.check(values)
        assert message in str(info.value)
    checked = FIT.check({"cov_type": "hac-panel", "groups": "g", "time": "t", "maxlags": 3,
                         "use_correction": "cluster"})
    assert checked["use_correction"] == "cluster" and checked["time"] == "t"


def test_time_labels_check_the_order_and_change_nothing_else(grunfeld, client):
    """--time VAR with hac-panel: each panel's rows checked in increasing time order (the
    pieces cut the panels, so the check crosses the pieces' edges); the numbers are those
    without it."""
    frame, inputs = grunfeld
    ref = _reference(frame, 4)
    ds = fit_stream(inputs[0], "kf4lls", engine="scan", client=client, cov_type="hac-panel",
                    groups="firm", time="year", maxlags=4, segment_bytes=64, **PANEL)
    _like(ds, ref)
    assert "panels of 'firm' in the order of 'year'" in ds.attrs["cov_description"]


def test_hac_panel_with_missing_drop_closes_up_each_panel(grunfeld, tmp_path, client):
    """--missing drop: a row with a missing value leaves its panel and the rows around it
    are neighbours (statsmodels' OLS on the rows kept, with their firms); a whole firm's
    first rows and rows at the pieces' edges among them."""
    frame, _ = grunfeld
    frame = frame.copy()
    frame.loc[[0, 1, 17, 18, 19, 20, 44, 45, 80, 179, 219], "value"] = np.nan
    data = _store(tmp_path / "g9.zarr", frame, 9)
    kept = frame.dropna()
    ref = _reference(kept, 6)
    for engine in ("sequential", "scan"):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=7, client=client,
                        cov_type="hac-panel", groups="firm", maxlags=6, missing="drop",
                        segment_bytes=64, **PANEL)
        _like(ds, ref)
        assert int(ds.nobs.values[0]) == len(kept)


def test_the_panel_kernel_is_statsmodels_s_nw_panel_whatever_the_cut():
    """The parts of two pieces (the second with a halo of the lags' partners) add up to
    the meat of all the rows, and that is statsmodels' S_nw_panel of the scores; with
    rows of weight 0 closed up; the runs of the pieces join into the panels."""
    from statsmodels.stats.sandwich_covariance import S_nw_panel, weights_bartlett

    rng = np.random.default_rng(4)
    sizes = [7, 1, 12, 3, 9, 8]
    labels = np.repeat(np.array(["f", "a", "c", "b", "e", "d"]), sizes)
    n, L = len(labels), 5
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal((n, 1))
    coef = rng.standard_normal((3, 1))
    scores = X * (Y[:, 0] - X @ coef[:, 0])[:, None]
    edges = np.cumsum([0, *sizes])
    expected = S_nw_panel(scores, weights_bartlett(L), list(zip(edges[:-1], edges[1:],
                                                                strict=True)))
    whole = inference.panel_hac_meat(X, Y, coef, L, labels)["meat"][:, :, 0]
    # entries near 0 (sums of products of either sign) are held to the meat's scale
    scale = np.abs(expected).max()
    np.testing.assert_allclose(whole, expected, rtol=1e-12, atol=1e-13 * scale)
    rows = np.arange(n)
    for cut in (1, 4, 7, 8, 19, 20, 39):
        halo = min(L, cut)
        first = inference.panel_hac_meat(X[:cut], Y[:cut], coef, L, labels[:cut])
        second = inference.panel_hac_meat(X[cut - halo:], Y[cut - halo:], coef, L,
                                          labels[cut - halo:], halo=halo)
        np.testing.assert_allclose(first["meat"][:, :, 0] + second["meat"][:, :, 0],
                                   expected, rtol=1e-12, atol=1e-13 * scale)
        runs = inference.merge_panel_runs(inference.panel_runs(labels[:cut], rows[:cut]),
                                          inference.panel_runs(labels[cut:], rows[cut:]))
        assert runs["labels"].tolist() == ["f", "a", "c", "b", "e", "d"]
        assert runs["starts"].tolist() == edges[:-1].tolist()
        assert runs["counts"].tolist() == sizes
        assert inference.repeated_panel(runs) is None
    # pieces of 3 rows: some wholly inside a panel, merged in a tree of merges
    pieces = [inference.panel_runs(labels[a:a + 3], rows[a:a + 3]) for a in range(0, n, 3)]
    tree = inference.merge_panel_runs(inference.merge_panel_runs(*pieces[:5]),
                                      inference.merge_panel_runs(*pieces[5:]))
    assert tree["counts"].tolist() == sizes and tree["starts"].tolist() == edges[:-1].tolist()
    w = rng.uniform(0.5, 2.0, n)
    w[[0, 7, 8, 20, 21, 22, 39]] = 0.0
    keep = w > 0
    wscores = (X * (w * (Y[:, 0] - X @ coef[:, 0]))[:, None])[keep]
    ids = inference.panel_ids(labels[keep])
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    groupidx = list(zip(starts, np.r_[starts[1:], keep.sum()], strict=True))
    meat = inference.panel_hac_meat(X, Y, coef, L, labels, weights=w)
    weighted = S_nw_panel(wscores, weights_bartlett(L), groupidx)
    np.testing.assert_allclose(meat["meat"][:, :, 0], weighted, rtol=1e-12,
                               atol=1e-13 * np.abs(weighted).max())
    again = inference.merge_panel_runs(inference.panel_runs(["a", "b"], [0, 1]),
                                       inference.panel_runs(["c", "a"], [2, 3]))
    assert inference.repeated_panel(again) == 3
    order = inference.time_order_break(inference.panel_ids(["a", "a", "b", "b", "b"]),
                                       [1, 2, 5, 7, 7])
    assert order == 4 and inference.time_order_break(
        inference.panel_ids(["a", "a", "b", "b"]), [1, 2, 0, 1]) is None


def _bad_panel(tmp_path, how: str) -> str:
    """grunfeld made malformed: ``swap`` exchanges the last row of the second firm and a
    row of the third (the second firm's panel starts again at row 45), ``years`` swaps two
    years within a firm, ``unlabelled`` takes the label of a row away."""
    d = sm.datasets.grunfeld.load_pandas().data
    frame = pd.DataFrame({"invest": d.invest, "value": d.value, "capital": d.capital,
                          "firm": d.firm.to_numpy().astype(str),
                          "year": d.year.to_numpy().astype(np.int64)})
    if how == "swap":
        order = np.arange(len(frame))
        order[[39, 45]] = order[[45, 39]]
        frame = frame.iloc[order].reset_index(drop=True)
    elif how == "years":
        frame.loc[[52, 53], "year"] = frame.loc[[53, 52], "year"].to_numpy()
    elif how == "unlabelled":
        frame.loc[61, "firm"] = ""
    return _store(tmp_path / "bad.zarr", frame, 9)


PANEL_REFUSALS = [
    ("swap", ("--groups", "firm", "--maxlags", "2"),
     "variable 'firm' row 45: panel '{firm1}' starts again after rows of other panels; "
     "hac-panel needs the rows of each panel together, in time order"),
    ("years", ("--groups", "firm", "--time", "year", "--maxlags", "2"),
     "variable 'year' row 53: time 1947 is not after 1948 of the row before in panel "
     "'{firm2}'; hac-panel needs the rows of each panel in time order"),
    ("none", ("--groups", "firm", "--maxlags", "20"),
     "variable 'firm' row 0: panel '{firm0}' holds 20 row(s), not more than --maxlags 20; "
     "hac-panel needs panels longer than the lags"),
    ("unlabelled", ("--groups", "firm", "--maxlags", "2"),
     "has no label at row 61; give every row a group"),
    ("none", ("--maxlags", "2"),
     "--cov-type hac-panel needs the rows' panel labels and the number of lags: --groups VAR "
     "--maxlags L"),
    ("none", ("--groups", "firm,year", "--maxlags", "2"),
     "--cov-type hac-panel takes one panel variable, got --groups firm,year"),
]


@pytest.mark.parametrize("how, args, message", PANEL_REFUSALS,
                         ids=[f"{h} {' '.join(a)}" for h, a, _ in PANEL_REFUSALS])
def test_malformed_panels_are_refused_in_one_line(tmp_path, cli, how, args, message):
    from conftest import one_line

    firms = sm.datasets.grunfeld.load_pandas().data.firm.to_numpy().astype(str)
    data = _bad_panel(tmp_path, how)
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "kf4lls", data, "--x", "value,capital", "--y", "invest",
                        "--sample-dim", "row", "--intercept", "--cov-type", "hac-panel",
                        *args, "--out", out))
    assert message.format(firm0=firms[0], firm1=firms[20], firm2=firms[40]) in line
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.zarr"]


def test_hac_panel_from_the_command_line_and_its_summary(grunfeld, cli, tmp_path):
    frame, inputs = grunfeld
    out = tmp_path / "fit.zarr"
    ok = cli("fit", "kf4lls", inputs[2], "--formula", "invest ~ value + capital",
             "--cov-type", "hac-panel", "--groups", "firm", "--time", "year", "--maxlags", "3",
             "--no-use-correction", "--out", out)
    assert ok.exit_code == 0, ok.output
    ref = _reference(frame, 3, use_correction=False)
    ds = xr.open_zarr(out)
    np.testing.assert_allclose(ds.bse.values[:, 0], ref.bse, rtol=RTOL)
    info = cli("info", out)
    assert info.exit_code == 0, info.output
    assert ("hac-panel (bartlett kernel, 3 lags within the panels of 'firm' in the order of "
            "'year', without small-sample correction)") in info.output
