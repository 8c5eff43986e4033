"""The model audit's like-for-like human references and the study's added statistics, on planted
data and against independent computations."""

from __future__ import annotations

import json

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.stats import pearsonr, rankdata

from rmeval.audit.report import render_markdown, write_report
from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.settings import StatsSettings
from tests.support import hand_icc

PLANTED = {"original": 0.5, "generic": 0.3, "last_turn": 0.7, "human": 0.2}


def planted(n_prompts: int = 500, k: int = 4, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores whose share under each condition is planted (independent prompt effects per
    condition, unit total variance), ratings with share 0.2; every 4th prompt is multi-turn."""
    rng = np.random.default_rng(seed)

    def draw(share: float) -> np.ndarray:
        return (np.repeat(rng.normal(size=n_prompts), k) * np.sqrt(share)
                + rng.normal(size=n_prompts * k) * np.sqrt(1 - share))

    pid = np.repeat([f"p{i}" for i in range(n_prompts)], k)
    rid = [f"{p}_r{j}" for p, j in zip(pid, np.tile(np.arange(k), n_prompts))]
    multi = np.repeat(np.arange(n_prompts) % 4 == 0, k)
    h = draw(PLANTED["human"])
    ratings = pd.DataFrame({"prompt_id": pid, "response_id": rid, "helpfulness": h, "single_turn": ~multi,
                            "response_length": np.exp(4 + 0.5 * rng.normal(size=pid.size))})
    orig = draw(PLANTED["original"]) + 0.3 * h
    frames = [pd.DataFrame({"prompt_id": pid, "response_id": rid, "condition": "original", "variant": 0,
                            "score": orig}),
              pd.DataFrame({"prompt_id": pid, "response_id": rid, "condition": "generic", "variant": 0,
                            "score": draw(PLANTED["generic"])})]
    lt = draw(PLANTED["last_turn"])
    frames.append(pd.DataFrame({"prompt_id": pid[multi], "response_id": np.array(rid)[multi], "condition": "last_turn",
                                "variant": 0, "score": lt[multi]}))
    for d in range(3):
        frames.append(pd.DataFrame({"prompt_id": pid, "response_id": rid, "condition": "random", "variant": d,
                                    "donor_prompt_id": np.roll(pid, 4 * (d + 1)),
                                    "score": orig - 1 + 0.5 * rng.normal(size=pid.size)}))
    return pd.concat(frames, ignore_index=True), ratings


@pytest.fixture(scope="module")
def data():
    return planted()


@pytest.fixture(scope="module")
def audit(data):
    scores, ratings = data
    pool = pd.DataFrame({"prompt_id": np.repeat(ratings["prompt_id"].unique(), 6),
                         "score": np.random.default_rng(1).normal(size=500 * 6)})
    return compute_audit(scores, ratings, StatsSettings(n_boot=300, n_boot_regression=300,
                                                       human_reliability={"borrowed": 0.62}),
                         reference_scores=pool)


def test_planted_shares_and_differences(data, audit):
    vs = audit["share_vs_human"]
    for name, cond in (("original", "original"), ("generic", "generic"), ("last_turn", "last_turn")):
        lo, hi = vs[name]["model"]["ci95"]
        # the original score also carries 0.3 x the rating: its planted share is (0.5 + 0.09*0.2)/(1.09)
        target = (0.5 + 0.09 * 0.2) / 1.09 if cond == "original" else PLANTED[cond]
        assert lo < target < hi, name
        assert vs[name]["human"]["ci95"][0] < 0.2 < vs[name]["human"]["ci95"][1]
    assert audit["share"]["last_turn"]["n_prompts"] == 125
    # random wrong prompts: a response's mean over its 3 donors, grouped by its own prompt (by hand)
    rnd = data[0][data[0]["condition"] == "random"].groupby(["prompt_id", "response_id"], sort=False)["score"].mean()
    assert audit["share"]["random"]["estimate"] == pytest.approx(
        hand_icc(rnd.to_numpy(), rnd.index.get_level_values(0).to_numpy()), abs=1e-10)
    d = audit["share_difference"]["original_minus_generic"]["difference"]
    assert d["ci95"][0] < (0.5 + 0.018) / 1.09 - 0.3 < d["ci95"][1]


def test_human_reference_is_computed_on_the_same_rows(data, audit):
    _, ratings = data
    vs = audit["share_vs_human"]
    h, g = ratings["helpfulness"].to_numpy(), ratings["prompt_id"].to_numpy()
    st = ratings["single_turn"].to_numpy()
    assert vs["single_turn"]["human"]["estimate"] == pytest.approx(hand_icc(h[st], g[st]), abs=1e-10)
    assert vs["ranks_single_turn"]["human"]["estimate"] == pytest.approx(hand_icc(rankdata(h[st]), g[st]), abs=1e-10)
    assert vs["ranks"]["human"]["estimate"] == pytest.approx(hand_icc(rankdata(h), g), abs=1e-10)
    assert vs["last_turn"]["human"]["estimate"] == pytest.approx(hand_icc(h[~st], g[~st]), abs=1e-10)
    assert vs["last_turn"]["human"]["n_prompts"] == 125
    x = sm.add_constant(np.log(ratings["response_length"].to_numpy()))
    resid = sm.OLS(h, x).fit().resid
    assert vs["log_length"]["human"]["estimate"] == pytest.approx(hand_icc(resid, g), abs=1e-10)
    for r in vs.values():
        assert r["difference"]["estimate"] == pytest.approx(r["model"]["estimate"] - r["human"]["estimate"])
    corr = audit["share"]["human_corrected"]["borrowed"]
    assert corr["estimate"] == pytest.approx(audit["share"]["human"]["estimate"] / 0.62)


def test_prompt_means_and_sibling_regression_by_condition(data, audit):
    scores, ratings = data
    wide = scores[scores["condition"].isin(["original", "generic"])].pivot_table(
        index=["prompt_id", "response_id"], columns="condition", values="score").reset_index()
    wide = wide.merge(ratings, on=["prompt_id", "response_id"])
    pm = wide.groupby("prompt_id")[["original", "generic", "helpfulness"]].mean()
    got = audit["prompt_means"]
    assert got["generic_vs_original"]["estimate"] == pytest.approx(pearsonr(pm["generic"], pm["original"])[0],
                                                                   abs=1e-10)
    assert got["model_vs_human"]["estimate"] == pytest.approx(pearsonr(pm["original"], pm["helpfulness"])[0], abs=1e-10)
    # sibling regression under random wrong prompts: a response's mean donor score, z-scored, by OLS
    rnd = scores[scores["condition"] == "random"].groupby(["prompt_id", "response_id"], sort=False)["score"].mean()
    df = rnd.reset_index().merge(ratings, on=["prompt_id", "response_id"])
    tot = df.groupby("prompt_id")["helpfulness"].transform("sum")
    sib = (tot - df["helpfulness"]) / 3
    z = (df["score"] - df["score"].mean()) / df["score"].std(ddof=1)
    fit = sm.OLS(z, sm.add_constant(np.column_stack([df["helpfulness"], sib]))).fit()
    r = audit["sibling_regression_by_condition"]["random"]
    assert r["shown"]["estimate"] == pytest.approx(np.asarray(fit.params)[1], abs=1e-10)
    assert r["sibling"]["estimate"] == pytest.approx(np.asarray(fit.params)[2], abs=1e-10)
    assert audit["sibling_regression_by_condition"]["original"] is not None
    assert set(audit["centering"]["variants"]) >= {"siblings_1", "siblings_2", "siblings_all", "pool", "pool_shrunk"}


def test_report_wording_and_paired_plot(audit, tmp_path):
    md = render_markdown(audit)
    low = md.lower()
    assert "diagnostic, not an" in low and "compresses the differences" in low
    for phrase in ("scores the prompt, not the response", "spurious", "wrong share", "too high"):
        assert phrase not in low
    assert "Model and human shares on the same responses" in md and "ranks, single-turn prompts" in md
    paths = write_report(audit, tmp_path)
    img = mpimg.imread(paths["shares"])
    assert img.ndim == 3 and img.shape[1] > 400
    saved = json.loads((tmp_path / "audit.json").read_text())
    # keys others read keep their place
    assert {"original", "human"} <= set(saved["share"]) and "random" in saved["transplant"]
    assert "sibling_regression" in saved and "estimate" in saved["share"]["original"]


def test_stats_cli_reference_pool_and_reliability(tmp_path):
    from rmeval.cli import main

    scores, ratings = planted(n_prompts=40, seed=2)
    scores.to_parquet(tmp_path / "scores.parquet")
    ratings.to_parquet(tmp_path / "ratings.parquet")
    pool = pd.DataFrame({"prompt_id": np.repeat(ratings["prompt_id"].unique(), 3), "score": np.arange(120.0) % 7})
    pool.to_csv(tmp_path / "pool.csv", index=False)
    rc = main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings", str(tmp_path / "ratings.parquet"),
               "--reference-scores", str(tmp_path / "pool.csv"), "--human-reliability", "hs2=0.5",
               "--out", str(tmp_path / "out"), "--n-boot", "100", "--n-boot-regression", "100",
               "--wandb-mode", "disabled"])
    assert rc == 0
    a = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert a["centering"]["variants"]["pool"]["pool_size_mean"] == 3
    assert a["share"]["human_corrected"]["hs2"]["estimate"] == pytest.approx(2 * a["share"]["human"]["estimate"])
    pool[["score"]].to_csv(tmp_path / "bad.csv", index=False)
    assert main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings", str(tmp_path / "ratings.parquet"),
                 "--reference-scores", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "o2"),
                 "--wandb-mode", "disabled"]) == 2
