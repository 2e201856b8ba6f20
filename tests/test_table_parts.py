"""A table's parts read once for all the columns a fit takes (``docs/tables.md``): a CSV
byte range parsed, a dask partition computed, a Parquet row group decoded once, however many
columns the fit takes and however many virtual chunks straddle the part, also when two
threads read the chunks ahead at once as the sequential engine does (each part read by one
of them, the other waiting for it, never both waiting on each other); a Parquet row group
larger than its share of a worker's memory decoded in pieces of columns, each column once.

The reference is the pandas frame the tables are written from: the rows read equal its own
values bit for bit, and equal those read column by column (the reads before).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pandas as pd
import pytest

from streamlsq import open_stream
from streamlsq.io import tables

FEATURES = ["a", "b", "c"]
EVERY = ("a", "b", "c", "w", "y")
ROWS = 9_000
#: a deadlock shows as reads still running after this long (they take well under a second)
DEADLOCK_SECONDS = 120


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(28)
    out = pd.DataFrame(rng.standard_normal((ROWS, 3)), columns=FEATURES)
    out["y"] = out.to_numpy() @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(ROWS)
    out["w"] = rng.uniform(0.5, 2.0, ROWS)
    out.loc[rng.choice(ROWS, 40, replace=False), "b"] = np.nan  # rows dropped
    return out


@pytest.fixture(scope="module")
def tables_of(frame, tmp_path_factory):
    """The frame as tables whose parts are unequal, so that virtual chunks straddle them:
    three CSV files, a Parquet file of row groups of 1,500 to 3,500 rows, a dask DataFrame of
    partitions of 3,000 and 1,200 rows."""
    import dask.dataframe as dd
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("table-parts")
    cuts = [0, 2_000, 5_500, ROWS]
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        frame.iloc[a:b].to_csv(root / f"part-{k}.csv", index=False)
    with pq.ParquetWriter(root / "t.parquet", pa.Schema.from_pandas(
            frame, preserve_index=False)) as writer:
        for a, b in zip([0, 1_500, 5_000], [1_500, 5_000, ROWS], strict=True):
            writer.write_table(pa.Table.from_pandas(frame.iloc[a:b], preserve_index=False),
                               row_group_size=b - a)

    def dask_frame():  # a new one each time: its expressions not yet optimised
        return dd.concat([dd.from_pandas(frame.iloc[:6_000], npartitions=2),
                          dd.from_pandas(frame.iloc[6_000:], npartitions=3)])

    return {"csv": str(root / "*.csv"), "parquet": str(root / "t.parquet"),
            "dask": dask_frame}


def _open(tables_of, kind):
    data = tables_of[kind]
    return open_stream(data() if callable(data) else data, x=FEATURES, y="y", weights="w",
                       missing="drop")


def _within(seconds: float, work):
    """``work()`` run in a thread of its own, refused when it is still running after
    ``seconds`` (a deadlock, where pytest would wait forever)."""
    out: dict = {}

    def run():
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the reads still run after {seconds} s: a deadlock"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _read_ahead(source, threads: int = 2) -> list:
    """Every virtual chunk's (X, Y, w), read by ``threads`` daemon threads taking the next
    chunk in order, as the sequential engine's reads ahead do."""
    chunk, n = source.chunk_rows, source.n_rows
    ranges = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
    out: list = [None] * len(ranges)
    lock = threading.Lock()
    nxt = iter(range(len(ranges)))
    errors: list = []

    def reader():
        while True:
            with lock:
                k = next(nxt, None)
            if k is None:
                return
            try:
                out[k] = source.read_weighted(*ranges[k], check=False)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller
                errors.append(exc)
                return

    workers = [threading.Thread(target=reader, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    if errors:
        raise errors[0]
    return out


@pytest.fixture
def part_reads(monkeypatch):
    """The reads of parts from now on, as (part, columns read) pairs."""
    reads = []
    read_part = tables.TableRows._read_part
    monkeypatch.setattr(tables.TableRows, "_read_part", lambda self, i, names: reads.append(
        (i, tuple(sorted(names)))) or read_part(self, i, names))
    tables.forget_parts()
    yield reads
    tables.forget_parts()


@pytest.mark.parametrize("kind", ["csv", "dask", "parquet"])
def test_two_threads_reading_ahead_read_each_part_once(tables_of, frame, kind, part_reads):
    """Chunks straddling unequal parts, read two at a time by two threads: each part is read
    once for all the columns (not once per column, nor once per chunk that overlaps it), the
    rows are the frame's, and nothing is kept once every row has been read. For a dask
    DataFrame and a CSV file, the reads of one frame's partitions in two threads at once
    deadlocked before Python 3.12 (docs/faults.md): here they finish."""
    source = _open(tables_of, kind)
    parts = len(source.rows.parts)
    straddled = [e for e in source.rows.edges[1:-1] if e % source.chunk_rows]
    assert parts >= 3 and straddled, source.rows.edges  # chunks cross parts
    tables.forget_parts()
    part_reads.clear()
    chunks = _within(DEADLOCK_SECONDS, lambda: _read_ahead(source))
    assert sorted(part_reads) == [(i, EVERY) for i in range(parts)], part_reads
    assert not tables._kept

    X = np.concatenate([c[0] for c in chunks])
    Y = np.concatenate([c[1] for c in chunks])
    w = np.concatenate([c[2] for c in chunks])
    kept = frame[FEATURES].notna().all(axis=1).to_numpy()
    assert 0 < (~kept).sum() < ROWS
    np.testing.assert_array_equal(X[kept], frame[FEATURES].to_numpy()[kept])
    np.testing.assert_array_equal(Y[kept, 0], frame.y.to_numpy()[kept])
    np.testing.assert_array_equal(w, np.where(kept, frame.w.to_numpy(), 0.0))


@pytest.mark.parametrize("kind", ["csv", "dask", "parquet"])
def test_reads_ahead_in_several_rounds_of_new_frames_never_hang(tables_of, kind):
    """Several rounds of two, then three, threads reading ahead over a table opened anew
    (a dask DataFrame's expressions not yet optimised, as each fit's are) all finish."""
    def rounds():
        for threads in (2, 3, 2, 3):
            tables.forget_parts()
            _read_ahead(_open(tables_of, kind), threads)
        return True

    assert _within(DEADLOCK_SECONDS, rounds)


@pytest.mark.parametrize("kind", ["csv", "dask", "parquet"])
def test_the_rows_equal_those_read_column_by_column(tables_of, kind, monkeypatch):
    """Every chunk's X, Y and w read once per part equal, bit for bit, those read each column
    on its own with nothing shared between reads (the read path before): the fit, which
    sees only them, gives the same coefficients."""
    source = _open(tables_of, kind)
    tables.forget_parts()
    once = _read_ahead(source)
    monkeypatch.setattr(tables.TableRows, "reading",
                        lambda self, names, start, stop: contextlib.nullcontext())
    monkeypatch.setattr(tables.TableRows, "read_part", lambda self, i, names, lo=0, hi=None:
                        self._read_part(i, list(names)))
    alone = _read_ahead(source, threads=1)
    for new, old in zip(once, alone, strict=True):
        for a, b in zip(new, old, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_row_group_over_its_share_of_memory_is_decoded_in_pieces(tables_of, frame,
                                                                    part_reads, monkeypatch):
    """A Parquet row group whose columns exceed the bytes a worker decodes at once is read
    in pieces of columns, each within them, each column decoded once; the rows are the
    frame's."""
    import pyarrow.parquet as pq

    decoded = []
    read_row_group = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, columns=None, **kw:
                        decoded.append((i, tuple(columns))) or read_row_group(
                            self, i, columns=columns, **kw))
    source = _open(tables_of, "parquet")
    monkeypatch.setattr(tables, "part_budget", lambda: 2 * 8 * 1_500)  # two columns of 1,500
    tables.forget_parts()
    decoded.clear()
    part_reads.clear()
    X, Y, w = source.read_weighted(1_000, 6_000, check=False)  # row groups 0, 1 and 2
    assert sorted(part_reads) == [(i, EVERY) for i in range(3)]
    for group in range(3):
        pieces = [columns for g, columns in decoded if g == group]
        assert max(map(len, pieces)) <= 2 and len(pieces) >= 3, decoded  # 5 columns
        assert sorted(c for piece in pieces for c in piece) == list(EVERY), decoded
    rows = frame.iloc[1_000:6_000]
    kept = rows[FEATURES].notna().all(axis=1).to_numpy()
    np.testing.assert_array_equal(X[kept], rows[FEATURES].to_numpy()[kept])
    np.testing.assert_array_equal(Y[kept, 0], rows.y.to_numpy()[kept])
    np.testing.assert_array_equal(w, np.where(kept, rows.w.to_numpy(), 0.0))


def test_column_pieces_keep_within_the_budget():
    """The pieces of columns of a row group: every column once, in order, each piece within
    the budget unless it is one column; all at once without a budget."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"a": np.arange(1_000.0), "b": np.arange(1_000.0),
                      "s": ["x" * 30] * 1_000, "c": np.arange(1_000.0)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="none")
    group = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.row_group(0)
    names = ["a", "b", "s", "c"]
    assert tables.column_pieces(group, names, None) == [names]
    sizes = {group.column(j).path_in_schema: max(group.column(j).total_uncompressed_size,
                                                 8_000) for j in range(4)}
    for budget in (1, 8_000, 16_500, 40_000, 10**9):
        pieces = tables.column_pieces(group, names, budget)
        assert [c for piece in pieces for c in piece] == names
        for piece in pieces:
            assert len(piece) == 1 or sum(sizes[c] for c in piece) <= budget, (budget, pieces)
    assert tables.column_pieces(group, names, 10**9) == [names]
    assert tables.column_pieces(group, names, 1) == [[c] for c in names]
