from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from rmeval.stats.regression import sibling_regression


def _data(sizes, rng, b_shown=0.7, b_sib=0.3):
    k = len(sizes)
    groups = np.repeat(np.arange(k), sizes)
    h = np.repeat(rng.normal(size=k), sizes) * 0.8 + rng.normal(size=sizes.sum())
    df = pd.DataFrame({"g": groups, "h": h})
    tot = df.groupby("g")["h"].transform("sum")
    cnt = df.groupby("g")["h"].transform("size")
    df["sib"] = (tot - df["h"]) / (cnt - 1)
    df["s"] = b_shown * df["h"] + b_sib * df["sib"] + rng.normal(size=len(df)) * 0.7 + 3.0
    return df


def test_matches_statsmodels_ols_unbalanced():
    rng = np.random.default_rng(0)
    df = _data(rng.integers(2, 5, size=60), rng)
    z = (df["s"] - df["s"].mean()) / df["s"].std(ddof=1)
    fit = sm.OLS(z, sm.add_constant(df[["h", "sib"]])).fit()
    res = sibling_regression(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=500, rng=0)
    assert res["shown"]["estimate"] == pytest.approx(fit.params["h"], abs=1e-8)
    assert res["sibling"]["estimate"] == pytest.approx(fit.params["sib"], abs=1e-8)
    assert "between_slope" not in res and "within_slope" not in res  # unequal k


def test_between_within_slopes_match_reparametrised_ols():
    rng = np.random.default_rng(1)
    k = 3
    df = _data(np.full(200, k), rng)
    z = (df["s"] - df["s"].mean()) / df["s"].std(ddof=1)
    pm = df.groupby("g")["h"].transform("mean")
    # score on prompt-mean rating and within-prompt deviation: the two slopes directly
    fit = sm.OLS(z, sm.add_constant(pd.DataFrame({"mean": pm, "dev": df["h"] - pm}))).fit()
    res = sibling_regression(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=500, rng=0)
    assert res["between_slope"]["estimate"] == pytest.approx(fit.params["mean"], abs=1e-8)
    assert res["within_slope"]["estimate"] == pytest.approx(fit.params["dev"], abs=1e-8)


def test_planted_coefficients_within_intervals():
    rng = np.random.default_rng(2)
    df = _data(np.full(500, 2), rng, b_shown=0.8, b_sib=0.4)
    sd = df["s"].std(ddof=1)
    res = sibling_regression(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=5000, rng=3)
    # planted raw slopes, expressed on the z-scored score
    for name, true in (("shown", 0.8 / sd), ("sibling", 0.4 / sd)):
        lo, hi = res[name]["ci95"]
        assert lo < true < hi, (name, lo, true, hi)
    assert res["shown"]["n_boot"] == 5000


# -- the score SD every statistic uses -----------------------------------------------------------------------

def test_sibling_regression_uses_the_sd_of_every_original_score():
    rng = np.random.default_rng(4)
    sizes = np.r_[np.full(40, 3), 1]  # the last prompt has one response: no siblings, dropped
    g = np.repeat(np.arange(len(sizes)), sizes)
    h = np.repeat(rng.normal(size=len(sizes)), sizes) + rng.normal(size=len(g))
    h[5] = np.nan  # an unrated response: out of the regression, still a scored response
    s = 0.6 * h + rng.normal(size=len(g)) + 2.0
    s[5] = 9.0
    res = sibling_regression(s, h, g, n_boot=200, rng=0)

    df = pd.DataFrame({"g": g, "h": h, "s": s}).dropna()
    df = df[df.groupby("g")["h"].transform("size") >= 2]
    tot, cnt = df.groupby("g")["h"].transform("sum"), df.groupby("g")["h"].transform("size")
    df["sib"] = (tot - df["h"]) / (cnt - 1)
    raw = sm.OLS(df["s"], sm.add_constant(df[["h", "sib"]])).fit().params
    sd_all = np.std(s, ddof=1)  # every finite original score, as the transplant margins use
    assert res["shown"]["estimate"] == pytest.approx(raw["h"] / sd_all, abs=1e-10)
    assert res["sibling"]["estimate"] == pytest.approx(raw["sib"] / sd_all, abs=1e-10)
    assert res["shown"]["estimate"] != pytest.approx(raw["h"] / df["s"].std(ddof=1), abs=1e-3)
    assert res["n_dropped"] == 1 and res["shown"]["n_prompts"] == 40
