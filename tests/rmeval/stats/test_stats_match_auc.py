"""Scale-free match statistics: the transplant AUC against scikit-learn's roc_auc_score (the point
estimate and every bootstrap replicate, as a weighted AUC), the paired AUC and the fixed reply's
match figures by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from rmeval.stats.bootstrap import resample_weights
from rmeval.stats.transplant import auc_weighted, fixed_reply_match, transplant

KEY = ["prompt_id", "response_id"]


def _tables(k=30, n=3, donors=4, seed=0, rounding=1):
    """Scores rounded to one decimal, so ties between own and donor scores occur."""
    rng = np.random.default_rng(seed)
    orig, wrong = [], []
    for i in range(k):
        for j in range(n):
            s = round(rng.normal(), rounding)
            orig.append((f"p{i}", f"p{i}r{j}", s))
            for v in range(donors):
                wrong.append((f"p{i}", f"p{i}r{j}", v, round(s - 0.4 + rng.normal(), rounding)))
    return (pd.DataFrame(orig, columns=[*KEY, "score"]),
            pd.DataFrame(wrong, columns=[*KEY, "variant", "score"]))


def test_auc_is_sklearn_roc_auc_with_ties():
    o, w = _tables()
    res = transplant(o, w, n_boot=50, rng=0)
    ref = roc_auc_score(np.r_[np.ones(len(o)), np.zeros(len(w))], np.r_[o["score"], w["score"]])
    assert res["auc"]["estimate"] == pytest.approx(ref, abs=1e-12)
    assert (w["score"].to_numpy()[:, None] == o["score"].to_numpy()[None, :]).any()  # ties were exercised


def test_auc_only_counts_transplanted_responses():
    o, w = _tables()
    w = w[w["response_id"] != "p0r0"]  # a response with no donor rows is not a positive
    res = transplant(o, w, n_boot=20, rng=0)
    pos = o[o["response_id"] != "p0r0"]["score"]
    ref = roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(w))], np.r_[pos, w["score"]])
    assert res["auc"]["estimate"] == pytest.approx(ref, abs=1e-12)


def test_auc_bootstrap_replicates_are_weighted_roc_auc():
    o, w = _tables(k=12, seed=3)
    prompts = pd.unique(o["prompt_id"])
    code = {p: i for i, p in enumerate(prompts)}
    weights = resample_weights(len(prompts), 6, np.random.default_rng(1))
    pc, nc = o["prompt_id"].map(code).to_numpy(), w["prompt_id"].map(code).to_numpy()
    est, boot = auc_weighted(o["score"].to_numpy(float), pc, w["score"].to_numpy(float), nc, weights)
    for b in range(len(weights)):
        sw = np.r_[weights[b][pc], weights[b][nc]]
        keep = sw > 0
        y = np.r_[np.ones(len(o)), np.zeros(len(w))]
        ref = roc_auc_score(y[keep], np.r_[o["score"], w["score"]][keep], sample_weight=sw[keep])
        assert boot[b] == pytest.approx(ref, abs=1e-12)


def test_auc_paired_by_hand():
    o, w = _tables(k=10, seed=5)
    res = transplant(o, w, n_boot=20, rng=0)
    m = w.merge(o, on=KEY, suffixes=("_w", "_o"))
    hand = np.mean((m["score_o"] > m["score_w"]) + 0.5 * (m["score_o"] == m["score_w"]))
    assert res["auc_paired"]["estimate"] == pytest.approx(hand, abs=1e-12)
    lo, hi = res["auc_paired"]["ci95"]
    assert 0 <= lo <= res["auc_paired"]["estimate"] <= hi <= 1


def test_fixed_reply_match_by_hand():
    """One fixed reply per prompt: own-prompt score vs its 4 donors; margin in the rated responses' SD."""
    rng = np.random.default_rng(2)
    o, _ = _tables(k=20, seed=7)
    own = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(20)], "response_id": "__generic_reply__",
                        "score": rng.normal(size=20)})
    donors = pd.DataFrame([(f"p{i}", "__generic_reply__", v, float(rng.normal())) for i in range(20) for v in range(4)],
                          columns=[*KEY, "variant", "score"])
    res = fixed_reply_match(o, own, donors, n_boot=50, rng=0)
    d = donors.groupby("prompt_id")["score"]
    s = own.set_index("prompt_id")["score"]
    margin = np.mean(s - d.mean().loc[s.index]) / o["score"].std(ddof=1)
    acc = np.mean(s > d.max().loc[s.index])
    assert res["margin_sd"]["estimate"] == pytest.approx(margin, abs=1e-12)
    assert res["accuracy"]["estimate"] == pytest.approx(acc, abs=1e-12)
    assert res["chance_accuracy"] == pytest.approx(0.2)
    assert res["n_prompts"] == 20
    ref = roc_auc_score(np.r_[np.ones(20), np.zeros(80)], np.r_[own["score"], donors["score"]])
    assert res["auc"]["estimate"] == pytest.approx(ref, abs=1e-12)


def test_planted_match_signal_gives_auc_above_chance_and_fixed_reply_at_chance():
    """Responses lose 1 SD under a wrong prompt; the fixed reply's score does not depend on the prompt."""
    rng = np.random.default_rng(0)
    k = 200
    rows, wrong, own, fixed = [], [], [], []
    for i in range(k):
        own.append((f"p{i}", "__generic_reply__", rng.normal()))
        for v in range(4):
            fixed.append((f"p{i}", "__generic_reply__", v, rng.normal()))
        for j in range(2):
            s = rng.normal()
            rows.append((f"p{i}", f"r{i}{j}", s))
            for v in range(4):
                wrong.append((f"p{i}", f"r{i}{j}", v, s - 1.0 + 0.2 * rng.normal()))
    o = pd.DataFrame(rows, columns=[*KEY, "score"])
    res = transplant(o, pd.DataFrame(wrong, columns=[*KEY, "variant", "score"]), n_boot=500, rng=0)
    assert res["auc_paired"]["ci95"][0] > 0.99  # every response beats its own donors
    assert 0.6 < res["auc"]["estimate"] < 0.9  # pooled across responses: overlapping distributions
    fr = fixed_reply_match(o, pd.DataFrame(own, columns=[*KEY, "score"]),
                           pd.DataFrame(fixed, columns=[*KEY, "variant", "score"]), n_boot=500, rng=0)
    assert fr["accuracy"]["ci95"][0] < 0.2 < fr["accuracy"]["ci95"][1]
    assert fr["auc"]["ci95"][0] < 0.5 < fr["auc"]["ci95"][1]
