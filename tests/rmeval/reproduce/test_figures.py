"""Cells and statements of the paper-layout table, on documents written by hand (no model): dotted
keys whose names contain dots, differences published − ours, the outside-interval mark, ranges,
sums and medians over rows, model-card gaps, and the Markdown/CSV layout with three cells a figure."""

from __future__ import annotations

import csv
import io

import pytest

from rmeval.reproduce.figures import Value, as_value, lookup
from rmeval.reproduce.recipe import build_recipe
from rmeval.reproduce.table import build_cells, csv_text, markdown, table_rows


def _recipe(tmp_path, **extra):
    raw = {
        "reproduce": {"study": "pairwise-misses", "table": "Table X", "title": "t", "analysis": "pairwise"},
        "data": {"d": {"spec": "simulated:n_prompts=4"}},
        "models": [{"name": "m.1", "hub_id": "o/m1", "params_b": 1}, {"name": "m2", "hub_id": "o/m2", "params_b": 1},
                   {"name": "m3", "hub_id": "o/m3", "params_b": 1}],
        "columns": [{"name": "acc", "key": "accuracy"}, {"name": "pts", "key": "accuracy", "scale": 100, "card": "rb"}],
        "published": [
            {"table": "T", "row": "m.1", "column": "acc", "value": 0.9, "interval": [0.8, 1.0], "source": "s1"},
            {"table": "T", "row": "m2", "column": "acc", "value": 0.5, "source": "s2"},
            {"table": "T", "rows": ["m.1", "m2"], "column": "acc", "range": [0.4, 0.95], "source": "s3"},
            {"table": "T", "rows": ["all"], "column": "acc", "aggregate": "median", "value": 0.6, "source": "s4"},
            {"table": "T", "rows": ["m.1", "m2"], "column": "pts", "aggregate": "max_abs", "value": 1.0,
             "source": "s5"},
        ],
        "model_cards": {"m.1": {"rb": 60.0}, "m2": {"rb": 70.0}},
        **extra,
    }
    return build_recipe(raw, tmp_path / "x.yaml")


def test_lookup_takes_keys_that_contain_dots_and_reads_estimates_and_intervals():
    doc = {"judges": {"llama-3.1-8b": {"gain": {"estimate": 0.25, "ci95": [0.1, 0.4]}}}, "n": 3, "flag": True}
    assert lookup(doc, "judges.llama-3.1-8b.gain.estimate") == 0.25
    assert as_value(lookup(doc, "judges.llama-3.1-8b.gain")) == Value(0.25, 0.1, 0.4)
    assert as_value(lookup(doc, "n")) == Value(3.0) and as_value(lookup(doc, "flag")) == Value(1.0)
    assert lookup(doc, "judges.other.gain") is None and as_value({"estimate": float("nan")}) is None


def test_cells_differences_marks_and_statements(tmp_path):
    r = _recipe(tmp_path)
    docs = {"m.1": {"d": {"accuracy": {"estimate": 0.62, "ci95": [0.55, 0.7]}}},
            "m2": {"d": {"accuracy": {"estimate": 0.48, "ci95": [0.4, 0.56]}}}}
    cells, statements = build_cells(r, docs, None, {})
    c1, c2, c3 = cells[("m.1", "acc")], cells[("m2", "acc")], cells[("m3", "acc")]
    assert c1.difference == pytest.approx(0.9 - 0.62) and c1.outside  # 0.9 outside [0.55, 0.70]
    assert c2.difference == pytest.approx(0.5 - 0.48) and not c2.outside
    assert c3.ours is None and c3.missing == "not yet computed"
    gaps = {row: cells[(row, "pts")].ours.estimate for row in ("m.1", "m2")}
    assert gaps == pytest.approx({"m.1": 62 - 60.0, "m2": 48 - 70.0})
    by = {s.figure.source: s for s in statements}
    assert (by["s3"].ours == pytest.approx([0.48, 0.62])
            and by["s3"].differences == pytest.approx([0.4 - 0.48, 0.95 - 0.62]))
    assert by["s4"].missing == "waits for m3"  # all three models, one not scored
    assert by["s5"].ours == pytest.approx([22.0])


