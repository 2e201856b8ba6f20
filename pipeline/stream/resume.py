"""What identifies a stream fit, how it resumes, and how it continues on grown data.

- A fit is identified by its fingerprint (:func:`run_fingerprint`: inputs with their
  metadata version, method, parameters, plan, record interval, dtype, engine), which the
  result keeps as ``run_fingerprint`` (:class:`streamlsq.jobs.Run` compares it when a run
  is resumed).
- Checkpoints: the sequential engine commits the state after every segment
  (:class:`~streamlsq.io.checkpoint.Checkpoint`, the segments being folded in order; it
  checks on resume that the chunks committed work read are unchanged: :func:`segment_reads`);
  the scan engine commits each piece's summaries as it arrives (:class:`ScanPieces`:
  pieces finish in any order); a resumed run summarises only the others, then redoes the
  prefix and the solves, which are cheap and deterministic.
- ``continue_from``: an earlier result of the same fit restarts the recursion from its final
  state over the rows appended since (:func:`continued_result`, :func:`continued_plan`,
  :func:`join_previous`), refused when the rows it read changed (:func:`rows_fingerprint`,
  kept in the result as a variable of fixed width: :func:`add_rows_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import EntryCheckpoint, merge_spans
from streamlsq.io.sources import DEFAULT_SELECTION, StreamSource
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.plans import StreamPlan

__all__ = ["FINGERPRINT_FIELDS", "ScanPieces", "add_rows_fingerprint",
           "check_rows_unchanged", "continued_plan", "continued_result", "join_previous",
           "previous_state", "rows_fingerprint", "run_fingerprint", "saved_rows_fingerprint",
           "segment_reads", "stamp_digest"]



def run_fingerprint(plan: StreamPlan | None, rec, record_every: int, dtype, engine: str
                    ) -> dict:
    """What identifies a fit: resuming with anything different is refused. (``plan`` None:
    a continued fit with no new rows, identified by its method alone.)"""
    if plan is None:
        return {"method": rec.name, "parameters": json.dumps(rec.get_params(), sort_keys=True,
                                                             default=str)}
    fp = {
        "inputs": [[role, s.identity(), s.group or "",
                    s.n_rows, s.n_features, s.n_targets, f"token:{s.token}"]
                   + ([json.dumps(s.selection(), sort_keys=True)]
                      if s.selection() != DEFAULT_SELECTION else [])
                   for role, s in zip(plan.roles, plan.sources, strict=True)],
        "method": rec.name,
        "parameters": json.dumps(rec.get_params(), sort_keys=True, default=str),
        "plan": plan.digest(),
        "record_every": record_every,
        "dtype": str(np.dtype(dtype)),
    }
    if engine != "sequential":
        fp["engine"] = engine
    return fp


def segment_reads(plan: StreamPlan, K0: int, K1: int) -> list[tuple[int, int, int]]:
    """(input index, first row, end row) of the chunk reads of global blocks K0+1..K1."""
    loads, _ = plan.span(K0, K1).loads()
    spans = []
    for si, chunk, lo, hi, _sec in loads:
        base = chunk * plan.sources[si].chunk_rows
        spans.append((si, base + lo, base + hi))
    return merge_spans(spans)


class ScanPieces:
    """The scan engine's checkpoint: the summaries of each piece, committed as it arrives."""

    def __init__(self, folder: EntryCheckpoint, plan: StreamPlan):
        self.folder, self.plan = folder, plan
        self.pieces = None
        if "pieces" in folder:
            try:
                self.pieces = [(int(a), int(b)) for a, b in folder.load("pieces")]
            except (TypeError, ValueError) as exc:
                raise folder.corrupt("entry-pieces.npz", exc) from None

    def start(self, pieces) -> dict:
        """Fix the cut into pieces; the committed results {piece index: (rows, summaries)}."""
        if self.pieces is None:
            self.pieces = [tuple(p) for p in pieces]
            self.folder.save("pieces", self.pieces)
        return {i: self.folder.load(f"piece-{i:06d}") for i in range(len(self.pieces))
                if f"piece-{i:06d}" in self.folder}

    def commit(self, i: int, result) -> None:
        self.folder.save(f"piece-{i:06d}", result, reads=segment_reads(self.plan, *self.pieces[i]))

    def close(self) -> None:
        self.folder.close()

    def remove(self) -> None:
        self.folder.remove()


# -- continuing a fit on a store that grew (``fit_stream(..., continue_from=RESULT)``) ---------


