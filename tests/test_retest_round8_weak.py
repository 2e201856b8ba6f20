"""Weak cases of the re-test of round 8 (right outcome, unclear way): an option no part of
the run reads was ignored without a word (``metalearn --heavy-rows`` with the store's
roles, ``--k`` beside ``--threshold``, ``fit lms --eps`` without ``--normalized``), or
refused in Python's spelling on the command line (``--tau``, ``--power``); a resume's
refusal named fields that had not changed; a formula's function of a text column advised
``C(x)``; ``open_result`` took storage options for a local path."""

from __future__ import annotations

import pytest

import streamlsq
from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    """A task store with the variable 'role' (d = 4, two well separated components)."""
    root = tmp_path_factory.mktemp("tasks")
    streamlsq.simulate_mlr(root / "tasks.zarr", k=2, d=4, n_light=600, t_light=4,
                           n_heavy=60, t_heavy=40, n_light2=200, t_light2=8, seed=1,
                           client=client)
    return root / "tasks.zarr"


# -- 1. --heavy-rows with the store's roles -----------------------------------------------

@pytest.mark.parametrize("roles, wanted", [
    ((), "{tasks}: --heavy-rows 20 goes with roles by rows per task, and the store's "
         "variable 'role' gives the roles (--roles auto takes it); give --roles rows to let "
         "--heavy-rows choose the heavy tasks"),
    (("--roles", "store"), "--heavy-rows N goes with --roles rows (or auto on a store "
                           "without 'role'); --roles store takes the heavy tasks from the "
                           "store's variable 'role'"),
])
def test_heavy_rows_with_the_stores_roles_is_refused(tasks, tmp_path, cli, roles, wanted):
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, "--k", 2, "--heavy-rows", 20,
                        *roles))
    assert line == f"streamlsq: error: {wanted.format(tasks=tasks)}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_heavy_rows_with_the_stores_roles_from_python(tasks, client):
    with pytest.raises(InputError, match="tasks.zarr: --heavy-rows 20 goes with roles by "
                                         "rows per task"):
        streamlsq.metalearn(tasks, 2, heavy_rows=20, client=client, progress=False)
    with pytest.raises(InputError, match="^--heavy-rows N goes with --roles rows"):
        streamlsq.metalearn(tasks, 2, roles="store", heavy_rows=20, client=client,
                            progress=False)
    # by rows it chooses the heavy tasks: those with at least 20 rows, the 60 heavy ones
    model = streamlsq.metalearn(tasks, 2, roles="rows", heavy_rows=20, client=client,
                                progress=False)
    assert model.attrs["heavy_rows"] == 20 and model.attrs["n_heavy"] == 60