def test_the_table_has_three_cells_per_figure_in_markdown_and_csv(tmp_path):
    r = _recipe(tmp_path)
    docs = {"m.1": {"d": {"accuracy": {"estimate": 0.62, "ci95": [0.55, 0.7]}}}}
    cells, statements = build_cells(r, docs, None, {"m2": "failed: boom"})
    header, rows = table_rows(r, cells)
    assert header == ["row", "acc: published", "acc: ours", "acc: Δ", "pts: published", "pts: ours", "pts: Δ"]
    assert rows[0][:4] == ["m.1", "0.90 [0.80, 1.00]", "0.62 [0.55, 0.70]", "+0.28 †"]
    assert rows[1][:4] == ["m2", "0.50", "missing", "—"]
    text = markdown(r, cells, statements, stand_in=True, rows_info={})
    assert "STAND-IN RUN" in text and "m2 × acc: failed: boom" in text and "s1" in text
    back = list(csv.reader(io.StringIO(csv_text(header, rows))))
    assert back[0] == header and back[1][3] == "+0.28 †"


def _starred(tmp_path, **model):
    raw = {
        "reproduce": {"study": "reward-auditor", "table": "Table 1", "title": "t", "analysis": "suitability"},
        "data": {"chat": {"spec": "simulated:n_prompts=4"}},
        "models": [{"name": "a", "hub_id": "o/a", "params_b": 1}, {"name": "idrm", **model}],
        "columns": [{"name": "d_ST", "key": "by_code.ST.cohens_d", "mark_key": "by_code.ST.stars", "digits": 3}],
        "published": [{"table": "Table 1", "row": "a", "column": "d_ST", "value": 0.35, "mark": "***", "source": "s"},
                      {"table": "Table 1", "row": "idrm", "column": "d_ST", "value": 0.336, "mark": "***",
                       "source": "s"},
                      {"table": "Table 1", "rows": ["all"], "column": "d_ST", "aggregate": "sum", "value": 0.686,
                       "source": "s"}],
    }
    return build_recipe(raw, tmp_path / "x.yaml")


def test_significance_marks_sit_beside_both_values_and_a_row_without_a_hub_id_says_not_reproducible(tmp_path):
    from rmeval.reproduce.runner import rows_to_run
    from rmeval.reproduce.table import figures_rows

    r = _starred(tmp_path, label="Llama3-8B-IDRM", params_b=0, not_reproducible="no public Hub id")
    assert rows_to_run(r, None) == ["a"]  # nothing runs for it
    docs = {"a": {"chat": {"by_code": {"ST": {"cohens_d": 0.2, "stars": "**"}}}}}
    cells, statements = build_cells(r, docs, None, {"idrm": "not reproducible: no public Hub id"})
    header, rows = table_rows(r, cells)
    assert rows[0] == ["a", "0.350***", "0.200**", "+0.150"]
    assert rows[1] == ["Llama3-8B-IDRM", "0.336***", "not reproducible: no public Hub id", "—"]
    assert statements[0].missing == "waits for idrm (not reproducible)"
    fh, fr = figures_rows(r, cells)
    got = {(x[0], x[1]): dict(zip(fh, x)) for x in fr}
    assert got[("a", "d_ST")]["published_mark"] == "***" and got[("a", "d_ST")]["ours_mark"] == "**"
    assert got[("a", "d_ST")]["published"] == 0.35  # the number alone, the mark in its own column


@pytest.mark.parametrize("model, message", [
    ({"label": "x", "params_b": 1}, "needs a hub_id"),  # no Hub id and no reason
    ({"hub_id": "o/b", "params_b": 0}, "params_b"),  # a runnable row must know its size
])
def test_a_row_needs_a_hub_id_and_a_size_unless_it_is_not_reproducible(tmp_path, model, message):
    from rmcore.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        _starred(tmp_path, **model)


def test_a_mark_is_one_to_three_stars_on_one_cell(tmp_path):
    from rmcore.errors import ConfigError

    r = _starred(tmp_path, hub_id="o/b", params_b=1)
    raw = {"reproduce": vars(r.reproduce), "data": {"chat": {"spec": "simulated:n_prompts=4"}},
           "models": [{"name": "a", "hub_id": "o/a", "params_b": 1}],
           "columns": [{"name": "d", "key": "k"}],
           "published": [{"table": "T", "row": "a", "column": "d", "value": 0.1, "mark": "+", "source": "s"}]}
    with pytest.raises(ConfigError, match="mark"):
        build_recipe(raw, tmp_path / "y.yaml")