def rows_fingerprint(source: StreamSource, n_rows: int) -> dict:
    """What identifies rows ``0:n_rows`` of a store, for a later ``continue_from``: for each
    variable read, (first row, end row, stamp) of its chunks, the stamp of a whole chunk
    being its file's (:func:`~streamlsq.io.stores.chunk_stamps`: size and time, or an
    object's ETag) and that of a chunk the rows end inside (which an append rewrites) a hash
    of its rows up to ``n_rows``; a table's parts, of any length, by their stamps alone.
    Empty for an xarray Dataset (it has no chunk files)."""
    if source.in_memory:
        return {}
    out = {}
    for name in stamped_variables(source):
        rows = int(source.rows.rows_per_chunk(name))
        entries = []
        for a, b, stamp in source.chunk_stamps([name]).get(name, []):
            if a >= n_rows:
                break
            known = stamp.strip(";") and "missing" not in stamp
            # a table's part is whole whatever its length (its stamp is its file's): a
            # table is never continued, so nothing is read to stamp it (hashing the rows
            # read every CSV part once per column, in this process, before the fit)
            whole = b - a == rows or source.from_table
            if b <= n_rows and whole and known:
                entries.append([int(a), int(b), stamp])
                continue
            stop = min(int(b), int(n_rows))
            values = np.ascontiguousarray(source.read_rows(name, a, stop, np.float64,
                                                           check=False))
            digest = hashlib.sha256(values.tobytes()).hexdigest()[:32]
            entries.append([int(a), stop, f"sha256:{digest}"])
        out[name] = entries
    return out


def stamped_variables(source: StreamSource) -> tuple[str, ...]:
    """The variables whose rows a fit's fingerprint stamps: features, targets and the rows'
    precision weights when given (a changed weight changes the fit as a changed value does)."""
    return (*source.x_vars, *source.y_vars, *([source.weights] if source.weights else []))


#: the columns of the result variable ``rows_fingerprint``: for each stamped range of rows,
#: the variable (its index among the fit's feature, target and weights variables), its first and end
#: row, and the first 8 bytes of the SHA-256 of its stamp (:func:`rows_fingerprint`)
FINGERPRINT_FIELDS = ("variable", "first_row", "end_row", "stamp")


def stamp_digest(stamp) -> int:
    """A stamp of :func:`rows_fingerprint` as a signed 64-bit integer (its SHA-256's first 8
    bytes): what a result keeps of it, in a variable of fixed width."""
    if isinstance(stamp, int | np.integer):
        return int(stamp)
    return int.from_bytes(hashlib.sha256(str(stamp).encode()).digest()[:8], "little",
                          signed=True)


def add_rows_fingerprint(ds, source) -> None:
    """Keep in the result ``ds`` what identifies the rows it read (:func:`rows_fingerprint`),
    for a later ``--continue-from``: a variable ``rows_fingerprint (fingerprint_entry,
    fingerprint_field)`` of int64 (:data:`FINGERPRINT_FIELDS`), so that the result's
    metadata keeps a constant size however many chunks it read, and an attribute of the
    same name holding a SHA-256 of that table (a reader compares two results by it)."""
    names = stamped_variables(source)
    found = rows_fingerprint(source, source.n_rows)
    table = np.array([[names.index(name), int(a), int(b), stamp_digest(stamp)]
                      for name, entries in found.items() for a, b, stamp in entries],
                     dtype=np.int64).reshape(-1, len(FINGERPRINT_FIELDS))
    ds["rows_fingerprint"] = (("fingerprint_entry", "fingerprint_field"), table)
    ds.coords["fingerprint_field"] = list(FINGERPRINT_FIELDS)
    ds.attrs["rows_fingerprint"] = "sha256:" + hashlib.sha256(table.tobytes()).hexdigest()[:32]


def saved_rows_fingerprint(prev) -> dict | None:
    """The stamps a result kept of the rows it read, {variable: [[first, end, stamp], ...]}
    (stamps as :func:`stamp_digest`), from its ``rows_fingerprint`` variable, or from the
    attribute of that name of a result written by an earlier version; None when it keeps
    none."""
    a = prev.attrs
    if "rows_fingerprint" in prev.variables:
        read = FitInputs.from_attrs(a)
        names = [*read.x_vars, *read.y_vars, *([read.weights] if read.weights else [])]
        saved: dict = {}
        for var, first, end, stamp in np.asarray(prev["rows_fingerprint"].values).tolist():
            saved.setdefault(names[int(var)], []).append([first, end, stamp])
        return saved
    text = a.get("rows_fingerprint")
    if isinstance(text, str) and text.startswith("{"):
        return json.loads(text)
    return None


