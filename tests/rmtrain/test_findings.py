"""Verdicts on planted summary tables, derived by hand."""

from __future__ import annotations

import pandas as pd

from rmtrain.findings import FINDINGS, findings_markdown, judge, study_findings


def _table(values: dict[str, list[float]], column: str) -> pd.DataFrame:
    rows = [{"arm": a, "seed": s + 1, column: v} for a, vs in values.items() for s, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_verdicts():
    f = next(x for x in FINDINGS if x.higher == "regression" and x.lower == "shuffled_mean")
    # every regression seed above every shuffled seed, but two seeds each: the smallest possible p is 1/6
    r = judge(_table({"regression": [0.4, 0.5], "shuffled_mean": [0.2, 0.3]}, f.column), f)
    assert r["verdict"] == "too few seeds to test (smallest possible p 1/6)"
    assert r["description"] == "means in the study's order, seed ranges apart" and r["p_value"] == 1 / 6
    # three seeds each, fully separated: p = 1/20 = 0.05, the design's smallest, and it holds
    r = judge(_table({"regression": [0.4, 0.5, 0.6], "shuffled_mean": [0.1, 0.2, 0.3]}, f.column), f)
    assert r["verdict"] == "holds" and r["p_value"] == 1 / 20
    # means ordered (0.45 > 0.40), ranges overlap (0.35 < 0.45): a description, not a verdict
    r = judge(_table({"regression": [0.35, 0.55], "shuffled_mean": [0.45, 0.35]}, f.column), f)
    assert r["description"] == "means in the study's order, seed ranges overlap"
    assert r["mean_higher"] == 0.45 and r["range_lower"] == (0.35, 0.45)
    # reversed means are described as such; one seed each cannot be tested (p >= 1/2)
    r = judge(_table({"regression": [0.2, 0.3, 0.25], "shuffled_mean": [0.4, 0.5, 0.45]}, f.column), f)
    assert r["description"] == "means in the opposite order" and r["verdict"] == "not shown (p = 1.000)"
    r = judge(_table({"regression": [0.3], "shuffled_mean": [0.3]}, f.column), f)
    assert r["description"] == "equal means" and r["verdict"] == "too few seeds to test (smallest possible p 1/2)"
    # a missing arm or column, and NaN-only values, are "not measured", never a verdict
    assert judge(_table({"regression": [0.3]}, f.column), f)["verdict"] == "not measured"
    assert judge(_table({"regression": [0.3], "shuffled_mean": [0.1]}, "other"), f)["verdict"] == "not measured"
    assert judge(_table({"regression": [0.3], "shuffled_mean": [float("nan")]}, f.column), f)["verdict"] == \
        "not measured"


def test_markdown_lists_every_finding():
    t = pd.concat([_table({"regression": [0.3, 0.4], "bradley_terry": [0.5, 0.6], "shuffled_mean": [0.1, 0.2],
                           "binarized": [0.1, 0.1]}, "share_original"),
                   _table({"regression": [2.0, 2.2], "bradley_terry": [1.0, 2.2], "shuffled_mean": [1.5, 1.6],
                           "binarized": [2.5, 2.6]}, "transplant_random_margin_sd")])
    t = t.groupby(["arm", "seed"], as_index=False).first()
    found = study_findings(t)
    # two seeds per arm everywhere: no verdict can be "holds"; the descriptions keep what the means show
    assert {r["verdict"] for r in found} == {"too few seeds to test (smallest possible p 1/6)"}
    assert [r["description"].split(",")[0] for r in found] == [
        "means in the study's order", "means in the study's order", "means in the study's order",
        "means in the opposite order", "means in the opposite order"]
    md = findings_markdown(t)
    assert md.count("\n| ") == 1 + len(FINDINGS) and "seed ranges overlap" in md and "one-sided exact p" in md
