"""The curve ``metalearn(k="auto")`` chose k from, as a table and a figure.

The model store holds ``k_loglik`` and ``k_loglik_se`` over ``k_candidate`` and
the eigenvalues of the subspace moment; :func:`k_curve_table` puts them side by
side, and :data:`K_CURVE_FILES` writes it as ``OUT.k-curve.csv`` and
``OUT.k-curve.png``: ``metalearn(..., out=OUT, k_curve=True)`` (the command line, for
every ``--k auto`` run) writes them beside the model store as files of the output,
checked with it before any work and published with it.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["K_CURVE_FILES", "k_curve_table"]


def k_curve_table(model: xr.Dataset) -> pd.DataFrame:
    """One row per candidate k: held-out log-likelihood, its paired standard error, the k-th
    eigenvalue of the subspace moment, and whether k was chosen.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=4_000,
    ...                               t_light=4, n_heavy=100, t_heavy=60, n_light2=1_000,
    ...                               t_light2=10, seed=1)
    >>> table = k_curve_table(streamlsq.metalearn(path, "auto"))
    >>> table.columns.tolist(), table.loc[table.chosen, "k"].tolist()
    (['k', 'heldout_loglik', 'heldout_loglik_se', 'eigenvalue', 'chosen'], [2])
    >>> tmp.cleanup()
    """
    if "k_loglik" not in model:
        raise ValueError("the model was not fitted with k='auto': it has no k_loglik")
    k = model.k_candidate.values.astype(int)
    eig = model.eigenvalues.values
    return pd.DataFrame({
        "k": k,
        "heldout_loglik": model.k_loglik.values,
        "heldout_loglik_se": model.k_loglik_se.values,
        "eigenvalue": [float(eig[j - 1]) if j <= eig.size else np.nan for j in k],
        "chosen": k == int(model.attrs["k_chosen"]),
    })


def write_k_curve_table(model: xr.Dataset, path: str | os.PathLike) -> None:
    """The table of :func:`k_curve_table` as CSV at ``path``."""
    k_curve_table(model).to_csv(path, index=False)


def write_k_curve_figure(model: xr.Dataset, path: str | os.PathLike) -> None:
    """The held-out log-likelihood against k (the chosen k marked) and the eigenvalues of
    the subspace moment, as a PNG at ``path`` (whatever its name ends with)."""
    from matplotlib.figure import Figure

    table = k_curve_table(model)
    fig = Figure(figsize=(8, 3.2))
    left, right = fig.subplots(1, 2)
    left.errorbar(table.k, table.heldout_loglik, yerr=table.heldout_loglik_se, marker="o",
                  capsize=3)
    chosen = table[table.chosen]
    left.plot(chosen.k, chosen.heldout_loglik, "o", ms=12, mfc="none", mec="C3",
              label=f"chosen k = {int(chosen.k.iloc[0])}")
    left.set(xlabel="k", ylabel="held-out log-likelihood per task",
             title="mixture fitted with k components")
    left.legend(loc="lower right")
    eig = model.eigenvalues.values
    right.plot(np.arange(1, eig.size + 1), eig, "o-")
    right.axhline(0.0, color="0.6", lw=0.8)
    right.set(xlabel="index", ylabel="eigenvalue", title="subspace moment M")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")


#: the files of the k curve beside a model store: suffix → writer(model, path)
K_CURVE_FILES = {".k-curve.csv": write_k_curve_table, ".k-curve.png": write_k_curve_figure}

