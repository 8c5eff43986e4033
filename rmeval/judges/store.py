"""The compact judgment store: every judgment of a panel as one signed byte.

A judgment is a direction r in {-1, 0, +1} (+1: the original response A, -1: B, 0: unresolved)
that judge j reads on item i for attribute a (the overall verdict is the attribute ``overall``) in
presentation order o in {AB, BA}. The store keeps them as a dense int8 array ``D[j, i, a, o]``,
``MISSING`` (-128) where a cell was not read, with the vocabularies beside it::

    STORE/store.json      {"format", "version", "judges": [{"name", "file"}], "attributes", "orders",
                           "n_items", "missing"}
    STORE/items.json      the item ids, in item order
    STORE/judge-000.npy   D[j] of one judge: an (I, A, 2) int8 .npy, memory-mapped on read

Why one ``.npy`` per judge rather than a long Arrow/Parquet table with dictionary-encoded columns:
the analysis reads directions only, as dense arrays. ``np.load(mmap_mode="r")`` maps a judge's
file with no parsing and no copy, where a long table must decode five columns per judgment and
scatter them into the same array on every load (at 180 bytes a judgment in pandas, 33 GB for the
published panel). A judge is elicited, resumed and re-elicited on its own, so its file is written
on its own; a step that needs two judges (the pair statistics) touches two files. Size: J x I x A
x 2 bytes, 21 x 50,013 x 88 x 2 = 185 MB for JudgeProfile's 185 million judgments.

A *shard* of an elicitation (one judge, the items i = shard mod n) is the same array for its
items in one ``.npz`` (``directions``, ``items``, ``attributes``, ``judge``), written atomically.
``merge_shards`` places every shard's rows at its items' positions in the judge's array: nothing
becomes a Python object per judgment.

Long tables (``item_id, judge, attribute, order, direction``; jsonl or parquet, see
``rmeval.judges.tables``) are still read: converted on load with the same one-line errors (the
first bad row of the file for the first failing check, in the order missing column, missing value,
order, direction, duplicate), a parquet file in record batches with each string column
dictionary-encoded (its strings decoded once per batch, not once per row). ``store_to_table``
writes a store back as a long table for inspection.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rmcore.errors import DataError
from rmcore.io.tables import read_table

JUDGMENT_COLUMNS = ("item_id", "judge", "attribute", "order", "direction")  # the long table (rmeval.judges.tables)
ORDERS = ("AB", "BA")

MISSING = -128  # a cell not read (directions are -1, 0, +1)
FORMAT = "matchrm-judgment-store"
VERSION = 1
STORE_FILE = "store.json"
BATCH_ROWS = 1 << 22  # rows per parquet record batch: one batch for every table below 4M rows


@dataclass
class JudgmentStore:
    """``directions[j]``: judge ``judges[j]``'s (I, A, 2) int8 array over ``items`` x
    ``attributes`` x (AB, BA), ``MISSING`` where not read (a memory map when opened from disk)."""

    judges: list[str]
    items: list[str]
    attributes: list[str]
    directions: list[np.ndarray]
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        shape = (len(self.items), len(self.attributes), 2)
        if len(self.directions) != len(self.judges):
            raise ValueError(f"{len(self.judges)} judges but {len(self.directions)} arrays")
        for name, d in zip(self.judges, self.directions):
            if d.shape != shape or d.dtype != np.int8:
                raise ValueError(f"judge {name}: directions {d.dtype}{d.shape}, expected int8{shape}")

    def judge(self, name: str) -> np.ndarray:
        return self.directions[self.judges.index(name)]

    @property
    def n_judgments(self) -> int:
        """Cells read (judgments), over every judge."""
        return int(sum(np.count_nonzero(d != MISSING) for d in self.directions))

    @property
    def nbytes(self) -> int:
        return int(sum(d.nbytes for d in self.directions))


# -- on disk -----------------------------------------------------------------------------------------

def is_store(path: str | os.PathLike) -> bool:
    return (Path(path) / STORE_FILE).is_file()


def write_store(path: str | os.PathLike, store: JudgmentStore) -> Path:
    """Write ``store`` to the directory ``path``, replacing it whole: the files go to a temporary
    directory beside it, which is then renamed into place (a reader never sees half a store)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        files = []
        for n, d in enumerate(store.directions):
            files.append(f"judge-{n:03d}.npy")
            np.save(tmp / files[-1], np.ascontiguousarray(d))
        (tmp / "items.json").write_text(json.dumps(list(store.items), ensure_ascii=False))
        meta = {"format": FORMAT, "version": VERSION,
                "judges": [{"name": j, "file": f} for j, f in zip(store.judges, files)],
                "attributes": list(store.attributes), "orders": list(ORDERS), "n_items": len(store.items),
                "missing": MISSING}
        (tmp / STORE_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
        os.chmod(tmp, 0o755)
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        elif old is not None:
            old.unlink()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def open_store(path: str | os.PathLike) -> JudgmentStore:
    """A store directory, its arrays memory-mapped (read only)."""
    path = Path(path)
    try:
        meta = json.loads((path / STORE_FILE).read_text())
        items = json.loads((path / "items.json").read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"not a readable judgment store ({e})", file=str(path)) from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise DataError(f"not a judgment store of version {VERSION} (format {meta.get('format')!r}, version "
                        f"{meta.get('version')!r})", file=str(path))
    arrays = [np.load(path / j["file"], mmap_mode="r") for j in meta["judges"]]
    return JudgmentStore([j["name"] for j in meta["judges"]], items, list(meta["attributes"]), arrays, path)


def write_shard(path: str | os.PathLike, judge: str, items: list[str], attributes: list[str],
                directions: np.ndarray) -> Path:
    """One judge's (items, attributes, 2) int8 directions as an ``.npz``, written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez(tmp, directions=np.asarray(directions, dtype=np.int8), items=np.array(items, dtype=str),
             attributes=np.array(attributes, dtype=str), judge=np.array(judge))
    os.replace(tmp, path)
    return path


def read_shard(path: str | os.PathLike) -> JudgmentStore:
    with np.load(path) as z:
        return JudgmentStore([str(z["judge"])], z["items"].tolist(), z["attributes"].tolist(), [z["directions"]],
                             Path(path))


def load_store(path: str | os.PathLike) -> JudgmentStore:
    """Judgments from a store directory, a shard ``.npz`` or a long table (jsonl/parquet, converted)."""
    p = Path(path)
    if p.is_dir() and is_store(p):
        return open_store(p)
    if p.name.endswith(".npz") and p.is_file():
        return read_shard(p)
    if p.name.lower().endswith(".parquet") and p.is_file():
        return parquet_to_store(p)
    df = read_table(p)
    df.attrs.clear()  # its row-number list would be deep-copied by every pandas operation below
    return table_to_store(df, file=str(path))


# -- long tables -> store ------------------------------------------------------------------------------

class _Column:
    """One string column of a batch as codes into ``uniques`` (str), ``-1`` where null."""

    def __init__(self, codes: np.ndarray, uniques: list[str]) -> None:
        self.codes, self.uniques = codes, uniques


def _frame_column(s: pd.Series) -> _Column:
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    return _Column(codes, [str(u) for u in uniq])


def _arrow_column(arr) -> _Column:  # noqa: ANN001 - a pyarrow (Chunked)Array
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):  # a stored dictionary may hold unused values, in any order
        arr = arr.dictionary_decode()
    arr = pc.dictionary_encode(arr)  # values in order of first appearance
    codes = arr.indices.to_numpy(zero_copy_only=False)
    if arr.null_count:
        codes = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, codes)
    return _Column(np.asarray(codes, dtype=np.int64), [str(u) for u in arr.dictionary.to_pylist()])


class _Builder:
    """Long-table rows, batch by batch, as compact codes; the dense array at the end. Each check
    keeps the first bad row of the file, and ``finish`` raises the first check that failed in the
    order ``rmeval.judges.tables.validate_judgments`` checks, so a table gives the error it gave
    as a pandas table."""

    STRINGS = ("item_id", "judge", "attribute", "order")

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.vocab: dict[str, dict[str, int]] = {c: {} for c in self.STRINGS}
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.errors: dict[tuple[int, str], tuple[int, str]] = {}  # (check rank, field) -> (row, message)
        self.offset = 0

    def _error(self, rank: int, fld: str, row: int, message: str) -> None:
        key = (rank, fld)
        if key not in self.errors or row < self.errors[key][0]:
            self.errors[key] = (row, message)

    def add(self, cols: dict[str, _Column], direction: pd.Series | np.ndarray, n: int) -> None:
        codes = {}
        for rank, c in enumerate(self.STRINGS):
            col = cols[c]
            null = col.codes < 0
            if null.any():
                self._error(rank, c, self.offset + int(np.flatnonzero(null)[0]), "missing value")
            voc = self.vocab[c]
            lut = np.array([voc.setdefault(u, len(voc)) for u in col.uniques] + [-1], dtype=np.int64)
            codes[c] = lut[col.codes]  # -1 (null) reads the sentinel at the end
        order_ok = np.array([o in ORDERS for o in self.vocab["order"]] + [True], dtype=bool)
        bad = ~order_ok[codes["order"]]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = cols["order"].uniques[cols["order"].codes[i]]
            self._error(4, "order", self.offset + i, f"order must be AB or BA, got '{value}'")
        raw = pd.Series(direction) if not isinstance(direction, pd.Series) else direction.reset_index(drop=True)
        d = pd.to_numeric(raw, errors="coerce")
        bad = ~d.isin([-1, 0, 1]).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self._error(5, "direction", self.offset + i, f"direction must be 1, -1 or 0, got '{raw.iat[i]}'")
            d = d.where(~bad, 0)
        order_codes = np.array([ORDERS.index(o) if o in ORDERS else 0 for o in self.vocab["order"]] + [0], np.int8)
        self.parts.append((codes["item_id"].astype(np.int64), codes["judge"].astype(np.int32),
                           codes["attribute"].astype(np.int32), order_codes[codes["order"]],
                           d.to_numpy().astype(np.int8)))
        self.offset += n

    def finish(self) -> JudgmentStore:
        if self.errors:
            (_, fld), (row, message) = min(self.errors.items())
            raise DataError(message, file=self.file, row=row + 1, field=fld)
        items = list(self.vocab["item_id"])
        judges_in = list(self.vocab["judge"])
        attrs = list(self.vocab["attribute"])
        cat = [np.concatenate([p[k] for p in self.parts]) if self.parts else np.zeros(0, np.int64) for k in range(5)]
        i, j, a, o, d = cat
        n_i, n_a = len(items), len(attrs)
        # duplicates: a cell's key seen before (the first later occurrence, as pandas' duplicated)
        key = ((j.astype(np.int64) * n_i + i) * n_a + a) * 2 + o
        srt = np.argsort(key, kind="stable")
        dup = srt[1:][key[srt][1:] == key[srt][:-1]]
        if len(dup):
            raise DataError("duplicate (item_id, judge, attribute, order)", file=self.file, row=int(dup.min()) + 1,
                            field="item_id")
        rank = np.argsort(np.array(judges_in, dtype=object), kind="stable")  # judges sorted, as the panel
        arrays = []
        for jj in rank:
            arr = np.full((n_i, n_a, 2), MISSING, dtype=np.int8)
            m = j == jj
            arr[i[m], a[m], o[m]] = d[m]
            arrays.append(arr)
        return JudgmentStore([judges_in[r] for r in rank], items, attrs, arrays)


def _require(columns: Iterable[str], file: str | None) -> None:
    have = set(columns)
    for c in JUDGMENT_COLUMNS:
        if c not in have:
            raise DataError("missing column", file=file, field=c)


def table_to_store(df: pd.DataFrame, *, file: str | None = None) -> JudgmentStore:
    """A long judgments table (validated as ``rmeval.judges.tables.validate_judgments`` does) as
    a store: judges sorted, items and attributes in order of first appearance."""
    _require(df.columns, file)
    b = _Builder(file)
    b.add({c: _frame_column(df[c]) for c in _Builder.STRINGS}, df["direction"], len(df))
    return b.finish()


def _parquet_batches(path: Path) -> Iterator:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read table ({str(e).splitlines()[0]})", file=str(path)) from None
    _require(pf.schema_arrow.names, str(path))
    yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=list(JUDGMENT_COLUMNS))


def parquet_to_store(path: str | os.PathLike) -> JudgmentStore:
    """A long parquet table as a store, read in record batches (``_Builder``)."""
    path = Path(path)
    b = _Builder(str(path))
    for batch in _parquet_batches(path):
        cols = {c: _arrow_column(batch.column(c)) for c in _Builder.STRINGS}
        b.add(cols, batch.column("direction").to_pandas(), batch.num_rows)
    if b.offset == 0:
        raise DataError("table: has no rows", file=str(path))
    return b.finish()


def store_to_table(store: JudgmentStore) -> pd.DataFrame:
    """The long table (``item_id, judge, attribute, order, direction``) of every cell read, judge by
    judge, item by item, order by order, attribute by attribute (an elicitation's call order)."""
    frames = []
    items = np.array(store.items, dtype=object)
    attrs = np.array(store.attributes, dtype=object)
    for name, d in zip(store.judges, store.directions):
        arr = np.asarray(d).transpose(0, 2, 1)  # (I, order, A)
        i, o, a = np.nonzero(arr != MISSING)
        frames.append(pd.DataFrame({"item_id": items[i], "judge": name, "attribute": attrs[a],
                                    "order": np.array(ORDERS, dtype=object)[o], "direction": arr[i, o, a].astype(int)}))
    if not frames:
        return pd.DataFrame(columns=list(JUDGMENT_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def concat_stores(stores: list[JudgmentStore]) -> JudgmentStore:
    """Stores of disjoint (judge, item) cells as one: judges in order of first appearance, items
    and attributes likewise; a cell read in two of them is an error."""
    judges = list(dict.fromkeys(j for s in stores for j in s.judges))
    items = list(dict.fromkeys(i for s in stores for i in s.items))
    attrs = list(dict.fromkeys(a for s in stores for a in s.attributes))
    ii = {x: n for n, x in enumerate(items)}
    ai = {x: n for n, x in enumerate(attrs)}
    arrays = {j: np.full((len(items), len(attrs), 2), MISSING, dtype=np.int8) for j in judges}
    for s in stores:
        rows = np.array([ii[x] for x in s.items], dtype=np.int64)
        cols = np.array([ai[x] for x in s.attributes], dtype=np.int64)
        for name, d in zip(s.judges, s.directions):
            target = arrays[name][rows[:, None], cols[None, :]]
            clash = (target != MISSING) & (np.asarray(d) != MISSING)
            if clash.any():
                i, a, o = (int(x[0]) for x in np.nonzero(clash))
                raise DataError(f"judge {name}: item {s.items[i]}, attribute {s.attributes[a]}, order {ORDERS[o]} "
                                "read twice", file=str(s.path) if s.path else None)
            arrays[name][rows[:, None], cols[None, :]] = np.where(np.asarray(d) != MISSING, d, target)
    return JudgmentStore(judges, items, attrs, [arrays[j] for j in judges])