def check_rows_unchanged(saved: dict, source, n_rows: int, result,
                         fitted_on: tuple[str, str] | None = None) -> None:
    """Refuse to continue when a chunk of the rows ``0:n_rows`` that the earlier fit read
    changed since (by the stamps of :func:`rows_fingerprint`, compared as
    :func:`stamp_digest`), naming the variable and rows. ``fitted_on``: the input (path,
    group) the result records it read; where it is another place than ``source``'s (a copy
    of the store, whose files have stamps of their own), the refusal names it, not a change
    of rows."""
    now = rows_fingerprint(source, n_rows)
    for name, entries in saved.items():
        current = {(int(a), int(b)): stamp_digest(stamp) for a, b, stamp in now.get(name, [])}
        for a, b, stamp in entries:
            if current.get((int(a), int(b))) != stamp_digest(stamp):
                if fitted_on is not None and _another_input(fitted_on, source):
                    where = fitted_on[0] + (f" (group {fitted_on[1]})" if fitted_on[1] else "")
                    raise InputError(
                        f"{source.label}: --continue-from {result} was fitted on another "
                        f"input, {where} (as the result records), whose chunks are not this "
                        "store's (a copy has files of its own): continue it on the store it "
                        "was fitted on, or fit this store once (without --continue-from) "
                        "and continue that result")
                raise InputError(
                    f"{source.label}: variable '{name}' rows {a}-{int(b) - 1} changed since "
                    f"{result} was fitted; --continue-from needs the earlier rows as they "
                    "were: fit again from scratch (without --continue-from)")


def _another_input(fitted_on: tuple[str, str], source) -> bool:
    """Whether the input a result records, (path as given, group), is another place than
    ``source`` (a relative path resolved from here)."""
    from streamlsq.io.stores import identity

    path, group = fitted_on
    return (identity(path), group or "") != (source.identity(), source.group or "")


def _fitted_on(attrs: dict) -> tuple[str, str] | None:
    """The input (path as given, group) a result's attributes record, or None."""
    path = attrs.get("input")
    return (path, str(attrs.get("input_group") or "")) if isinstance(path, str) else None


def _continue_refusal(result, what: str) -> InputError:
    return InputError(f"--continue-from {result}: {what}; fit again from scratch (without "
                      "--continue-from) or continue with the same method and options")


def continued_result(result, source, rec, dtype, block_size, epochs, shuffle, run):
    """The earlier result to continue from, opened by ``run`` (a
    :class:`~streamlsq.jobs.Run`, with its storage options), loaded and checked against this
    fit: same
    method and parameters, same variables, intercept, dtype and block size, one epoch in
    storage order, the earlier rows unchanged (:func:`check_rows_unchanged`)."""
    if source.from_table:
        raise InputError(f"{source.label}: --continue-from continues a fit on a store that "
                         "grew, not on a table: write the table as a store (streamlsq "
                         "convert), fit the store once, then append the new rows to it and "
                         "continue that fit on it; or fit the whole table again")
    if source.in_memory:
        raise InputError("--continue-from reads a store (a path, URL or zarr store) whose "
                         "chunks can be stamped, not an xarray Dataset: write the Dataset "
                         "to Zarr (ds.to_zarr) and append to it")
    prev = run.open_input("result", result, lazy=False).load()
    a = prev.attrs
    fitted_on = _fitted_on(a)
    if fitted_on is not None:
        from streamlsq.io.tables import is_table

        if is_table(fitted_on[0]):  # its stamps are the table's files: no store has them
            raise InputError(
                f"{source.label}: --continue-from {result} was fitted on the table "
                f"{fitted_on[0]} (as the result records), not on this store; a fit of a "
                "table is not continued on a store: fit the store once (without "
                "--continue-from), then continue that result as rows are appended")
    if a.get("method") != rec.name:
        raise _continue_refusal(result, f"it was fitted by '{a.get('method')}', not "
                                f"'{rec.name}'")
    try:
        before = json.loads(a.get("parameters", "{}"))
    except ValueError:
        before = None
    now = json.loads(json.dumps(rec.get_params(), sort_keys=True, default=str))
    if before != now:
        diff = sorted(k for k in set(before or {}) | set(now)
                      if (before or {}).get(k) != now.get(k))
        raise _continue_refusal(result, f"its options differ (in: {', '.join(diff)})")
    if rec.diagnostics:
        raise _continue_refusal(result, "the CUSUM tests (--diagnostics) need every row "
                                "from the first")
    selection = source.selection()
    read = FitInputs.from_attrs(a)
    saved = {"x": list(read.x_vars), "y": list(read.y_vars), "sample_dim": read.sample_dim,
             "fit_intercept": read.intercept, "weights": read.weights,
             "missing": read.missing, "formula": read.formula}
    wanted = {"x": selection["x"], "y": selection["y"], "sample_dim": selection["sample_dim"],
              "fit_intercept": bool(selection["fit_intercept"] or rec.intercept),
              "weights": selection.get("weights"), "missing": selection.get("missing", "raise"),
              "formula": selection.get("formula")}
    diff = [k for k in wanted if saved[k] != wanted[k]]
    if diff:
        raise _continue_refusal(result, f"its variables differ (in: {', '.join(diff)}: "
                                f"{', '.join(f'{saved[k]} then, {wanted[k]} now' for k in diff)})")
    if a.get("dtype") != str(np.dtype(dtype)):
        raise _continue_refusal(result, f"it was computed in {a.get('dtype')}, not "
                                f"{np.dtype(dtype)}")
    if int(a.get("epochs", 1)) != 1 or a.get("shuffle") or epochs != 1 or shuffle:
        raise _continue_refusal(result, "a fit continues only over one epoch in storage "
                                "order (no --epochs, no --shuffle)")
    if block_size is not None and int(block_size) != int(a["block_size"]):
        raise _continue_refusal(result, f"its block size is {a['block_size']}, not "
                                f"{block_size}")
    missing = [n for n in rec.state_dims() if f"state_{n}" not in prev]
    if missing:
        raise _continue_refusal(result, f"it has no final state (state_{missing[0]})")
    n_old = int(a["n_rows"])
    if source.n_rows < n_old:
        raise InputError(f"{source.label}: has {source.n_rows} rows, fewer than the {n_old} "
                         f"{result} was fitted on; --continue-from continues on a store that "
                         "grew")
    saved = saved_rows_fingerprint(prev)
    if saved is None:
        raise _continue_refusal(result, "it keeps no fingerprint of the rows it read "
                                "(written by an earlier version)")
    check_rows_unchanged(saved, source, n_old, result, fitted_on)
    return prev


