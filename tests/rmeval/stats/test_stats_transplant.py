from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmeval.stats.transplant import prompt_only, shift, transplant


def _orig(rows):
    return pd.DataFrame(rows, columns=["prompt_id", "response_id", "score"])


ORIG = _orig([("a", "a1", 3.0), ("a", "a2", 1.0), ("b", "b1", 2.0), ("b", "b2", 0.0),
              ("c", "c1", 4.0), ("c", "c2", 2.0)])
WRONG = _orig([
    ("a", "a1", 1.0), ("a", "a1", 2.0),   # own 3 beats both
    ("a", "a2", 0.5), ("a", "a2", 1.5),   # own 1 loses to 1.5
    ("b", "b1", 2.0), ("b", "b1", 1.0),   # tie with max -> not a match
    ("b", "b2", -1.0), ("b", "b2", -2.0),
    ("c", "c1", 3.0), ("c", "c1", 3.5),
    ("c", "c2", 2.5), ("c", "c2", 0.5),
])


def test_margin_and_accuracy_by_hand():
    sd = np.std([3.0, 1.0, 2.0, 0.0, 4.0, 2.0], ddof=1)
    own = {"a1": 3, "a2": 1, "b1": 2, "b2": 0, "c1": 4, "c2": 2}
    wrong = {"a1": [1, 2], "a2": [0.5, 1.5], "b1": [2, 1], "b2": [-1, -2], "c1": [3, 3.5], "c2": [2.5, 0.5]}
    margins = [(own[r] - np.mean(w)) / sd for r, w in wrong.items()]
    hits = [own[r] > max(w) for r, w in wrong.items()]
    res = transplant(ORIG, WRONG, n_boot=300, rng=0)
    assert res["margin_sd"]["estimate"] == pytest.approx(np.mean(margins), abs=1e-12)
    assert res["accuracy"]["estimate"] == pytest.approx(np.mean(hits)) == pytest.approx(3 / 6)
    assert res["n_responses"] == 6
    lo, hi = res["accuracy"]["ci95"]
    assert 0 <= lo <= hi <= 1


def test_planted_mismatch_penalty_recovered():
    rng = np.random.default_rng(0)
    k, n, donors = 300, 2, 4
    u = rng.normal(size=k)
    rows, wrong = [], []
    penalty = 0.6  # raw score units; original SD is sqrt(1 + 1) by construction
    for i in range(k):
        for j in range(n):
            s = u[i] + rng.normal()
            rows.append((f"p{i}", f"p{i}r{j}", s))
            for _ in range(donors):
                wrong.append((f"p{i}", f"p{i}r{j}", s - penalty + 0.3 * rng.normal()))
    res = transplant(_orig(rows), _orig(wrong), n_boot=2000, rng=1)
    lo, hi = res["margin_sd"]["ci95"]
    assert lo < penalty / np.sqrt(2.0) < hi
    assert res["accuracy"]["estimate"] > 0.7


def test_shift_by_hand():
    para = pd.DataFrame([("a", "a1", 0, 3.5), ("a", "a1", 1, 2.0), ("b", "b2", 0, 0.5), ("c", "c2", 0, 2.0)],
                        columns=["prompt_id", "response_id", "variant", "score"])
    sd = np.std([3.0, 1.0, 2.0, 0.0, 4.0, 2.0], ddof=1)
    d = np.array([0.5, -1.0, 0.5, 0.0])
    res = shift(ORIG, para, n_boot=300, rng=0)
    assert res["abs_shift_sd"]["estimate"] == pytest.approx(np.abs(d).mean() / sd)
    assert res["signed_shift_sd"]["estimate"] == pytest.approx(d.mean() / sd)
    assert res["n_pairs"] == 4
    assert res["abs_shift_sd"]["n_prompts"] == 3


def test_prompt_only_is_pearson_of_prompt_means():
    rng = np.random.default_rng(1)
    k = 50
    u = rng.normal(size=k)
    orig = _orig([(f"p{i}", f"r{i}{j}", u[i] + rng.normal()) for i in range(k) for j in range(3)])
    po = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(k)], "response_id": "__generic_reply__",
                       "score": u + 0.5 * rng.normal(size=k)})
    means = orig.groupby("prompt_id")["score"].mean().loc[po["prompt_id"]].to_numpy()
    ref = np.corrcoef(po["score"], means)[0, 1]
    res = prompt_only(orig, po, n_boot=500, rng=0)
    assert res["estimate"] == pytest.approx(ref, abs=1e-12)
    assert res["ci95"][0] < ref < res["ci95"][1]


def test_transplant_without_original_is_an_error():
    bad = _orig([("a", "zz", 1.0)])
    with pytest.raises(ValueError, match="no original score"):
        transplant(ORIG, bad, n_boot=10)
