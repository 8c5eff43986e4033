"""Reward Auditor's procedures and the tables issue #34 adds: the generative RMs prompted as
Appendix A.1.3 prompts them, the radar's dry run counting the authors' files when they are on disk
(and saying "assumed" when not), B.4's Tables 3 and 4 (ρ and AUROC of the accuracy change against
suitability, checked against scipy and scikit-learn) and B.1's Table 2 with Figures 4-6 (K² and
the p-value methods' agreement, recomputed here from the rows' own pairs tables), each a stand-in
run on three discriminative rows (the heavy suite runs every row)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from sklearn.metrics import roc_auc_score

from rmcore.errors import ConfigError
from rmeval.cli import main
from rmeval.reproduce.plan import plan_recipe
from rmeval.reproduce.recipe import build_recipe, load_reproduction
from rmeval.stats.confidence_drop_structure import accuracy_agreement, auroc
from tests.rmcore.data.test_data_reward_auditor import write_files
from tests.support import ROOT, data_source_flags

RECIPES = ROOT / "recipes" / "reproduce"
TABLE1, RADAR = (RECIPES / "reward_auditor_table1_rmbench_chat.yaml",
                 RECIPES / "reward_auditor_figure2_subset_radar.yaml")
TABLES34, TABLE2 = RECIPES / "reward_auditor_tables3_4_accuracy.yaml", RECIPES / "reward_auditor_table2_normality.yaml"
ROWS = ["skywork-llama-3.1-8b", "urm-llama-3-8b", "fsfairx-llama3-rm-v0.1"]  # three kinds of discriminative RM


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_the_generative_rms_are_prompted_as_appendix_a13_prompts_them():
    for path in (TABLE1, RADAR, TABLES34, TABLE2):
        r = load_reproduction(path)
        assert r.settings["judge_style"] == "explain", path.name
        assert {m.name for m in r.models if m.kind == "generative_judge"} == {
            "qwen2.5-72b-instruct", "llama-3.1-70b-instruct", "qwen3-8b"}


def test_a_table_read_from_another_recipes_runs_takes_its_rows_and_may_not_restate_them(tmp_path):
    t34, radar = load_reproduction(TABLES34), load_reproduction(RADAR)
    assert [m.hub_id for m in t34.models] == [m.hub_id for m in radar.models]
    assert t34.settings == radar.settings and list(t34.data) == list(radar.data)
    assert load_reproduction(TABLE2).stand_in.data == load_reproduction(TABLE1).stand_in.data
    raw = yaml.safe_load(TABLES34.read_text())
    raw["settings"] = {"n_permutations": 10}
    with pytest.raises(ConfigError, match="runs_of .* takes settings from that recipe"):
        build_recipe(raw, TABLES34)


def test_the_radar_dry_run_counts_the_authors_files_and_says_assumed_without_them(tmp_path, no_network):
    plan = plan_recipe(load_reproduction(RADAR), tmp_path / "p0")
    sa = plan["data"]["safety-accept"]
    assert sa["items"] == 157 and sa["source"].startswith("assumed (the data is not on disk)")
    root = tmp_path / "RewardAuditor" / "datasets"
    for n, task in enumerate(("chat", "math", "code", "safety-accept", "safety-refuse"), start=2):
        write_files(root, n=n, tasks=(task,))
    raw = yaml.safe_load(RADAR.read_text())
    for entry in raw["data"].values():
        entry["spec"]["path"] = str(root)
    plan = plan_recipe(build_recipe(raw, RADAR), tmp_path / "p1")
    got = {k: (v["items"], v["source"]) for k, v in plan["data"].items()}
    assert got == {k: (n, "counted from the data on disk") for n, k in enumerate(
        ("chat", "math", "code", "safety-accept", "safety-refuse"), start=2)}


def test_accuracy_agreement_against_scipy_and_scikit_learn():
    rng = np.random.default_rng(3)
    models = {}
    for i in range(9):
        models[f"m{i}"] = {"ST": {"cohens_d": float(rng.normal()), "p_value": float(rng.uniform(0, 0.2)),
                                  "accuracy_change": float(rng.choice([-0.2, -0.1, 0.0, 0.1]))},  # ties
                           "EF": {"cohens_d": 0.1 * i, "p_value": 0.5, "accuracy_change": -0.01 * i}}
    models["m9"] = {"ST": {"cohens_d": float("nan"), "p_value": 0.01, "accuracy_change": 0.0}}  # left out
    got = accuracy_agreement(models, alpha=0.05)
    st = [models[f"m{i}"]["ST"] for i in range(9)]
    d, p, acc = (np.array([r[k] for r in st]) for k in ("cohens_d", "p_value", "accuracy_change"))
    assert got["ST"]["n_models"] == 9 and got["ST"]["n_significant"] == int((p < 0.05).sum())
    assert got["ST"]["spearman_d"] == pytest.approx(stats.spearmanr(d, acc).statistic)
    assert got["ST"]["p_spearman_d"] == pytest.approx(stats.spearmanr(d, acc).pvalue)
    assert got["ST"]["spearman_p"] == pytest.approx(stats.spearmanr(p, acc).statistic)
    assert got["ST"]["auroc"] == pytest.approx(roc_auc_score(p < 0.05, -acc))
    assert got["EF"]["spearman_d"] == pytest.approx(-1.0)
    assert math.isnan(got["EF"]["auroc"])  # no model significant: one class only
    assert auroc(np.array([3.0, 1.0, 2.0]), np.array([True, False, False])) == 1.0


def _figures(out):
    with open(out / "figures.csv", newline="") as f:
        return {(r["row"], r["column"]): r for r in csv.DictReader(f)}


def _perturbations(out, row, key):
    return json.loads((out / "rows" / row / key / "suitability_model.json").read_text())["perturbations"]


def test_tables_3_and_4_stand_in_run(tmp_path, capsys, one_torch_thread, shared_data):
    out = tmp_path / "t34"
    assert main(["reproduce", str(TABLES34), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", *ROWS]) == 0
    printed = capsys.readouterr().out
    assert "STAND-IN RUN" in printed and "| RM-Bench safety-accept |" in printed and "\n\n\n" not in printed
    assert "♡ URM-LLaMa-3-8B |" not in printed  # the models feed the panel rows only
    figs = _figures(out)
    assert (figs[("safety-accept", "rho_d_CN")]["published"] == "0.673"
            and figs[("code", "auroc_ST")]["published"] == "1.0")
    assert {r["stand_in"] for r in figs.values()} == {"True"}
    with open(out / "table.csv", newline="") as f:
        assert all(r[0].endswith("[stand-in: ours means nothing]") for r in list(csv.reader(f))[1:])
    for key, code in (("chat", "ST"), ("safety-refuse", "EF"), ("math", "LE")):
        recs = [next(v for s, v in _perturbations(out, row, key).items() if s.partition("@")[0] == code)
                for row in ROWS]
        d, acc = np.array([r["cohens_d"] for r in recs]), np.array([r["accuracy_change"] for r in recs])
        cell = figs[(key, f"rho_d_{code}")]
        if np.isfinite(d).all() and np.ptp(d) > 0 and np.ptp(acc) > 0:
            assert float(cell["ours"]) == pytest.approx(stats.spearmanr(d, acc).statistic)
        else:  # undefined with three stand-ins: the cell says why
            assert cell["ours"] == "" and cell["missing"]


def _delta(out, row, code):
    """ΔM of a row's perturbation recomputed from its pairs table (an unchanged input: 0)."""
    df = pd.read_parquet(out / "rows" / row / "chat" / "suitability_pairs.parquet")
    g = df[df["perturbation"] == code]
    return np.where(g["changed"], g["log_m_original"] - g["log_m_perturbed"], 0.0)