def continued_plan(prev, source, record_every):
    """The plan of the rows after those of ``prev`` (None when there are none), numbered
    after its steps and rows, and the record interval (by default ``prev``'s)."""
    from streamlsq.kernels.recursions.contract import BlockGrid
    from streamlsq.stream.plans import Section

    a = prev.attrs
    n_old, size = int(a["n_rows"]), int(a["block_size"])
    if record_every is None:
        record_every = int(a["record_every"])
    if source.n_rows == n_old:
        return None, record_every
    grid = BlockGrid(source.n_rows - n_old, size)
    plan = StreamPlan((source,), [Section(0, n_old, source.n_rows, grid)], attrs={
        "epochs": 1, "shuffle": False, "seed": int(a.get("seed", 0)),
        "rows_per_epoch": source.n_rows,
    }, step_offset=int(a["n_blocks"]), row_offset=n_old)
    return plan, record_every


def previous_state(prev, rec, where=None) -> dict:
    """The final state stored in an earlier result, as the recursion holds it; refused
    naming the result (``where``) when it lacks a part of it (a result written before the
    recursion kept it, e.g. the rows of positive weight of a weighted ridge fit)."""
    state = {}
    for name in rec.state_dims():
        if f"state_{name}" not in prev:
            raise InputError(f"{where if where is not None else 'the earlier result'}: it "
                             f"has no variable 'state_{name}', which {rec.name} keeps for "
                             "this fit (the result was written by an earlier version): fit "
                             "all the rows again, without --continue-from")
        value = np.asarray(prev[f"state_{name}"].values)
        state[name] = value[()] if value.ndim == 0 else value
    return state


def join_previous(prev, ds, result):
    """The result of a continued fit: the earlier recorded steps followed by the new ones
    (every variable along ``step``), the final state and attributes of the new run."""
    import xarray as xr

    along = [n for n, v in ds.data_vars.items() if "step" in v.dims and n in prev]
    joined = xr.concat([prev[along], ds[along]], dim="step", join="exact",
                       combine_attrs="drop")
    out = ds.drop_vars([*along, "step"]).merge(joined, join="exact")
    out.attrs = dict(ds.attrs)
    out.attrs.update({"first_block_size": prev.attrs.get("first_block_size"),
                      "continued_from": str(getattr(result, "url", result)),
                      "rows_continued": int(prev.attrs["n_rows"])})
    return out
