"""JudgeProfile's base accuracy by the paper's rule (Table 7): the holistic verdict read in one
presentation order, an unparsed verdict an error; the stable-verdict figure beside it; the gain on
the paper's basis in reweight.json, reweight.md and the console line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rmeval.cli import main
from rmeval.judges.inventory import OVERALL
from rmeval.judges.reweight import reweight, split_indices
from rmeval.judges.simulate import simulate_panel


@pytest.fixture
def biased_panel():
    rng = np.random.default_rng(7)
    target = rng.normal(0, 1.5, 6)
    w = {"first": target + rng.normal(0, 0.3, 6), "second": rng.normal(0, 1.5, 6)}
    items, judg, _ = simulate_panel(400, w, target=target, detect=0.9, flip=0.05, position=0.3,
                                    sources=("s1", "s2"), seed=3)
    # some AB verdicts unparsed (direction 0): an error by the paper's rule
    unparsed = (judg["attribute"] == OVERALL) & (judg["order"] == "AB") & (rng.random(len(judg)) < 0.1)
    judg.loc[unparsed, "direction"] = 0
    return items, judg


def _by_hand(items: pd.DataFrame, judg: pd.DataFrame, judge: str, source: str, k: int) -> tuple[float, float, int]:
    """(one-order accuracy with unparsed = error, stable accuracy with unresolved = 1/2, n unparsed)
    on the held-out 25% of a source, from the long table."""
    lab = items[(items["source"] == source) & items["label"].isin(["A", "B"])].reset_index(drop=True)
    _, te = split_indices(len(lab), 0.25, 0 + k)
    test = lab.iloc[te]
    v = judg[(judg["judge"] == judge) & (judg["attribute"] == OVERALL)].pivot(index="item_id", columns="order",
                                                                               values="direction")
    y = np.where(test["label"] == "A", 1, -1)
    ab = v.loc[test["item_id"], "AB"].to_numpy()
    ba = v.loc[test["item_id"], "BA"].to_numpy()
    one = float(np.mean(ab == y))  # 0 never equals a label: an error
    stable = np.where((ab == ba) & (ab != 0), ab, 0)
    st = float(np.mean([0.5 if s == 0 else float(s == t) for s, t in zip(stable, y)]))
    return one, st, int((ab == 0).sum())


def test_base_accuracy_by_the_papers_rule_and_the_stable_one_beside_it(biased_panel):
    items, judg = biased_panel
    res = reweight(items, judg, budgets=(), top_k=(), seed=0)
    cells = []
    for judge in ("first", "second"):
        for k, source in enumerate(("s1", "s2")):
            r = res["judges"][judge]["sources"][source]
            one, st, n0 = _by_hand(items, judg, judge, source, k)
            assert r["base_accuracy"] == pytest.approx(one) and r["base_accuracy_stable"] == pytest.approx(st)
            assert r["n_base_unparsed"] == n0 > 0
            assert r["gain"] == pytest.approx(r["reweighted_accuracy"] - one)
            cells.append(r)
        jr = res["judges"][judge]
        assert jr["mean_gain"] == pytest.approx(np.mean([c["gain"] for c in cells[-2:]]))
    # position bias and unparsed verdicts move the one-order base away from the stable figure
    assert any(abs(c["base_accuracy"] - c["base_accuracy_stable"]) > 0.03 for c in cells)
    sm = res["summary"]
    assert sm["n_cells"] == 4 and sm["mean_base_accuracy"] == pytest.approx(
        np.mean([c["base_accuracy"] for c in cells]))
    assert sm["mean_gain"] == pytest.approx(np.mean([c["gain"] for c in cells]))
    assert sm["n_judges_improved"] == sum(res["judges"][j]["mean_gain"] > 0 for j in ("first", "second"))


def test_reweight_command_reports_the_gain_on_the_papers_basis(biased_panel, tmp_path, capsys):
    items, judg = biased_panel
    items.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    judg.to_json(tmp_path / "judgments.jsonl", orient="records", lines=True)
    assert main(["judges", "reweight", "--judgments", str(tmp_path / "judgments.jsonl"), "--items",
                 str(tmp_path / "items.jsonl"), "--out", str(tmp_path / "rw"), "--budgets", "32", "--n-repeats", "1",
                 "--wandb-mode", "disabled"]) == 0
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "rw" / "reweight.json").read_text())
    jr = doc["judges"]["first"]
    line = next(x for x in out.splitlines() if x.startswith("first (mean over 2 sources):"))
    assert f"{100 * jr['mean_base_accuracy']:.1f}% (one order, unparsed = error)" in line
    assert f"gain {100 * jr['mean_gain']:+.1f} points" in line
    assert f"stable-verdict base {100 * jr['mean_base_accuracy_stable']:.1f}%" in line
    assert "all judges (mean over 4 judge-source cells)" in out
    md = (tmp_path / "rw" / "reweight.md").read_text()
    assert "| base | unparsed | stable base | reweighted | gain (points) |" in md
    assert "Macro average over 4 judge-source cells" in md
