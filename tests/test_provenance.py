"""Every result store says what made it, from what, when and with which version (one
provenance function builds these attributes for all of them)."""

from __future__ import annotations

import json

import pytest

import streamlsq
from streamlsq import (
    fit_em,
    fit_interleaved,
    fit_pooled,
    fit_stream,
    metalearn,
    open_result,
    predict,
    simulate_interleaved,
    simulate_mlr,
)

COMMON = {"method", "parameters", "input", "input_group", "streamlsq_version", "created"}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("prov") / "tasks.zarr"
    simulate_mlr(path, k=2, d=4, n_light=2_000, t_light=4, n_heavy=60, t_heavy=40,
                 n_light2=500, t_light2=8, seed=3, client=client)
    return path


def _check(path, method):
    attrs = open_result(path).attrs
    assert COMMON <= set(attrs), sorted(COMMON - set(attrs))
    assert attrs["method"] == method
    assert attrs["streamlsq_version"] == streamlsq.__version__
    assert isinstance(json.loads(attrs["parameters"]), dict)
    return attrs


def test_every_result_kind_carries_the_common_attributes(tasks, stream_200k, client, tmp_path):
    fit_stream(stream_200k, "kf4lls", out=tmp_path / "fit.zarr", client=client)
    assert _check(tmp_path / "fit.zarr", "kf4lls")["input"] == str(stream_200k)
    metalearn(tasks, 2, out=tmp_path / "model.zarr", client=client)
    _check(tmp_path / "model.zarr", "metalearn")
    fit_pooled(tasks, out=tmp_path / "pooled.zarr", client=client)
    _check(tmp_path / "pooled.zarr", "pooled")
    fit_em(tasks, 2, out=tmp_path / "em.zarr", init="truth", iterations=3, client=client)
    _check(tmp_path / "em.zarr", "em")
    predict(tmp_path / "model.zarr", tasks, out=tmp_path / "pred.zarr", client=client)
    _check(tmp_path / "pred.zarr", "predict")
    pop = simulate_interleaved(tmp_path / "pop.zarr", client=client)
    fit_interleaved(f"{pop}#a", f"{pop}#b", alpha=0.25, out=tmp_path / "il.zarr", client=client)
    attrs = _check(tmp_path / "il.zarr", "interleaved-kf4lls")
    assert [i["role"] for i in json.loads(attrs["inputs"])] == ["a", "b"]
