"""Appendix B.3 (Spearman matrix of per-item ΔM and its clustering, group-risk correlation) and the
per-subset aggregation, on planted data with a known answer."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from rmeval.cli import main
from rmeval.stats.confidence_drop_structure import (
    accuracy_agreement,
    difference_structure,
    group_risk_correlation,
    subset_summary,
)

SUBSETS = ("chat", "math", "code", "safety-refuse", "safety-response")


def test_spearman_matrix_and_clusters_on_planted_factors():
    rng = np.random.default_rng(0)
    n = 200
    f1, f2 = rng.normal(size=n), rng.normal(size=n)
    df = pd.DataFrame({"EF": f1 + 0.3 * rng.normal(size=n), "IU": f1 + 0.3 * rng.normal(size=n),
                       "ST": f2 + 0.3 * rng.normal(size=n), "LC": f2 + 0.3 * rng.normal(size=n),
                       "CN": rng.normal(size=n), "PH": np.zeros(n)})
    df.loc[5, "ST"] = np.nan  # an item without that twin: left out of every pair
    res = difference_structure(df)
    assert res["excluded"] == {"PH": "ΔM does not vary (the scorer's input is unchanged)"}
    complete = df.drop(columns="PH").dropna()
    ref = complete.corr(method="spearman")
    assert res["n_items"] == n - 1
    for a in res["codes"]:
        for b in res["codes"]:
            assert res["spearman"][a][b] == pytest.approx(ref.loc[a, b])
    # the first two merges join the planted pairs; CN joins last
    z = np.array(res["linkage"])
    first = [{res["codes"][int(i)] for i in row[:2]} for row in z[:2]]
    assert {"EF", "IU"} in first and {"ST", "LC"} in first
    assert z[0, 2] == pytest.approx(1 - max(ref.loc["EF", "IU"], ref.loc["ST", "LC"]))
    assert set(res["order"]) == {"EF", "IU", "ST", "LC", "CN"}
    two = difference_structure(df[["EF", "IU"]])
    assert two["n_items"] == n and len(two["linkage"]) == 1  # the ST gap no longer drops item 5
    assert two["spearman"]["EF"]["IU"] == pytest.approx(df["EF"].corr(df["IU"], method="spearman"))
    assert difference_structure(df[["EF"]])["spearman"] == {}


def test_group_risk_correlation_by_hand():
    risks = {"m1": (0.0, 0.2), "m2": (0.5, 0.9), "m3": (0.3, 0.1), "m4": (1.0, 1.4)}
    models = {m: {"EF": {"group": "controlled", "risk": c}, "ST": {"group": "stylized", "risk": s / 2},
                  "SP": {"group": "stylized", "risk": s / 2}} for m, (c, s) in risks.items()}
    res = group_risk_correlation(models)
    assert res["risk_by_group"]["m2"] == {"controlled": 0.5, "stylized": pytest.approx(0.9)}
    ref = stats.spearmanr([c for c, _ in risks.values()], [s for _, s in risks.values()])
    assert res["pairs"]["controlled vs stylized"]["spearman"] == pytest.approx(ref.statistic)
    assert res["pairs"]["controlled vs stylized"]["p_value"] == pytest.approx(ref.pvalue)


def test_subset_summary_by_hand():
    per = {"chat": {"a": {"ST": {"p_value": 0.01, "cohens_d": 0.5}, "EF": {"p_value": 0.5, "cohens_d": 0.0}},
                    "b": {"ST": {"p_value": 0.2, "cohens_d": 0.1}, "EF": {"p_value": float("nan"), "cohens_d": 0.0}}},
           "math": {"a": {"ST": {"p_value": 0.04, "cohens_d": 0.3}}}}
    res = subset_summary(per)
    assert res["chat"]["ST"] == {"share_significant": 0.5, "sum_d": pytest.approx(0.6), "n_models": 2}
    assert res["chat"]["EF"]["n_models"] == 1 and res["math"]["ST"]["share_significant"] == 1.0


def planted_panel(rng: np.random.Generator, n: int = 24) -> pd.DataFrame:
    """Three models on five subsets; only math's ST and safety-refuse's LC lower every model's confidence."""
    rows = []
    for model in ("rm1", "rm2", "rm3"):
        for sub in SUBSETS:
            for code in ("EF", "CN", "ST", "LC"):
                shift = 1.0 if (sub, code) in (("math", "ST"), ("safety-refuse", "LC")) else 0.0
                x = rng.normal(1.0, 1.0, n)
                y = x - shift + rng.normal(0, 0.5, n)
                rows += [{"model": model, "subset": sub, "item_id": f"{sub}-{k}", "perturbation": code,
                          "m_original": expit(x[k]), "m_perturbed": expit(y[k])} for k in range(n)]
    return pd.DataFrame(rows)


