"""share_pair follows the audit's resampling settings: the like-for-like intervals are built from
the audit's n_boot and seed (one resample matrix per prompt set), checked against a bootstrap
written out by hand (each drawn prompt a separate group, ICC(1) by the ANOVA formula)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.bootstrap import PromptSetResamples
from rmeval.stats.settings import StatsSettings
from rmeval.stats.share import share_pair
from tests.support import hand_icc


def _data(k: int = 30, n: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=k)
    g = np.repeat([f"p{i:02d}" for i in range(k)], n)
    a = np.repeat(u, n) + rng.normal(size=k * n)
    b = 0.5 * np.repeat(u, n) + rng.normal(size=k * n)
    return a, b, g


def _hand_interval(values: np.ndarray, groups: np.ndarray, weights: np.ndarray) -> list[float]:
    prompts = sorted(set(groups))
    by = {p: values[groups == p] for p in prompts}
    reps = []
    for row in weights:
        vals, grp = [], []
        for p, m in zip(prompts, row):
            for c in range(int(m)):  # each copy of a drawn prompt is its own group
                vals += list(by[p])
                grp += [f"{p}#{c}"] * len(by[p])
        reps.append(hand_icc(vals, grp))
    return list(np.percentile(reps, [2.5, 97.5]))


def test_share_pair_uses_the_given_resamples():
    a, b, g = _data()
    rs = PromptSetResamples(seed=5, n_boot=120)
    r = share_pair(a, b, g, names=("model", "human"), resamples=rs)
    w = rs.weights(np.array(sorted(set(g))))
    assert r["model"]["n_boot"] == r["human"]["n_boot"] == r["difference"]["n_boot"] == 120
    assert r["model"]["ci95"] == pytest.approx(_hand_interval(a, g, w), abs=1e-10)
    assert r["human"]["ci95"] == pytest.approx(_hand_interval(b, g, w), abs=1e-10)
    # another seed, other resamples; the point estimates do not move
    r2 = share_pair(a, b, g, names=("model", "human"), resamples=PromptSetResamples(seed=6, n_boot=120))
    assert r2["model"]["estimate"] == r["model"]["estimate"] and r2["model"]["ci95"] != r["model"]["ci95"]


def test_audit_like_for_like_intervals_follow_n_boot_and_seed():
    a, b, g = _data(k=25, seed=1)
    rid = [f"r{i}" for i in range(len(a))]
    ratings = pd.DataFrame({"prompt_id": g, "response_id": rid, "helpfulness": np.round(b * 2)})
    scores = pd.DataFrame({"prompt_id": g, "response_id": rid, "condition": "original", "score": a})
    res = {(n, s): compute_audit(scores, ratings, StatsSettings(n_boot=n, n_boot_regression=50, seed=s))
           for n, s in ((150, 0), (150, 1), (90, 0))}
    for (n, _), audit in res.items():
        vs = audit["share_vs_human"]["original"]
        assert vs["model"]["n_boot"] == vs["difference"]["n_boot"] == n
    assert res[(150, 0)]["share_vs_human"]["original"]["model"]["ci95"] != \
        res[(150, 1)]["share_vs_human"]["original"]["model"]["ci95"]
