"""The judgment store and the Gram-matrix pair statistics give every number of ``analysis.json``
and ``reweight.json`` that the long-table implementation gave (``tests/rmeval/judges/legacy``, the
code as it stood before), bit for bit: on a simulated panel with the awkward cases (cells read in
one order only, items a judge never read, ties and unlabelled items), from the store and from the
long table, in this process and over worker processes. ``scripts/bench_judges_scale.py`` and the
benchmark page report the same comparison at 2,000 items x 4 judges x 87 attributes."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from rmcore.io import atomic_write_json
from rmeval.judges.analysis import analyze
from rmeval.judges.reweight import reweight
from rmeval.judges.simulate import simulate_panel
from rmeval.judges.store import table_to_store
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
    rmcore.io.atomic_write_json and read back."""
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
