"""The judgment store: written and read back whole, long tables (jsonl, parquet in one or many
record batches) converted on load with the errors the table validation gives, shards placed by
the merge (old jsonl shards too), and a store written back as a long table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rmcore.errors import ConfigError, DataError
from rmeval.judges import store as store_mod
from rmeval.judges.elicit import merge_shards
from rmeval.judges.simulate import simulate_panel, simulate_store
from rmeval.judges.store import (
    MISSING,
    JudgmentStore,
    load_store,
    open_store,
    store_to_table,
    table_to_store,
    write_shard,
    write_store,
)
from rmeval.judges.tables import load_judgments, validate_judgments

W = {name: np.array([1.0, -0.5, 0.3, 0.8]) * (k + 1) for k, name in enumerate(["ann", "bob", "cy"])}


def _same(a: JudgmentStore, b: JudgmentStore) -> None:
    assert (a.judges, a.items, a.attributes) == (b.judges, b.items, b.attributes)
    for x, y in zip(a.directions, b.directions):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_write_open_and_table_round_trip(tmp_path):
    _, st, _ = simulate_store(40, W, seed=1)
    st.directions[1][3, 2, 1] = MISSING  # a cell read in one order only
    path = write_store(tmp_path / "j", st)
    back = open_store(path)
    _same(st, back)
    assert isinstance(back.directions[0], np.memmap) and back.n_judgments == 3 * 40 * 5 * 2 - 1
    assert json.loads((path / "store.json").read_text())["judges"][2] == {"name": "cy", "file": "judge-002.npy"}
    assert back.nbytes == 3 * 40 * 5 * 2
    table = store_to_table(back)
    assert len(table) == back.n_judgments and list(table.columns) == ["item_id", "judge", "attribute", "order",
                                                                      "direction"]
    _same(st, table_to_store(table))  # judges sorted (ann, bob, cy), items and attributes as first seen
    write_store(path, JudgmentStore(["z"], ["i"], ["overall"], [np.ones((1, 1, 2), np.int8)]))  # replaced whole
    assert open_store(path).judges == ["z"] and not list(tmp_path.glob(".j.*"))


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_old_long_tables_read(tmp_path, suffix, monkeypatch):
    _, table, _ = simulate_panel(30, W, seed=2)
    table = table.sample(frac=1.0, random_state=0).reset_index(drop=True)  # any row order
    path = tmp_path / f"judgments.{suffix}"
    table.to_json(path, orient="records", lines=True) if suffix == "jsonl" else table.to_parquet(path, index=False)
    whole = load_store(path)
    _same(whole, table_to_store(validate_judgments(table)))
    assert whole.items == list(dict.fromkeys(table["item_id"])) and whole.judges == ["ann", "bob", "cy"]
    monkeypatch.setattr(store_mod, "BATCH_ROWS", 97)  # a parquet file in many record batches
    _same(whole, load_store(path))
    assert len(load_judgments(path)) == len(table)


def _bad_tables() -> dict[str, pd.DataFrame]:
    _, t, _ = simulate_panel(8, W, seed=3)
    t = t.astype({"direction": object, "order": object, "item_id": object})
    out = {"no direction column": t.drop(columns="direction")}
    x = t.copy()
    x.loc[200, "item_id"] = None
    x.loc[150, "order"] = "CD"  # a later check, an earlier row: the missing value is reported
    out["missing item"] = x
    x = t.copy()
    x.loc[190, "order"] = "CD"
    x.loc[170, "direction"] = 2
    out["bad order"] = x
    x = t.copy()
    x.loc[180, "direction"] = "up"
    out["bad direction"] = x
    out["duplicate"] = pd.concat([t, t.iloc[[100, 40]]], ignore_index=True)
    return out


@pytest.mark.parametrize("case", list(_bad_tables()))
@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_bad_tables_give_the_validation_errors(tmp_path, case, suffix, monkeypatch):
    df = _bad_tables()[case]
    path = tmp_path / f"j.{suffix}"
    if suffix == "parquet":
        df.astype({c: str for c in ("direction",) if c in df.columns and case == "bad direction"}).to_parquet(path)
        monkeypatch.setattr(store_mod, "BATCH_ROWS", 64)  # the bad rows in different batches
    else:
        df.to_json(path, orient="records", lines=True)
    with pytest.raises(DataError) as want:
        validate_judgments(pd.read_parquet(path) if suffix == "parquet" else pd.read_json(path, lines=True,
                                                                                          dtype=False), file=str(path))
    with pytest.raises(DataError) as got:
        load_store(path)
    assert str(got.value) == str(want.value)


def test_merge_places_shards_and_reads_old_jsonl_shards(tmp_path):
    sh = tmp_path / "shards"
    _, st, _ = simulate_store(6, {"ann": W["ann"]}, seed=4)
    d = np.asarray(st.directions[0])
    for s in range(2):  # items s::2, as elicitation shards them
        write_shard(sh / f"ann.shard-{s:05d}-of-00002.npz", "ann", st.items[s::2], st.attributes, d[s::2])
    _, old, _ = simulate_panel(4, {"bob": W["bob"]}, seed=5)
    old.to_json(sh / "bob.shard-00000-of-00001.jsonl", orient="records", lines=True)
    merged = open_store(merge_shards(tmp_path, table="judgments.parquet"))
    assert merged.judges == ["ann", "bob"]
    assert merged.items == st.items[0::2] + st.items[1::2]  # first appearance over the shards
    np.testing.assert_array_equal(np.asarray(merged.judge("ann"))[: 3], d[0::2])
    unread = [merged.items.index(i) for i in ("item00004", "item00005")]  # bob read items 0-3 only
    assert (np.asarray(merged.judge("bob"))[unread] == MISSING).all()
    assert (np.asarray(merged.judge("bob")) != MISSING).sum() == 4 * 5 * 2
    assert len(pd.read_parquet(tmp_path / "judgments.parquet")) == merged.n_judgments == 6 * 5 * 2 + 4 * 5 * 2
    (sh / "ann.shard-00001-of-00002.npz").unlink()
    with pytest.raises(ConfigError, match="1 of 2"):
        merge_shards(tmp_path)
    write_shard(sh / "ann.shard-00001-of-00002.npz", "ann", st.items[0:1], st.attributes, d[0:1])
    with pytest.raises(DataError, match="read twice"):
        merge_shards(tmp_path)
