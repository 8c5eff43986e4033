"""Verdicts on planted summary tables, derived by hand."""

from __future__ import annotations

import pandas as pd

from rmtrain.findings import FINDINGS, findings_markdown, judge, study_findings


def _table(values: dict[str, list[float]], column: str) -> pd.DataFrame:
    rows = [{"arm": a, "seed": s + 1, column: v} for a, vs in values.items() for s, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_verdicts():
    f = next(x for x in FINDINGS if x.higher == "regression" and x.lower == "shuffled_mean")
    # every regression seed above every shuffled seed
    assert judge(_table({"regression": [0.4, 0.5], "shuffled_mean": [0.2, 0.3]}, f.column), f)["verdict"] == "holds"
    # means ordered (0.45 > 0.40), ranges overlap (0.35 < 0.45)
    r = judge(_table({"regression": [0.35, 0.55], "shuffled_mean": [0.45, 0.35]}, f.column), f)
    assert r["verdict"] == "holds on the means only"
    assert r["mean_higher"] == 0.45 and r["range_lower"] == (0.35, 0.45)
    # reversed means, and equal means, do not hold
    assert judge(_table({"regression": [0.2, 0.3], "shuffled_mean": [0.4, 0.5]}, f.column), f)["verdict"] == \
        "does not hold"
    assert judge(_table({"regression": [0.3], "shuffled_mean": [0.3]}, f.column), f)["verdict"] == "does not hold"
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
    verdicts = [r["verdict"] for r in study_findings(t)]
    # shuffled<regression share: holds; reg>BT margin: 2.1 vs 1.6 means, ranges overlap; BT>reg share: holds;
    # shuffled>BT margin: 1.55 vs 1.6 -> reversed; reg>binarized margin: reversed
    assert verdicts == ["holds", "holds on the means only", "holds", "does not hold", "does not hold"]
    md = findings_markdown(t)
    assert md.count("\n| ") == 1 + len(FINDINGS) and "**holds on the means only**" in md
