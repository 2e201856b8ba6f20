"""``streamlsq metalearn``: Algorithm 1 over a multi-task store, written as a model store."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _command_values,
    _done_line,
    _friendly_errors,
)
from streamlsq.cli.options import click_options
from streamlsq.options import Options
from streamlsq.options.mlr import METALEARN
from streamlsq.options.run import CHECKPOINT, CLUSTER, OUTPUT

__all__ = ["metalearn"]

#: the options of ``streamlsq metalearn``: the job's, the output's, the checkpoint's
OPTIONS = Options(METALEARN, OUTPUT.without("out").replace(
    "overwrite", help="Replace an existing model store (only one streamlsq wrote)."),
    CHECKPOINT)


@click.command(context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to create.")
@click_options(OPTIONS)
@click_options(CLUSTER)
@_friendly_errors
def metalearn(data, out, **given):
    """Meta-learn a mixture of K linear regressions (Algorithm 1) from the task store DATA.

    \b
    Examples:
      streamlsq simulate mlr --out tasks.zarr --k 4 --d 8
      streamlsq metalearn tasks.zarr --out model.zarr --k 4
      streamlsq metalearn tasks.zarr --out model.zarr            # k chosen from the data
      streamlsq metalearn tasks.zarr --out model.zarr --k 4 --linkage single --splits 3
      streamlsq metalearn tasks.zarr --out model.zarr --rank 4 --threshold 0.5
      streamlsq metalearn exam.zarr --out m.zarr --k 2 --whiten --roles rows --heavy-rows 40
      streamlsq metalearn tasks.zarr --out model.zarr --k 4 --checkpoint ckpt/ --resume
    """
    from streamlsq.io.location import locate
    from streamlsq.io.outputs import beside_path
    from streamlsq.mlr.metalearn import metalearn as run

    options, cluster = _command_values(OPTIONS, given)  # checked before any cluster starts
    k = options.pop("k", None)  # not given: 'auto' (without --threshold), told apart by the rules
    auto = k in (None, "auto") and options.get("threshold") is None
    # the curve's files belong to the model store: checked with it, published with it
    options["k_curve"] = auto and not getattr(locate(out), "remote", False)
    with _client(**cluster, data=data) as client:
        ds = run(data, k, out=out, client=client, **options)
    done = _done_line(out, ds)
    if done:
        click.echo(done)
        return
    a = ds.attrs
    cut = ("" if options.get("threshold") is None else
           f" (cut at --threshold {options['threshold']:g}, of a subspace of --rank "
           f"{options['rank']})")
    line = (f"wrote {out}: {a['n_clusters']} clusters{cut} from {a['n_light']} light, "
            f"{a['n_heavy']} heavy and {a['n_light2']} light2 tasks in {a['seconds']:.3g} s")
    if "subspace_error" in a:
        line += (f"; subspace error {a['subspace_error']:.3g}, heavy accuracy "
                 f"{a['heavy_accuracy']:.3g}, classification accuracy "
                 f"{a['classification_accuracy']:.3g}, coef error {a['coef_error']:.3g}")
    click.echo(line)
    click.echo(f"roles: {a['role_rule']}" + (f"; {a['n_unused_tasks']} task(s) with fewer "
               "than 2 rows unused" if a["n_unused_tasks"] else ""))
    if auto:
        where = (f"{beside_path(out, '.k-curve.csv')} and {beside_path(out, '.k-curve.png')}"
                 if options["k_curve"] else
                 "the model's k_loglik (no files beside an object store)")
        click.echo(f"k = {a['k_chosen']} chosen from k = 1..{ds.sizes['k_candidate']} by "
                   f"held-out likelihood on {a['n_validation_tasks']} light2 tasks "
                   f"(one-standard-error rule); curve in {where}")
    if a.get("n_fallback_clusters"):
        click.echo(f"refinement fell back for {a['n_fallback_clusters']} cluster(s): "
                   f"{a['fallback_clusters']}")