def test_per_subset_command_on_planted_multi_subset_pairs(tmp_path):
    df = planted_panel(np.random.default_rng(1))
    f = tmp_path / "pairs.jsonl"
    df.to_json(f, orient="records", lines=True)
    out = tmp_path / "out"
    assert main(["suitability-stats", "--pairs", str(f), "--out", str(out), "--n-permutations", "2000",
                 "--metric", "confidence", "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "suitability.json").read_text())
    summary = doc["summary"]["subsets"]
    assert list(summary) == list(SUBSETS)
    for sub in SUBSETS:
        for code in ("EF", "CN", "ST", "LC"):
            ds = []
            for m in ("rm1", "rm2", "rm3"):
                g = df[(df["model"] == m) & (df["subset"] == sub) & (df["perturbation"] == code)]
                d = (g["m_original"] - g["m_perturbed"]).to_numpy()
                ds.append(d.mean() / d.std(ddof=1))
                rec = doc["models"][m]["subsets"][sub]["perturbations"][code]
                assert rec["cohens_d"] == pytest.approx(ds[-1]) and rec["n"] == 24
            assert summary[sub][code]["sum_d"] == pytest.approx(sum(ds))
            planted = (sub, code) in (("math", "ST"), ("safety-refuse", "LC"))
            if planted:
                assert summary[sub][code]["share_significant"] == 1.0
    nulls = [summary[s][c]["share_significant"] for s in SUBSETS for c in ("EF", "CN", "ST", "LC")
             if (s, c) not in (("math", "ST"), ("safety-refuse", "LC"))]
    assert np.mean(nulls) < 0.15  # 54 null cells at alpha 0.05
    png = out / "suitability_subsets.png"
    assert png.stat().st_size > 20_000
    md = (out / "suitability.md").read_text()
    assert "## Per subset" in md and "### safety-response" in md
    for m in ("rm1", "rm2", "rm3"):  # one structure figure per model of a panel written together
        assert (out / f"suitability_structure-{m}.png").is_file()
    gr = doc["summary"]["group_risk"]["pairs"]["controlled vs stylized"]
    assert gr["n_models"] == 3 and (math.isnan(gr["spearman"]) or -1 <= gr["spearman"] <= 1)


def test_accuracy_agreement_leaves_out_a_model_whose_figures_were_null_in_strict_json():
    """A suitability.json read back holds null where a figure is undefined (no pair changed): that
    model is left out of the code's correlation as a NaN one is, and the rest equal scipy's."""
    rows = {"m1": (0.9, 0.001, -0.20), "m2": (0.5, 0.01, -0.10), "m3": (0.1, 0.2, -0.05), "m4": (0.3, 0.04, -0.02)}
    models = {m: {"EF": {"cohens_d": d, "p_value": p, "accuracy_change": a}} for m, (d, p, a) in rows.items()}
    models["m5"] = {"EF": {"cohens_d": None, "p_value": None, "accuracy_change": 0.0}}
    models["m6"] = {"EF": {"cohens_d": float("nan"), "p_value": 0.5, "accuracy_change": 0.0}}
    out = accuracy_agreement(models)["EF"]
    d, p, a = (np.array(v) for v in zip(*rows.values()))
    assert out["n_models"] == 4 and out["n_significant"] == 3
    assert out["spearman_d"] == pytest.approx(stats.spearmanr(d, a).statistic)
    assert out["spearman_p"] == pytest.approx(stats.spearmanr(p, a).statistic)