def test_table_2_and_figures_4_to_6_stand_in_run(tmp_path, capsys, one_torch_thread, shared_data):
    out = tmp_path / "t2"
    assert main(["reproduce", str(TABLE2), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", *ROWS, *data_source_flags(TABLE2, shared_data)]) == 0
    figs = _figures(out)
    for row in ROWS:
        k2 = stats.normaltest(_delta(out, row, "CN"))
        cell = figs[(row, "k2_CN")]
        assert float(cell["ours"]) == pytest.approx(k2.statistic)
        assert cell["ours_mark"] == ("***" if k2.pvalue < 0.001 else "**" if k2.pvalue < 0.01 else
                                     "*" if k2.pvalue < 0.05 else "")
    rob = [_perturbations(out, row, "chat")["CN"]["robustness"] for row in ROWS]
    rho = stats.spearmanr([r["p_ttest"] for r in rob], [r["p_wilcoxon"] for r in rob]).statistic
    assert float(figs[("CN", "rho_t_wilcoxon")]["ours"]) == pytest.approx(rho)
    assert (figs[("CN", "rho_t_wilcoxon")]["published"] == "0.71"
            and figs[("SLC", "rho_perm_wilcoxon")]["published"] == "0.97")
    md = (out / "table.md").read_text()
    # no LC or SLC without a rewriter model: the cells and the ten-perturbation bounds say so
    assert "computed no 'method_agreement_by_code.SLC'" in md and "waits for LC, SLC" in md


def test_a_generative_rm_row_runs_the_explain_prompt_and_its_undefined_cells_say_why(tmp_path, one_torch_thread,
                                                                                       shared_data):
    out = tmp_path / "t1"
    assert main(["reproduce", str(TABLE1), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", "qwen3-8b", *data_source_flags(TABLE1, shared_data)]) == 0
    meta = json.loads((out / "rows" / "qwen3-8b" / "chat" / "suitability_model.json").read_text())["meta"]
    assert meta["scorer"] == "pairwise_judge" and meta["judge_style"] == "explain"
    cut = meta["truncation"]
    why = _figures(out)[("qwen3-8b", "d_EF")]["missing"]  # the stand-in judge's prompt does not fit 256 tokens
    assert f"the 256-token stand-in cap cut the prompt of {cut['prompt_truncated']}" in why
