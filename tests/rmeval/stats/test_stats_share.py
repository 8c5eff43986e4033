from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest

from rmeval.stats.share import icc1, residual_share, share
from tests.support import hand_icc


def test_balanced_matches_pingouin():
    rng = np.random.default_rng(1)
    k, n = 25, 4
    u = rng.normal(size=k)
    rows = [(f"p{i}", f"r{j}", u[i] + rng.normal()) for i in range(k) for j in range(n)]
    df = pd.DataFrame(rows, columns=["prompt", "rater", "score"])
    ref = pg.intraclass_corr(data=df, targets="prompt", raters="rater", ratings="score")
    types = ref.set_index("Type")["ICC"]
    # pingouin labels it "ICC1" in older releases and "ICC(1,1)" in newer ones
    ref_icc1 = float(types["ICC1"] if "ICC1" in types.index else types["ICC(1,1)"])
    assert icc1(df["score"].to_numpy(), df["prompt"].to_numpy()) == pytest.approx(ref_icc1, abs=1e-10)


def test_unbalanced_matches_hand_formula_and_drops_singletons():
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 6, size=40)
    groups = np.repeat([f"p{i}" for i in range(40)], sizes)
    u = rng.normal(size=40)
    values = np.repeat(u, sizes) + rng.normal(size=sizes.sum()) * 1.3
    ref = hand_icc(values, groups)
    res = share(values, groups, n_boot=300, rng=0)
    assert res["estimate"] == pytest.approx(ref, abs=1e-10)
    assert res["n_dropped"] == int((sizes == 1).sum()) > 0
    assert res["n_prompts"] == int((sizes >= 2).sum())
    lo, hi = res["ci95"]
    assert lo < res["estimate"] < hi


def test_share_can_be_negative():
    # each prompt's responses are spread symmetrically around a common mean: less between-prompt
    # variation than chance gives
    values = np.array([-1.0, 1.0, -1.1, 1.1, -0.9, 0.9, -1.05, 1.05, 0.0, 0.1, 0.1, 0.0])
    groups = np.repeat(["a", "b", "c", "d", "e", "f"], 2)
    est = icc1(values, groups)
    assert est < 0
    assert est == pytest.approx(hand_icc(values, groups), abs=1e-12)


def test_planted_share_recovered():
    rng = np.random.default_rng(3)
    k, n = 400, 3
    true_share = 0.4  # between variance 0.4, within 0.6
    u = rng.normal(scale=np.sqrt(0.4), size=k)
    values = np.repeat(u, n) + rng.normal(scale=np.sqrt(0.6), size=k * n)
    groups = np.repeat(np.arange(k), n)
    res = share(values, groups, n_boot=2000, rng=0)
    lo, hi = res["ci95"]
    assert lo < true_share < hi
    assert hi - lo < 0.2


def test_residual_share_matches_hand_residualisation():
    rng = np.random.default_rng(4)
    k = 80
    sizes = rng.integers(2, 5, size=k)
    groups = np.repeat(np.arange(k), sizes)
    loglen = rng.normal(5, 0.5, size=sizes.sum()) + np.repeat(rng.normal(size=k), sizes) * 0.3
    values = 2.0 * loglen + np.repeat(rng.normal(size=k), sizes) * 0.5 + rng.normal(size=sizes.sum())
    b, a = np.polyfit(loglen, values, 1)
    resid = values - (a + b * loglen)
    res = residual_share(values, loglen, groups, n_boot=500, rng=0)
    assert res["estimate"] == pytest.approx(hand_icc(resid, groups), abs=1e-9)
    # the raw share is inflated by the between-prompt length differences
    assert icc1(values, groups) > res["estimate"]


def test_seeded_bootstrap_is_reproducible():
    rng = np.random.default_rng(5)
    values = rng.normal(size=60)
    groups = np.repeat(np.arange(20), 3)
    assert share(values, groups, n_boot=200, rng=7)["ci95"] == share(values, groups, n_boot=200, rng=7)["ci95"]
