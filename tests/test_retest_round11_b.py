"""Re-test round 11, part B: ``metalearn``'s ``--k`` meant both the number of components
and, with ``--threshold``, the subspace's rank alone (one word, two things): the rank of a
cut at a distance is now ``--rank``; and the cases found weak or broken by the re-test."""

from __future__ import annotations

import numpy as np
import pytest

import streamlsq
from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    """Three well separated components: a cut at Δ²/2 = 1 finds them."""
    root = tmp_path_factory.mktemp("tasks")
    return streamlsq.simulate_mlr(root / "tasks.zarr", k=3, d=5, n_light=600, t_light=4,
                                  n_heavy=60, t_heavy=40, n_light2=200, t_light2=8, seed=3,
                                  client=client)


def _values(model) -> dict:
    return {name: model[name].values for name in model.data_vars
            if not name.startswith("seconds")}


# -- 1. metalearn: --rank with --threshold ---------------------------------------------------

def test_a_cut_at_a_distance_takes_its_rank_from_rank(tasks, tmp_path, cli, client):
    """Round 11: ``--k 3 --threshold 1`` (the rank 3, the clusters the cut's) is now
    ``--rank 3 --threshold 1``; where the cut finds the 3 components, the model is bit for
    bit ``--k 3``'s (the same subspace, the same clusters), and its ``parameters`` say
    ``rank``, not ``k``."""
    out = tmp_path / "m.zarr"
    run = cli("metalearn", tasks, "--out", out, "--rank", 3, "--threshold", 1.0)
    assert run.exit_code == 0, run.output
    assert (f"wrote {out}: 3 clusters (cut at --threshold 1, of a subspace of --rank 3) "
            "from") in run.output
    cut = streamlsq.open_result(out, lazy=False)
    by_k = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    assert cut.sizes["cluster"] == 3 and cut.sizes["rank"] == 3
    cut_values, k_values = _values(cut), _values(by_k)
    assert cut_values.keys() == k_values.keys()
    for name, value in k_values.items():
        np.testing.assert_array_equal(cut_values[name], value, name)
    import json

    parameters = json.loads(cut.attrs["parameters"])
    assert parameters["rank"] == 3 and parameters["threshold"] == 1.0
    assert "k" not in parameters


def test_the_rank_of_a_cut_is_the_rank_of_its_subspace(tasks, client):
    """A cut finding fewer clusters than the rank: the subspace is still ``rank``'s (the
    basis of ``k=rank``), the clusters the cut's."""
    cut = streamlsq.metalearn(tasks, threshold=1e6, rank=3, client=client, progress=False)
    by_k = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    np.testing.assert_array_equal(cut.basis.values, by_k.basis.values)
    assert cut.sizes["cluster"] == 1


@pytest.mark.parametrize("given, wanted", [
    (("--k", 3, "--threshold", 1.0),
     "--k (k=) does not go with --threshold (threshold=): the cut finds the clusters; give "
     "the subspace's rank as --rank R (rank=R)"),
    (("--rank", 3),
     "--rank (rank=) goes with --threshold T (threshold=T), a cut of the linkage at a "
     "distance; without it, --k K is both the subspace's rank and the clusters"),
    (("--k", 3, "--rank", 3),
     "--rank (rank=) goes with --threshold T (threshold=T), a cut of the linkage at a "
     "distance; without it, --k K is both the subspace's rank and the clusters"),
    (("--threshold", 1.0),
     "--threshold (threshold=) goes with --rank R (rank=R), the subspace's rank (the cut "
     "then finds the clusters); without --threshold, --k K is both the rank and the "
     "clusters"),
    (("--rank", 3, "--threshold", 1.0, "--k-max", 3),
     "--k-max (k_max=) goes with --k auto (k='auto', the default), the largest k it tries; "
     "--threshold (threshold=) cuts at a distance"),
])
def test_k_with_a_threshold_is_refused_naming_rank(tasks, tmp_path, cli, given, wanted):
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, *given))
    assert line == f"streamlsq: error: {wanted}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_k_with_a_threshold_from_python(tasks, tmp_path, client):
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=r"^--k \(k=\) does not go with --threshold "
                                         r"\(threshold=\): .* --rank R \(rank=R\)$"):
        streamlsq.metalearn(tasks, 3, threshold=1.0, out=tmp_path / "m.zarr", client=client)
    assert snapshot(tmp_path) == before


def test_a_rank_above_the_features_names_rank(tasks, tmp_path, cli):
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, "--rank", 9, "--threshold", 1.0))
    assert line.startswith(f"streamlsq: error: {tasks}: --rank 9 is larger than the number "
                           "of features d = 5"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_resume_with_another_rank_names_rank(tasks, tmp_path, client, monkeypatch):
    from streamlsq.io.checkpoint import EntryCheckpoint

    class Stop(Exception):
        pass

    save = EntryCheckpoint.save

    def save_then_stop(self, name, value, reads=()):
        save(self, name, value, reads)
        raise Stop(name)

    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        m.setattr(EntryCheckpoint, "save", save_then_stop)
        with pytest.raises(Stop):
            streamlsq.metalearn(tasks, rank=3, threshold=1.0, checkpoint=ckpt, client=client,
                                progress=False)
    with pytest.raises(InputError, match=r"differs in: --rank 3 then, 2 now\)"):
        streamlsq.metalearn(tasks, rank=2, threshold=1.0, checkpoint=ckpt, resume=True,
                            client=client, progress=False)
    resumed = streamlsq.metalearn(tasks, rank=3, threshold=1.0, checkpoint=ckpt, resume=True,
                                  client=client, progress=False)
    whole = streamlsq.metalearn(tasks, rank=3, threshold=1.0, client=client, progress=False)
    for name, value in _values(whole).items():
        np.testing.assert_array_equal(_values(resumed)[name], value, name)
