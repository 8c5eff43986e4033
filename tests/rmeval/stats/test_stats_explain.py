"""What explains the prompt-level variance, on the simulated set with a reward built from what it
plants (rmcore.data.simulated keeps the truth in meta): the prompt offset u_i, its visible part
(a function of the prompt's features) and each response's within-prompt quality q_ij.

    reward_ij = u_i + q_ij + e_ij,   e_ij ~ N(0, 0.5^2)

* prompt probe from the prompt's features (one-hot topic, task, number of constraints,
context length -- the levels the offset is drawn on): the
  features see the visible part of u only, so the cross-fitted R^2 of the prompt-mean reward is
  about Var(visible) / Var(prompt mean) (planted, computed from meta) and the residual share about
  Var(hidden part) / (Var(hidden part) + Var(q + e));
* response probe (ridge) from q itself plus noise columns: R^2 about Var(q) / Var(reward) and the
  residual share about Var(u) / (Var(u) + Var(e));
* residualising on a rating column that IS q leaves share Var(u) / (Var(u) + Var(e)) too.

The ``calibrated`` section against scikit-learn's nested grouped cross-validation of a standardised
ridge and the one-way ANOVA variance components written out here, its intervals against the same
statistics on explicitly duplicated resamples; and a rating that is an exact linear function of
the reward calibrates back to itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmcore.data.simulated import simulate_rating_set
from rmcore.data.variance import icc1
from rmeval.stats.bootstrap import PromptSetResamples
from rmeval.stats.explain import calibrated, prompt_probe, rating_residuals, response_probes

NOISE = 0.5


def _planted(n_prompts: int = 600):
    rs = simulate_rating_set(n_prompts=n_prompts, responses_per_prompt=4, human_share=0.3, prompt_visibility=0.6,
                             multi_turn_fraction=0.0, with_preferences=False, seed=3)
    rng = np.random.default_rng(0)
    rows, prompts = [], []
    for p in rs.prompts:
        prompts.append({"prompt_id": p.prompt_id, **{f"pemb_0_topic_{p.meta['topic']}": 1.0,
                                                      f"pemb_0_task_{p.meta['task_type']}": 1.0,
                                                      f"pemb_0_length_{p.meta['length']}": 1.0},
                        f"pemb_0_constraints_{len(p.meta['constraints'])}": 1.0,
                        "u": p.meta["prompt_offset"], "visible": p.meta["visible_offset"]})
        for r in p.responses:
            rows.append({"prompt_id": p.prompt_id, "response_id": r.response_id, "u": p.meta["prompt_offset"],
                         "q": r.meta["quality"], "e": rng.normal(0, NOISE)})
    orig = pd.DataFrame(rows)
    orig["score"] = orig["u"] + orig["q"] + orig["e"]
    pf = pd.DataFrame(prompts).fillna(0.0)
    return orig, pf


def test_prompt_probe_recovers_the_visible_share_of_the_prompt_offset():
    orig, pf = _planted()
    means = orig.groupby("prompt_id", sort=False)["score"].mean()
    visible = pf.set_index("prompt_id").loc[means.index, "visible"]
    planted_r2 = np.var(visible) / np.var(means)  # what the prompt's features can see
    hidden = orig["u"] - orig["prompt_id"].map(pf.set_index("prompt_id")["visible"])
    planted_residual = icc1(hidden + orig["q"] + orig["e"], orig["prompt_id"])
    out = prompt_probe(orig, None, pf.drop(columns=["u", "visible"]), PromptSetResamples(0, 200))
    emb = out["embedding"]
    assert abs(emb["r2"]["estimate"] - planted_r2) < 0.08, (emb["r2"]["estimate"], planted_r2)
    assert emb["r2_in_sample"]["estimate"] >= emb["r2"]["estimate"]
    assert abs(emb["residual_share"]["estimate"] - planted_residual) < 0.04, (emb["residual_share"], planted_residual)
    lo, hi = emb["r2"]["ci95"]
    assert lo < emb["r2"]["estimate"] < hi


def test_response_probe_and_rating_residual_leave_the_prompt_offset():
    orig, _ = _planted()
    planted_share = icc1(orig["u"] + orig["e"], orig["prompt_id"])  # what remains once q is explained
    planted_r2 = np.var(orig["q"]) / np.var(orig["score"])
    rng = np.random.default_rng(1)
    feats = orig[["prompt_id", "response_id"]].assign(
        txt_quality=orig["q"], **{f"txt_noise_{j}": rng.normal(size=len(orig)) for j in range(5)})
    rp = response_probes(orig, feats, None, PromptSetResamples(0, 200), learners=("ridge",))
    assert abs(rp["ridge"]["r2"]["estimate"] - planted_r2) < 0.05
    assert abs(rp["ridge"]["share"]["estimate"] - planted_share) < 0.05
    assert rp["n_text_features"] == 6 and rp["n_embedding"] == 0
    res = rating_residuals(orig.assign(quality=orig["q"]), ["quality"], PromptSetResamples(0, 200))
    # a single rating column: no complexity/verbosity pair, no "all ratings" set
    assert res == {}
    res = rating_residuals(orig.assign(quality=orig["q"], other=rng.normal(size=len(orig))), ["quality", "other"],
                           PromptSetResamples(0, 200))
    assert abs(res["all_ratings"]["share"]["estimate"] - planted_share) < 0.05
    # the residual on q keeps u: almost none of the between-prompt variance is removed
    assert abs(res["all_ratings"]["between_removed"]["estimate"]) < 0.1


def _anova(values, groups):
    """(sigma_b^2, sigma_w^2) of the one-way random-effects model by the ANOVA formulas:
    sigma_w^2 = MSW, sigma_b^2 = (MSB - MSW) / n0, n0 = (N - sum n_i^2 / N) / (k - 1)."""
    df = pd.DataFrame({"v": np.asarray(values, float), "g": np.asarray(groups)})
    grp = df.groupby("g", sort=False)["v"]
    n, m = grp.size(), grp.mean()
    big_n, k, grand = len(df), len(n), df["v"].mean()
    msb = float((n * (m - grand) ** 2).sum()) / (k - 1)
    msw = float(((df["v"] - grp.transform("mean")) ** 2).sum()) / (big_n - k)
    n0 = (big_n - float((n ** 2).sum()) / big_n) / (k - 1)
    return (msb - msw) / n0, msw


def _calibration_data(n_prompts=90, seed=5):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 6, size=n_prompts)  # 2 to 5 responses per prompt
    pid = np.repeat([f"c{i}" for i in range(n_prompts)], sizes)
    u = np.repeat(rng.normal(size=n_prompts), sizes)
    q = rng.normal(size=pid.size)
    score = 2.0 * u + q + 0.5 * rng.normal(size=pid.size) + 3.0
    rating = 0.6 * u + q + 0.4 * rng.normal(size=pid.size)
    return pd.DataFrame({"prompt_id": pid, "response_id": [f"r{i}" for i in range(pid.size)], "score": score,
                         "helpfulness": rating})


def test_calibrated_against_sklearn_and_anova_by_hand():
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score
    from sklearn.model_selection import GridSearchCV, GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from rmeval.stats.probes import RIDGE_ALPHAS

    orig = _calibration_data()
    resamples = PromptSetResamples(0, 60)
    out = calibrated(orig, "helpfulness", None, resamples, seed=0)
    x, y, g = orig[["score"]].to_numpy(), orig["helpfulness"].to_numpy(), orig["prompt_id"].to_numpy()
    cal = np.empty(len(y))  # cross-fitted over five folds grouped by prompt, the penalty chosen inside each
    for train, test in GroupKFold(5).split(x, y, g):
        search = GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(RIDGE_ALPHAS)},
                              cv=GroupKFold(3), scoring="r2").fit(x[train], y[train], groups=g[train])
        cal[test] = search.predict(x[test])
    (b_cal, w_cal), (b_h, w_h) = _anova(cal, g), _anova(y, g)
    assert out["between_variance"]["estimate"] == pytest.approx(b_cal, abs=1e-9)
    assert out["human_between_variance"]["estimate"] == pytest.approx(b_h, abs=1e-9)
    assert out["difference"]["estimate"] == pytest.approx(b_cal - b_h, abs=1e-9)
    assert out["share"]["estimate"] == pytest.approx(b_cal / (b_cal + w_cal), abs=1e-9)
    assert out["human_share"]["estimate"] == pytest.approx(b_h / (b_h + w_h), abs=1e-9)
    assert out["r2"]["estimate"] == pytest.approx(r2_score(y, cal), abs=1e-9)
    assert (out["n_responses"], out["n_fold_groups"], out["attribute"]) == (len(orig), 90, "helpfulness")
    # intervals: the same figures on each resample, the prompts duplicated explicitly (a prompt drawn
    # twice is two prompts), the calibration held fixed; percentile interval
    w = resamples.weights(pd.unique(orig["prompt_id"]))
    codes = pd.factorize(orig["prompt_id"])[0]
    rows_of = [np.flatnonzero(codes == j) for j in range(w.shape[1])]
    diffs, r2s = [], []
    for wb in w:
        rows = np.concatenate([rows_of[j] for j in range(len(wb)) for _ in range(int(wb[j]))])
        labels = np.concatenate([[f"{j}:{c}"] * len(rows_of[j]) for j in range(len(wb)) for c in range(int(wb[j]))])
        diffs.append(_anova(cal[rows], labels)[0] - _anova(y[rows], labels)[0])
        r2s.append(r2_score(y[rows], cal[rows]))
    assert out["difference"]["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-9)
    assert out["r2"]["ci95"] == pytest.approx(list(np.percentile(r2s, [2.5, 97.5])), abs=1e-9)


def test_calibrated_recovers_an_exact_linear_rating():
    """helpfulness = 1 + 0.5 score: the calibration is the rating itself (up to the smallest ridge
    penalty's shrinkage), so R^2 is 1, the between-prompt variances agree and their difference is 0;
    the between-prompt variance is 0.25 times the score's."""
    orig = _calibration_data(seed=6)
    orig["helpfulness"] = 1.0 + 0.5 * orig["score"]
    out = calibrated(orig, "helpfulness", None, PromptSetResamples(0, 50), seed=0)
    b_score, _ = _anova(orig["score"], orig["prompt_id"])
    assert out["r2"]["estimate"] == pytest.approx(1.0, abs=1e-4)
    assert out["human_between_variance"]["estimate"] == pytest.approx(0.25 * b_score, rel=1e-12)
    assert out["between_variance"]["estimate"] == pytest.approx(0.25 * b_score, rel=1e-3)
    assert abs(out["difference"]["estimate"]) < 1e-3 * b_score
    assert out["share"]["estimate"] == pytest.approx(out["human_share"]["estimate"], abs=1e-3)
