"""The crossed decomposition of transplant scores against statsmodels: the full-sample fit against
OLS with response and prompt-level dummies and the own-prompt indicator, a bootstrap replicate
against WLS with the resample's multiplicities as weights, and a planted match effect recovered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from rmeval.stats.bootstrap import resample_weights
from rmeval.stats.crossed import GENERIC_LEVEL, CrossedFit, crossed_decomposition, crossed_rows


def _tables(k=25, n=2, donors=3, match=2.0, seed=0, sd_prompt=1.0, sd_response=1.0):
    rng = np.random.default_rng(seed)
    beta = sd_prompt * rng.normal(size=k)
    orig, don, gen = [], [], []
    for i in range(k):
        for j in range(n):
            a = sd_response * rng.normal()
            orig.append((f"p{i}", f"r{i}_{j}", a + beta[i] + match + 0.3 * rng.normal()))
            gen.append((f"p{i}", f"r{i}_{j}", a - 0.5 + 0.3 * rng.normal()))
            for q in rng.choice([x for x in range(k) if x != i], donors, replace=False):
                don.append((f"p{i}", f"r{i}_{j}", f"p{q}", a + beta[q] + 0.3 * rng.normal()))
    return (pd.DataFrame(orig, columns=["prompt_id", "response_id", "score"]),
            pd.DataFrame(don, columns=["prompt_id", "response_id", "donor_prompt_id", "score"]),
            pd.DataFrame(gen, columns=["prompt_id", "response_id", "score"]))


def _statsmodels(rows, weights=None):
    data = rows.assign(level=rows["level"].replace({GENERIC_LEVEL: "0_generic"}))  # the reference level sorts first
    if weights is None:
        return smf.ols("score ~ C(response) + C(level) + own", data=data).fit()
    keep = weights > 0
    return smf.wls("score ~ C(response) + C(level) + own", data=data[keep], weights=weights[keep]).fit()


def _beta(fit, level):
    return fit.params.get(f"C(level)[T.{level}]", 0.0)


def test_full_fit_is_statsmodels_ols():
    o, d, g = _tables()
    rows = crossed_rows(o, d, g)
    prompts = pd.unique(o["prompt_id"])
    fit = CrossedFit(rows, prompts)
    theta = fit.solve(np.ones((len(prompts), 1)))[:, 0]
    ref = _statsmodels(rows)
    assert theta[fit.m] == pytest.approx(ref.params["own"], abs=1e-8)
    for i, level in enumerate(fit.levels):  # every prompt level's effect relative to the generic prompt
        assert theta[i] == pytest.approx(_beta(ref, level), abs=1e-8)
    eff = fit.effects(theta, np.ones(len(prompts)))
    assert eff["match"] == pytest.approx(ref.params["own"], abs=1e-8)
    # the response effects: mean of each response's rows net of its prompt terms
    resid = rows["score"] - [(_beta(ref, lv) if lv != GENERIC_LEVEL else 0.0) for lv in rows["level"]] \
        - ref.params["own"] * rows["own"]
    alpha = resid.groupby(rows["response"]).mean()
    assert eff["sd_response"] == pytest.approx(alpha.std(ddof=0), abs=1e-8)
    donor = (rows["own"] == 0) & (rows["level"] != GENERIC_LEVEL)
    bd = np.array([_beta(ref, lv) for lv in rows.loc[donor, "level"]])
    assert eff["sd_donor"] == pytest.approx(bd.std(ddof=0), abs=1e-8)
    assert eff["generic_minus_donor"] == pytest.approx(-bd.mean(), abs=1e-8)


def test_a_resample_is_statsmodels_wls_with_multiplicities():
    o, d, g = _tables(seed=1)
    rows = crossed_rows(o, d, g)
    prompts = pd.unique(o["prompt_id"])
    fit = CrossedFit(rows, prompts)
    w = resample_weights(len(prompts), 3, np.random.default_rng(4))
    theta = fit.solve(w.T)
    for b in range(3):
        row_w = w[b][pd.Index(prompts).get_indexer(rows["prompt_id"])]
        ref = _statsmodels(rows, row_w)
        assert theta[fit.m, b] == pytest.approx(ref.params["own"], abs=1e-7)


def test_without_generic_the_first_level_is_the_reference():
    o, d, _ = _tables(seed=2)
    rows = crossed_rows(o, d, None)
    fit = CrossedFit(rows, pd.unique(o["prompt_id"]))
    theta = fit.solve(np.ones((len(pd.unique(o["prompt_id"])), 1)))[:, 0]
    ref = smf.ols("score ~ C(response) + C(level, Treatment(reference='p0')) + own", data=rows).fit()
    assert theta[fit.m] == pytest.approx(ref.params["own"], abs=1e-8)
    assert "generic_minus_donor" not in fit.effects(theta, np.ones(len(pd.unique(o["prompt_id"]))))


def test_planted_match_effect_and_ratios_are_recovered():
    """Planted: match 2.0, response SD 1.0, prompt SD 1.0 (raw units; noise 0.3)."""
    o, d, g = _tables(k=150, match=2.0, seed=3)
    prompts = np.asarray(pd.unique(o["prompt_id"]))
    w = resample_weights(len(prompts), 300, np.random.default_rng(0))
    res = crossed_decomposition(o, d, g, w, prompts)
    sd = o["score"].std(ddof=1)
    lo, hi = res["match"]["ci95"]
    assert lo < 2.0 / sd < hi
    assert res["match_over_response"]["estimate"] == pytest.approx(2.0, abs=0.3)
    assert res["donor_over_response"]["estimate"] == pytest.approx(1.0, abs=0.2)
    assert res["generic"] and res["n_responses"] == 300
