"""Whole-set effect sizes, the metric, the panel rule, the suitability risk, and reading a panel's
output back (policy-eval's Spearman table), against values computed by hand from planted pairs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from rmcore.errors import ConfigError, DataError
from rmeval.cli import main
from rmeval.experiments.winrate import read_panel_suitability, read_suitability
from rmeval.stats.confidence_drop import panel_margins
from rmeval.suitability import SuitabilitySettings, finalize, infer, validate_pairs


def pairs_frame(rng: np.random.Generator, n: int, shifts: dict[str, float], unchanged_every: int = 0) -> pd.DataFrame:
    """Margins x ~ N(1, 1); the perturbed margin is x − shift + noise; every ``unchanged_every``-th
    twin is identical to its original (changed false)."""
    rows = []
    for code, s in shifts.items():
        x = rng.normal(1.0, 1.0, n)
        y = x - s + rng.normal(0, 0.5, n)
        for k in range(n):
            same = unchanged_every and k % unchanged_every == 0
            yk = x[k] if same else y[k]
            rows.append({"item_id": f"i{k}", "perturbation": code, "m_original": expit(x[k]),
                         "m_perturbed": expit(yk), "log_m_original": -np.logaddexp(0, -x[k]),
                         "log_m_perturbed": -np.logaddexp(0, -yk), "changed": not same})
    return pd.DataFrame(rows)


def test_cohens_d_over_every_item_with_unchanged_twins():
    df = pairs_frame(np.random.default_rng(0), 40, {"EF": 0.3, "ST": 0.6}, unchanged_every=3)
    for metric, (a, b) in (("log_confidence", ("log_m_original", "log_m_perturbed")),
                           ("confidence", ("m_original", "m_perturbed"))):
        res = infer(df, SuitabilitySettings(n_permutations=300, metric=metric))["perturbations"]
        for code in ("EF", "ST"):
            g = df[df["perturbation"] == code]
            delta = np.where(g["changed"], g[a] - g[b], 0.0)  # an unchanged twin is a change of 0
            r = res[code]
            assert r["n"] == 40 and r["n_changed"] == 26 and r["n_unchanged"] == 14
            assert r["cohens_d"] == pytest.approx(delta.mean() / delta.std(ddof=1), rel=1e-10)
            assert r["t"] == pytest.approx(stats.ttest_1samp(delta, 0).statistic, rel=1e-10)
            ch = delta[g["changed"].to_numpy()]
            assert r["cohens_d_changed"] == pytest.approx(ch.mean() / ch.std(ddof=1), rel=1e-10)
            # accuracy over the whole set: an unchanged twin keeps its original's
            acc_o = (g["m_original"] > 0.5).mean()
            acc_p = np.where(g["changed"], g["m_perturbed"], g["m_original"]) > 0.5
            assert r["accuracy_change"] == pytest.approx(acc_p.mean() - acc_o)


def test_whole_set_p_equals_the_changed_items_p():
    # zeros flip to themselves: the permutation distribution of the sum is the changed items' own
    df = pairs_frame(np.random.default_rng(1), 12, {"ST": 0.5}, unchanged_every=4)
    res = infer(df, SuitabilitySettings(n_permutations=20_000, metric="log_confidence"))["perturbations"]["ST"]
    ch = df[df["changed"]]
    d = (ch["log_m_original"] - ch["log_m_perturbed"]).to_numpy()
    exact = stats.permutation_test((d,), lambda x, axis: stats.ttest_1samp(x, 0, axis=axis).statistic,
                                   permutation_type="samples", alternative="greater", n_resamples=np.inf).pvalue
    assert abs(res["p_value"] - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4


def test_log_confidence_reads_its_columns_and_is_recorded():
    df = pairs_frame(np.random.default_rng(2), 30, {"EF": 0.4})
    df.loc[0, ["m_original", "log_m_original"]] = [0.0, -800.0]  # sigma underflows; its log does not
    df = validate_pairs(df)
    res = infer(df, SuitabilitySettings(n_permutations=200))
    assert res["perturbations"]["EF"]["cohens_d"] == pytest.approx(
        (lambda d: d.mean() / d.std(ddof=1))((df["log_m_original"] - df["log_m_perturbed"]).to_numpy()))
    # without log columns a confidence of 0 has no log: an error naming the row and field
    with pytest.raises(DataError, match=r"row 1, field 'm_original': confidence 0 has no log"):
        validate_pairs(df.drop(columns=["log_m_original", "log_m_perturbed"]), file="p.jsonl")
    validate_pairs(df.drop(columns=["log_m_original", "log_m_perturbed"]), metric="confidence")
    finalize({"a": res}, SuitabilitySettings(n_permutations=200))
    assert res["settings"]["metric"] == "log_confidence"


def test_panel_rule_on_a_planted_panel():
    # hand-planted d and p: m = max{d : p >= 0.05}
    panel = {"m1": {"ST": {"cohens_d": 0.80, "p_value": 0.001}, "EF": {"cohens_d": 0.10, "p_value": 0.30}},
             "m2": {"ST": {"cohens_d": 0.30, "p_value": 0.06}, "EF": {"cohens_d": 0.05, "p_value": 0.04}},
             "m3": {"ST": {"cohens_d": 0.50, "p_value": 0.05}, "EF": {"cohens_d": 0.40, "p_value": 0.01}},
             "m4": {"ST": {"cohens_d": 0.20, "p_value": float("nan")}, "EF": {"cohens_d": -0.2, "p_value": 0.9}}}
    assert panel_margins(panel) == {"ST": 0.50, "EF": 0.10}
    assert panel_margins(panel, alpha=0.055) == {"ST": 0.30, "EF": 0.10}
    every_p_small = {"m1": {"SP": {"cohens_d": 0.9, "p_value": 0.001}},
                     "m2": {"SP": {"cohens_d": 0.7, "p_value": 0.01}}}
    assert panel_margins(every_p_small) == {"SP": 0.0}


def test_panel_margins_risk_and_reading_back(tmp_path):
    rng = np.random.default_rng(3)
    frames = [pairs_frame(rng, 40, {"EF": 0.0, "PH": 0.05, "ST": s, "SP": s / 2}).assign(model=m)
              for m, s in (("rm1", 0.8), ("rm2", 0.0), ("rm3", 0.3), ("rm4", 0.5))]
    f = tmp_path / "pairs.parquet"
    pd.concat(frames).to_parquet(f)
    out = tmp_path / "out"
    assert main(["suitability-stats", "--pairs", str(f), "--out", str(out), "--n-permutations", "2000",
                 "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "suitability.json").read_text())
    per = {m: doc["models"][m]["perturbations"] for m in doc["models"]}
    for code in ("EF", "PH", "ST", "SP"):
        free = [per[m][code]["cohens_d"] for m in per if per[m][code]["p_value"] >= 0.05]
        assert doc["settings"]["m"][code] == pytest.approx(max(free) if free else 0.0)
    for m in per:
        flagged = [r["cohens_d"] for c, r in per[m].items()
                   if r["rejected"] and r["cohens_d"] > doc["settings"]["m"][c]]
        assert doc["models"][m]["suitability_risk"] == pytest.approx(sum(flagged))
        assert read_suitability(f"{out}#{m}")["suitability_risk"] == pytest.approx(doc["models"][m]["suitability_risk"])
    assert per["rm1"]["ST"]["unsuitable"] and doc["models"]["rm1"]["suitability_risk"] > 0
    assert set(read_panel_suitability(out)) == {"rm1", "rm2", "rm3", "rm4"}
    with pytest.raises(DataError, match="a panel of 4 models: name one as PATH#NAME"):
        read_suitability(out)
    with pytest.raises(DataError, match="no model 'rm9'"):
        read_suitability(f"{out / 'suitability.json'}#rm9")
    # a margin set by hand overrides the panel rule
    res = {"a": infer(frames[0].drop(columns="model"), SuitabilitySettings(n_permutations=200))}
    finalize(res, SuitabilitySettings(n_permutations=200, margin=100.0))
    assert res["a"]["suitability_risk"] == 0 and not any(r["unsuitable"] for r in res["a"]["perturbations"].values())


def test_settings_reject_out_of_range_values():
    for bad in ({"margin": float("nan")}, {"margin": -0.1}, {"q": 1.0}, {"eta": float("nan")}, {"alpha": 0.0},
                {"n_permutations": 0}, {"seed": -1}, {"metric": "accuracy"}, {"weighting": "fixed"},
                {"null_share": {"controlled": 0.0}}, {"null_share": {"controlled": 1.5}},
                {"null_share": {"controlled": 0.5}, "weighting": "equal"}):
        with pytest.raises(ConfigError):
            SuitabilitySettings(**bad).validate()
    s = SuitabilitySettings(null_share={"controlled": 0.8})
    s.validate()
    assert s.mode == "fixed"
    with pytest.raises(ConfigError, match="no perturbation belongs to"):
        infer(pairs_frame(np.random.default_rng(0), 5, {"EF": 0.1}), SuitabilitySettings(null_share={"stylised": 0.5}))
