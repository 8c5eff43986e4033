"""The judgment store and the Gram-matrix pair statistics give every number of ``analysis.json``
and ``reweight.json`` that the long-table implementation gave (``tests/rmeval/judges/legacy``, the
code as it stood before), bit for bit: on a simulated panel with the awkward cases (cells read in
one order only, items a judge never read, ties and unlabelled items), from the store and from the
long table, in this process and over worker processes; and, ``-m heavy``, at the size of the
benchmark page (2,000 items x 4 judges x 87 attributes, the commands' default settings, the items'
reference labels), printing how many numbers each document holds and how long each side took
(``pytest -m heavy -s tests/rmeval/judges/test_judges_store_equivalence.py -k benchmark``)."""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from rmcore.io.files import atomic_write_json
from rmeval.judges.analysis import analyze
from rmeval.judges.reweight import reweight
from rmeval.judges.simulate import simulate_benchmark, simulate_panel
from rmeval.judges.store import store_to_table, table_to_store
from rmeval.judges.tables import validate_judgments

from .legacy.analysis import analyze as legacy_analyze
from .legacy.reweight import reweight as legacy_reweight

SETTINGS = {"n_splits": 3, "null_repeats": 3, "min_shared": 3, "min_n_source": 8, "min_n_pooled": 30, "seed": 2}
REWEIGHT = {"budgets": (8, 16), "n_repeats": 2, "top_k": (2, 4), "seed": 1}


def _differences(a, b, path=""):
    """Every place where two JSON-like documents differ: structure, key order, or a value (numbers
    compared exactly; NaN equals NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{path}: keys {list(a)} != {list(b)}"]
        return [d for k in a for d in _differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for n, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{n}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if type(a) is type(b) and a == b else [f"{path}: {a!r} != {b!r}"]


def _plain(doc):
    """The document as analyze_judgments writes it (numpy scalars as JSON numbers): written with
    rmcore.io.files.atomic_write_json and read back."""
    with tempfile.TemporaryDirectory() as d:
        return json.loads(atomic_write_json(Path(d) / "doc.json", doc).read_text())


@pytest.fixture(scope="module")
def panel_data():
    rng = np.random.default_rng(7)
    w = {f"judge-{j}": rng.normal(0, 1.2, 7) for j in range(4)}
    items, table, _ = simulate_panel(150, w, target=rng.normal(0, 1.2, 7), sources=("hh", "chat", "safety"),
                                     position=0.15, detect=0.7, seed=3)
    # awkward cases: single-order cells, a judge missing items, ties and an unlabelled item
    drop = rng.random(len(table)) < 0.03
    drop |= (table["judge"] == "judge-2").to_numpy() & table["item_id"].isin(items["item_id"][:12]).to_numpy()
    table = table[~drop].reset_index(drop=True)
    items = items.copy()
    items.loc[items.index[::17], "label"] = "tie"
    items.loc[items.index[5], "label"] = None
    return items, table


def test_analysis_is_todays_number_for_number(panel_data):
    items, table = panel_data
    old = _plain(legacy_analyze(validate_judgments(table), items, **SETTINGS))
    new = _plain(analyze(table_to_store(table), items, jobs=1, **SETTINGS))
    assert _differences(old, new) == []
    assert old["meta"]["n_judges"] == 4 and "identical_preference_null" in old and "label_associations" in old


def test_reweight_is_todays_number_for_number(panel_data):
    items, table = panel_data
    old = _plain(legacy_reweight(items, validate_judgments(table), **REWEIGHT))
    new = _plain(reweight(items, table_to_store(table), jobs=2, **REWEIGHT))  # over two worker processes
    assert _differences(old, new) == []
    assert old["summary"]["n_cells"] == 12


def test_an_attribute_subset_and_one_judge(panel_data):
    items, table = panel_data
    one = table[table["judge"] == "judge-1"]
    kw = {"attributes": ["attr_03", "attr_01", "attr_05"], **SETTINGS}
    assert _differences(_plain(legacy_analyze(validate_judgments(one), items, **kw)),
                        _plain(analyze(table_to_store(one), items, jobs=1, **kw))) == []
    assert _differences(_plain(legacy_analyze(validate_judgments(table), None, controls=False, **kw)),
                        _plain(analyze(table, None, controls=False, jobs=1, **kw))) == []  # from the long table


def test_the_difference_helper_sees_a_difference():
    assert _differences({"a": [1.0, 2.0]}, {"a": [1.0, 2.0 + 4e-16]}) != []
    assert _differences({"a": 1, "b": 2}, {"b": 2, "a": 1}) != []
    assert _differences({"a": 1}, {"a": 1.0}) != []
    assert _differences({"x": float("nan"), "y": None}, {"x": float("nan"), "y": None}) == []


def _numbers(doc) -> int:
    """How many numbers a JSON-like document holds."""
    if isinstance(doc, dict):
        return sum(_numbers(v) for v in doc.values())
    if isinstance(doc, (list, tuple)):
        return sum(_numbers(v) for v in doc)
    return int(isinstance(doc, (int, float)) and not isinstance(doc, bool))


@pytest.mark.heavy  # ~20 s on two cores: 1.41M judgments through both implementations
def test_the_benchmark_panel_is_todays_number_for_number():
    """The benchmark page's comparison: the store (with its worker processes) against the long-table
    code it replaced, on the scale benchmark's simulated panel, the commands' default settings."""
    items, store = simulate_benchmark(2000, 4, 87, seed=0)
    table = store_to_table(store)
    print(f"\n2000 items x 4 judges x 87 attributes: {len(table):,} judgments")
    for name, new, old in (("analysis.json", lambda: analyze(store, items), lambda: legacy_analyze(table, items)),
                           ("reweight.json", lambda: reweight(items, store), lambda: legacy_reweight(items, table))):
        t0 = time.perf_counter()
        a = _plain(new())
        t1 = time.perf_counter()
        b = _plain(old())
        t2 = time.perf_counter()
        print(f"{name}: {_numbers(b):,} numbers (store {t1 - t0:.1f} s, long table {t2 - t1:.1f} s)")
        assert _differences(b, a) == [], name
