"""Judge inventory and analysis: agreement, kappa, consistency and priority fits against independent
references (hand-worked examples, scikit-learn, planted simulations)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedKFold, cross_val_score

from rmcore.errors import DataError
from rmeval.judges.analysis import analyze
from rmeval.judges.inventory import CORE_ATTRIBUTES, OVERALL, default_inventory, load_inventory
from rmeval.judges.simulate import simulate_panel
from rmeval.judges.tables import validate_judgments


def test_inventory_breadth_and_user_file(tmp_path):
    inv = default_inventory()
    names = {a.name for a in inv}
    assert len(inv) >= 80 and len({a.family for a in inv}) == 14
    assert set(CORE_ATTRIBUTES) <= names
    assert {"correctness", "factual_accuracy", "final_answer_correctness", "harmfulness", "hallucination_rate",
            "instruction_adherence", "constraint_satisfaction", "verbosity", "conciseness", "formatting", "empathy",
            "friendliness"} <= names
    f = tmp_path / "mine.yaml"
    f.write_text("- {name: pirate_speak, family: style, definition: 'pirate speak: arr'}\n"
                 "- {name: verbosity, family: style, definition: 'wordiness'}\n")
    assert [a.name for a in load_inventory(f)] == ["pirate_speak", "verbosity"]
    ext = load_inventory(f, extend=True)
    assert len(ext) == len(inv) + 1 and {a.name: a for a in ext}["verbosity"].definition == "wordiness"
    assert [a.name for a in load_inventory(names=["core", "empathy"])] == [*CORE_ATTRIBUTES, "empathy"]
    f.write_text("- {name: x, family: style}\n")
    with pytest.raises(DataError, match=r"mine.yaml.*row 1.*definition"):
        load_inventory(f)


def _rows(item, judge, attribute, ab, ba):
    return [{"item_id": item, "judge": judge, "attribute": attribute, "order": "AB", "direction": ab},
            {"item_id": item, "judge": judge, "attribute": attribute, "order": "BA", "direction": ba}]


def test_hand_example_83_of_171():
    rows = []
    for j in range(19):
        v = 1 if j < 8 else -1
        rows += _rows("workout", f"j{j:02d}", OVERALL, v, v)
        rows += _rows("workout", f"j{j:02d}", "specificity", -1, -1)  # all find B more specific
    res = analyze(pd.DataFrame(rows), n_splits=2)
    ag = res["agreement"]
    assert ag["n_pairs"] == 171
    assert ag["overall"] == pytest.approx(83 / 171) and ag["overall_pooled"] == pytest.approx(83 / 171)
    assert ag["attribute"] == 1.0 and ag["attribute_coverage"] == 1.0
    # 28 + 55 same-winner pairs and 88 opposite-winner pairs, all agree on specificity
    same = [p for p in ag["pairs"] if p["same_winner"]["n"]]
    assert len(same) == 83 and ag["opposite_winner"] == 1.0


def test_attribute_agreement_coverage_and_split_by_hand():
    rows = []
    # item1: both judges say A overall; item2: j1 says A, j2 says B
    rows += _rows("i1", "j1", OVERALL, 1, 1) + _rows("i1", "j2", OVERALL, 1, 1)
    rows += _rows("i2", "j1", OVERALL, 1, 1) + _rows("i2", "j2", OVERALL, -1, -1)
    # i1 x: agree (+1,+1); i1 y: j2 unstable -> not jointly resolved
    rows += _rows("i1", "j1", "x", 1, 1) + _rows("i1", "j2", "x", 1, 1)
    rows += _rows("i1", "j1", "y", 1, 1) + _rows("i1", "j2", "y", 1, -1)
    # i2 x: disagree; i2 y: agree (-1); 4 cells both judged, 3 jointly resolved, 2 agree
    rows += _rows("i2", "j1", "x", 1, 1) + _rows("i2", "j2", "x", -1, -1)
    rows += _rows("i2", "j1", "y", -1, -1) + _rows("i2", "j2", "y", -1, -1)
    ag = analyze(pd.DataFrame(rows), n_splits=2)["agreement"]
    assert ag["overall"] == 0.5
    assert ag["attribute"] == pytest.approx(2 / 3) and ag["attribute_coverage"] == pytest.approx(3 / 4)
    assert ag["same_winner"] == 1.0 and ag["same_winner_coverage"] == pytest.approx(1 / 2)
    assert ag["opposite_winner"] == 0.5 and ag["opposite_winner_coverage"] == 1.0
    assert ag["per_attribute"]["y"] == {"agreement": 1.0, "n": 1, "coverage": 0.5}


def _stable_frame(j: pd.DataFrame) -> pd.DataFrame:
    """Independent reference: stable directions by pandas pivot."""
    w = j.pivot_table(index=["judge", "item_id", "attribute"], columns="order", values="direction").reset_index()
    w["stable"] = np.where((w["AB"] == w["BA"]) & (w["AB"] != 0), w["AB"], 0)
    return w


def test_kappa_weights_cv_and_consistency_against_references():
    w = {"a": np.array([2.0, -1.0, 0.5, 0.0, 1.0]), "b": np.array([0.2, 1.5, -1.0, 1.0, 0.0]),
         "c": np.array([1.0, 1.0, 1.0, -1.0, -0.5])}
    _, judg, _ = simulate_panel(300, w, detect=0.7, flip=0.1, position=0.15, seed=3)
    res = analyze(validate_judgments(judg), seed=0, n_splits=4)
    st = _stable_frame(judg)
    attrs = res["meta"]["attributes"]
    for ja, jb in itertools.combinations(sorted(w), 2):
        pair = next(p for p in res["agreement"]["pairs"] if p["judges"] == [ja, jb])
        for key, sel in (("overall", st["attribute"] == OVERALL), ("attribute", st["attribute"] != OVERALL)):
            m = st[sel].pivot_table(index=["item_id", "attribute"], columns="judge", values="stable")
            m = m[(m[ja] != 0) & (m[jb] != 0)]
            assert pair[key]["n"] == len(m)
            assert pair[key]["agreement"] == pytest.approx(float(np.mean(m[ja] == m[jb])))
            assert pair[key]["kappa"] == pytest.approx(cohen_kappa_score(m[ja], m[jb]))
    for judge in w:
        s = st[st["judge"] == judge].pivot_table(index="item_id", columns="attribute", values="stable")
        s = s[s[OVERALL] != 0]
        x, y = s[attrs].to_numpy(float), s[OVERALL].to_numpy(int)
        ref = LogisticRegression(C=1.0, max_iter=5000).fit(x, y)
        got = res["judges"][judge]
        assert got["n_items"] == len(y) and got["n_excluded"] == 300 - len(y)
        np.testing.assert_allclose([got["weights"][a] for a in attrs], ref.coef_[0], atol=1e-3)
        assert got["intercept"] == pytest.approx(ref.intercept_[0], abs=1e-3)
        cv = cross_val_score(LogisticRegression(C=1.0, max_iter=5000), x, y, scoring="accuracy",
                             cv=StratifiedKFold(5, shuffle=True, random_state=0)).mean()
        assert got["cv_accuracy"] == pytest.approx(cv)
        sb = got["split_half"]
        assert sb["spearman_brown"] == pytest.approx(2 * sb["half_r"] / (1 + sb["half_r"]))
        # order consistency / position bias from the raw table
        jr = judg[(judg["judge"] == judge) & (judg["attribute"] != OVERALL)]
        p = jr.pivot_table(index=["item_id", "attribute"], columns="order", values="direction")
        both = p[(p["AB"] != 0) & (p["BA"] != 0)]
        assert got["order_consistency"] == pytest.approx(float(np.mean(both["AB"] == both["BA"])))
        res_reads = jr[jr["direction"] != 0]
        first = ((res_reads["order"] == "AB") & (res_reads["direction"] == 1)) | \
                ((res_reads["order"] == "BA") & (res_reads["direction"] == -1))
        assert got["position_bias"]["first_rate"] == pytest.approx(float(first.mean()))
        assert got["position_bias"]["first_rate"] > 0.55  # planted position bias


def test_planted_panel_recovers_shared_perception_and_priorities():
    rng = np.random.default_rng(0)
    w = {f"judge{j}": rng.normal(0, 1.5, 10) for j in range(4)}
    _, judg, _ = simulate_panel(1500, w, detect=0.85, flip=0.03, verdict_noise=0.3, seed=1)
    res = analyze(judg, n_splits=6)
    ag = res["agreement"]
    assert ag["attribute"] > 0.85 and ag["opposite_winner"] > 0.85  # hidden consensus
    assert ag["overall"] < ag["attribute"]
    attrs = res["meta"]["attributes"]
    planted = np.array(list(w.values()))
    for k, name in enumerate(w):
        got = np.array([res["judges"][name]["weights"][a] for a in attrs])
        corr = [np.corrcoef(got, planted[m])[0, 1] for m in range(len(w))]
        assert corr[k] > 0.9 and corr[k] == max(corr)  # its own priorities, not another judge's
        shared = np.array([res["judges"][name]["shared_weights"][a] for a in attrs])
        assert np.corrcoef(shared, planted[k])[0, 1] > 0.9
        assert res["judges"][name]["split_half"]["spearman_brown"] > 0.9
        assert res["judges"][name]["cv_accuracy"] > 0.8


def test_judgments_validation_names_row():
    bad = pd.DataFrame(_rows("i", "j", "x", 1, 2))
    with pytest.raises(DataError, match=r"row 2.*direction"):
        validate_judgments(bad, file="j.jsonl")
    dup = pd.DataFrame(_rows("i", "j", "x", 1, 1) * 2)
    with pytest.raises(DataError, match=r"row 3.*duplicate"):
        validate_judgments(dup)
