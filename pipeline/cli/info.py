"""``streamlsq info``: describe a store, validate it, and draw a stream fit."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors, _scheduler_options
from streamlsq.cli.options import values
from streamlsq.errors import InputError
from streamlsq.options.run import CLUSTER

__all__ = ["info"]


@click.command(context_settings=CONTEXT)
@click.argument("store", type=click.Path())
@click.option("--check", is_flag=True,
              help="Also read every chunk (a parallel pass): refuse unreadable chunks, NaN/Inf "
                   "and values so large that the least-squares sums would overflow (a "
                   "multi-task store: also its task_ptr and roles, as metalearn reads them; "
                   "a result: a chunk missing, unreadable or not finite).")
@click.option("--plot", "plot", type=click.Path(), default=None, metavar="PNG",
              help="For the result of a stream fit: draw its coefficients and, when it "
                   "recorded recursive residuals (--diagnostics), its CUSUM tests.")
@click.option("--target", type=int, default=0, show_default=True,
              help="Target drawn by --plot.")
@_scheduler_options
@_friendly_errors
def info(store, check, plot, target, scheduler, n_workers, memory_limit):
    """Describe STORE (stream, multi-task, converted table or result store) and validate it.

    \b
    Examples:
      streamlsq info data.zarr
      streamlsq info data.zarr --check
      streamlsq info rls.zarr --plot rls.png     # a fit: coefficients, CUSUM tests
    """
    # the cluster's options checked before the store is read
    values(CLUSTER, {"scheduler": scheduler, "n_workers": n_workers,
                     "memory_limit": memory_limit})
    from streamlsq.io.describe import CONVERTED, describe, group_kinds, store_kind
    from streamlsq.io.stores import open_group, split_group

    path, group = split_group(store)  # PATH#GROUP: the group, a store of its own
    if group is not None:  # one it does not have, or an array: said as a fit says it
        open_group(path, group)
    store = store if group is None else f"{str(path).rstrip('/')}/{group}"

    try:
        described = describe(store)
    except InputError:
        from streamlsq.io.tables import is_table

        if is_table(store):  # not a store, but a table a fit reads: say so, not "not Zarr"
            raise InputError(
                f"{store}: a table (Parquet or CSV), not a Zarr store: info describes stores "
                "and results; a fit reads the table as it is, and 'streamlsq convert' writes "
                "it as a store that info --check reads") from None
        from streamlsq.io.location import streamlsq_folder

        folder = streamlsq_folder(store)
        if folder is not None:  # not "not a readable Zarr group (No group found ...)"
            raise InputError(f"{store}: {folder}, not a Zarr store: info describes stores "
                             "and results") from None
        raise
    click.echo(described)
    _print_summary(store)
    if plot is not None:
        _plot_result(store, plot, target)
    kind = store_kind(open_group(store, None)) if check else None
    if kind == CONVERTED:
        from streamlsq.io.describe import check_table

        with _client(scheduler, n_workers, memory_limit, data=store) as client:
            n, missing = check_table(store, client)
        gaps = ", ".join(f"{k} {v}" for k, v in missing.items()) or "none"
        click.echo(f"checked: every chunk of every column written and readable in {n} rows; "
                   f"missing values: {gaps}")
    elif kind == "result":
        from streamlsq.io.results import DIGEST, open_result

        fit = open_result(store, lazy=False)  # every chunk read and checked
        click.echo("checked: every chunk of every variable written, readable and finite")
        if "coef" in fit.variables and DIGEST not in fit.attrs:
            # said, so that a pass is not taken for a check of the record of the model
            click.echo(f"not checked: its record of the model against a digest: it has no "
                       f"attribute {DIGEST} (written by a streamlsq from before the digest), "
                       "so an attribute edited consistently with the others is not seen")
    elif kind == "groups":
        # the groups the description lists as stream or multi-task stores, at any depth,
        # each as a fit or a task command given --group reads it
        kinds = group_kinds(open_group(store, None))
        data = [sub for sub, k in kinds.items() if k in ("stream", "multi-task")]
        if not data:
            raise InputError(
                f"{store}: none of its groups ({', '.join(f'{s}/: {k}' for s, k in kinds.items())}"
                ") is a stream or multi-task store, which info --check reads; give a group's "
                "path (STORE/GROUP) to describe it")
        with _client(scheduler, n_workers, memory_limit, data=store) as client:
            for sub in data:
                _check_data(store, kinds[sub], client, sub)
        # said, so that the lines above are not taken for a check of the whole store
        unread = [f"{sub}/ ({k})" for sub, k in kinds.items() if k not in (
            "stream", "multi-task", "groups")]
        if unread:
            click.echo(f"not checked: group{'s' if len(unread) > 1 else ''} "
                       f"{', '.join(unread)}: info --check reads the stream and multi-task "
                       "groups of a store of groups; give a group's path (STORE/GROUP) to "
                       "check it")
    elif kind == "unknown" and check:
        g = open_group(store, None)
        raise InputError(
            f"{store}: holds no X and y, task_ptr, converted table or result (found: "
            f"{sorted(g.array_keys()) or 'none'}): info --check reads those; variables named "
            "otherwise are checked by the fit that names them (--x, --y), as it reads them")
    elif check:
        with _client(scheduler, n_workers, memory_limit, data=store) as client:
            _check_data(store, kind, client)


def _check_data(store, kind: str, client, group: str | None = None) -> None:
    """A stream or multi-task store (or one of its groups) read and checked, and the line
    that says so."""
    from streamlsq.io.describe import check_tasks, check_values

    where = f"group {group}/: " if group else ""
    if kind == "multi-task":
        n, tasks = check_tasks(store, client, group)
        click.echo(f"checked: {where}every chunk of every variable read, every value finite "
                   f"in {n} rows of {tasks} tasks, none so large that the least-squares sums "
                   "overflow")
        return
    n = check_values(store, client, group)
    click.echo(f"checked: {where}every value finite in {n} rows, none so large that the "
               "least-squares sums overflow")


def _print_summary(store):
    """The summary table of a stream fit (statistics, or why it has none)."""
    import zarr

    from streamlsq.io.stores import open_group

    attrs = dict(open_group(str(store), None).attrs)
    if "coef" not in zarr.open_group(str(store), mode="r") or attrs.get("complete") is not True:
        return
    from streamlsq.io.results import check_kept_formula, check_layout
    from streamlsq.io.stores import dimension_names
    from streamlsq.stream.apply import is_stream_fit

    # what the summary reads checked first: a hand-edited record is one line, not a
    # Python error (a model's method made a recursion's, a count made text)
    g = zarr.open_group(str(store), mode="r")
    check_kept_formula(attrs, str(store))
    check_layout(attrs, {n: dimension_names(a) for n, a in g.arrays()}, str(store))
    if not is_stream_fit(attrs) and attrs.get("model") != "glm":
        return
    from streamlsq.stream.statistics import summary_text

    click.echo("")
    click.echo(summary_text(store))


def _plot_result(store, path, target):
    from streamlsq.errors import InputError
    from streamlsq.io.outputs import write_file
    from streamlsq.io.provenance import _version
    from streamlsq.io.results import open_result
    from streamlsq.stream.stability import plot_fit

    ds = open_result(store)
    if "coef" not in ds or "rows_seen" not in ds:
        raise InputError(f"{store}: --plot needs the result of a stream fit (coef, rows_seen)")
    if not 0 <= target < ds.sizes["target"]:
        raise InputError(f"--target must be in 0..{ds.sizes['target'] - 1}, got {target}")
    software = f"streamlsq {_version()}"

    def draw(tmp):
        plot_fit(ds, target=target).savefig(tmp, dpi=110, format="png",
                                            metadata={"Software": software})

    def ours(existing) -> bool:  # a PNG whose Software text says streamlsq wrote it
        with open(existing, "rb") as f:
            head = f.read(1 << 16)
        return head.startswith(b"\x89PNG") and b"Software\x00streamlsq" in head

    write_file(path, draw, ours, "--plot")
    bands = " with their confidence bands" if "recursive_bse" in ds else ""
    tests = "and its CUSUM tests" if "cusum" in ds else "(no recursive residuals recorded)"
    windows = (f"; the coefficients of its windows of {ds.attrs.get('rolling_window')} rows "
               f"with their bands ({ds.attrs.get('rolling_cov_type', 'nonrobust')} "
               "covariance)") if "rolling_params" in ds else ""
    click.echo(f"wrote {path}: coefficients{bands} {tests}{windows}")
