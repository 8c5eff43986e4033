"""What Pairwise Evaluation Misses' tables issue #34 adds: Tables 4 and 7 (human ratings only) as
stand-in runs whose figures are recomputed here by hand from the stand-in data files (one-way
ANOVA ICC(1), the leave-one-out correlation, the corrected share), and Table 1's statements about
a change between two columns (URM's generic-prompt share +0.26, the others within 0.10, log length
within 0.05) on planted audit documents."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from rmeval.cli import main
from rmeval.reproduce.recipe import load_reproduction
from rmeval.reproduce.table import build_cells
from tests.support import ROOT

RECIPES = ROOT / "recipes" / "reproduce"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def icc1(df: pd.DataFrame, value: str, group: str) -> float:
    """One-way ANOVA ICC(1), (MSB - MSW) / (MSB + (n0 - 1) MSW), written out."""
    g = df.groupby(group)[value]
    n_i, means, grand = g.size(), g.mean(), df[value].mean()
    k, n = len(n_i), len(df)
    msb = float((n_i * (means - grand) ** 2).sum() / (k - 1))
    msw = float(((df[value] - df[group].map(means)) ** 2).sum() / (n - k))
    n0 = (n - (n_i ** 2).sum() / n) / (k - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def _figures(out):
    with open(out / "figures.csv", newline="") as f:
        return {(r["row"], r["column"]): r for r in csv.DictReader(f)}


def _rows(path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


def test_table_4_the_human_references_stand_in_run(tmp_path, capsys):
    out = tmp_path / "t4"
    assert main(["reproduce", str(RECIPES / "pairwise_misses_table4_human_references.yaml"), "--stand-in", "--out",
                 str(out), "--wandb-mode", "disabled"]) == 0
    assert "4 rows computed" in capsys.readouterr().out
    figs = _figures(out)
    hs = _rows(out / "stand_in_data" / "hs.helpsteer.jsonl")
    share = icc1(hs, "helpfulness", "prompt")
    assert float(figs[("human-helpsteer", "share_all")]["ours"]) == pytest.approx(share)
    for col, r in (("corrected_single", 0.48), ("corrected_one_vs_rest", 0.62), ("corrected_kept_three", 0.78),
                   ("corrected_one_vs_rest_three", 0.83)):
        assert float(figs[("human-helpsteer", col)]["ours"]) == pytest.approx(share / r)
    assert figs[("human-helpsteer", "corrected_one_vs_rest")]["published"] == "0.42"
    # HelpSteer2's single-rater reliability: ICC(1) of the three annotators' ratings grouped by response
    ann = _rows(out / "stand_in_data" / "hs2_train.helpsteer2.disagreements.jsonl")
    long = pd.DataFrame([{"response": f"{r.prompt}|{r.response}", "value": v}
                         for r in ann.itertuples() for v in r.helpfulness])
    assert float(figs[("human-hs2-train", "rel_single")]["ours"]) == pytest.approx(icc1(long, "value", "response"))
    # Reddit: the between-post share of log vote counts
    shp = _rows(out / "stand_in_data" / "shp.shp.jsonl")
    votes = pd.concat([shp[["post_id", f"c_root_id_{s}", f"score_{s}"]].set_axis(["post", "comment", "score"], axis=1)
                       for s in "AB"]).drop_duplicates(["post", "comment"])
    votes["log_votes"] = np.log(votes["score"])
    assert float(figs[("human-shp", "vote_share")]["ours"]) == pytest.approx(icc1(votes, "log_votes", "post"))
    md = (out / "table.md").read_text()
    assert ("| Table 4, corrected_single, corrected_one_vs_rest, corrected_kept_three, "
            "corrected_one_vs_rest_three |") in md


def test_table_7_the_ratings_agreement_stand_in_run(tmp_path, capsys):
    out = tmp_path / "t7"
    assert main(["reproduce", str(RECIPES / "pairwise_misses_table7_rating_agreement.yaml"), "--stand-in", "--out",
                 str(out), "--wandb-mode", "disabled"]) == 0
    figs = _figures(out)
    hs2 = _rows(out / "stand_in_data" / "hs2.helpsteer2.jsonl")
    sib = hs2.groupby("prompt")["helpfulness"].transform(lambda x: (x.sum() - x) / (len(x) - 1))
    loo = np.corrcoef(hs2["helpfulness"].astype(float), sib.astype(float))[0, 1]
    assert float(figs[("human-hs2-validation", "loo")]["ours"]) == pytest.approx(loo)
    assert figs[("human-hs2-validation", "loo")]["published"] == "-0.08"
    assert figs[("human-shp", "halves_votes")]["ours"] != ""


def test_table_1_states_changes_between_two_columns():
    recipe = load_reproduction(RECIPES / "pairwise_misses_table1_helpsteer2_audit.yaml")
    core = [m.name for m in recipe.models[:6]]
    shares = {n: (0.30 + 0.05 * i, 0.35 + 0.05 * i, 0.31 + 0.04 * i) for i, n in enumerate(core)}
    shares["urm-llama-3.1-8b"] = (0.34, 0.61, 0.36)
    docs = {n: {"hs2": {"share": {"original": {"estimate": o, "ci95": [o - 0.1, o + 0.1]},
                                  "generic": {"estimate": g, "ci95": [g - 0.1, g + 0.1]},
                                  "log_length": {"estimate": ll, "ci95": [ll - 0.1, ll + 0.1]}}}}
            for n, (o, g, ll) in shares.items()}
    _, statements = build_cells(recipe, docs, None, {})
    by = {(s.figure.column, s.figure.minus_column, len(s.rows)): s for s in statements}
    assert by[("share_generic", "share_all", 1)].ours == pytest.approx([0.61 - 0.34])
    others = [g - o for n, (o, g, _) in shares.items() if n != "urm-llama-3.1-8b"]
    assert by[("share_generic", "share_all", 5)].ours == pytest.approx([max(np.abs(others))])
    assert by[("share_log_length", "share_all", 6)].ours == pytest.approx(
        [max(abs(ll - o) for o, _, ll in shares.values())])
    assert by[("share_log_length", "share_all", 6)].differences == pytest.approx(
        [0.05 - max(abs(ll - o) for o, _, ll in shares.values())])


def test_tables_25_26_the_matched_arms_stand_in_run(tmp_path, capsys, one_torch_thread):
    path = RECIPES / "pairwise_misses_tables25_26_matched_training.yaml"
    recipe = load_reproduction(path)
    assert len(recipe.models) == 60 and all(m.local for m in recipe.models)  # 6 arms x 2 sizes x 5 seeds
    seeds = [f"reg-0.6b-s{k}" for k in range(1, 6)]
    out = tmp_path / "t25"
    assert main(["reproduce", str(path), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", *seeds]) == 0
    md = (out / "table.md").read_text()
    margins = [json.loads((out / "rows" / r / "hs2" / "audit.json").read_text())["transplant"]["random"]["margin_sd"]
               ["estimate"] for r in seeds]
    sibling = [json.loads((out / "rows" / r / "hs" / "audit.json").read_text())["sibling_regression"]["sibling"]
               ["estimate"] for r in seeds]
    line = next(x for x in md.splitlines() if x.startswith("| Table 25, margin | Qwen3-0.6B, regression, seed 1"))
    assert f"| 2.30 to 2.70 | {min(margins):.2f} to {max(margins):.2f} |" in line
    line = next(x for x in md.splitlines() if x.startswith("| Table 26, sibling_hs | Qwen3-0.6B, regression, seed 1"))
    assert f"| mean 0.01 | mean {np.mean(sibling):.2f} |" in line
    assert "waits for bt-0.6b-s1" in md  # the Bradley-Terry arm's range needs its five seeds


def test_a_seed_the_sweep_trained_as_its_search_run_is_found_through_its_summary(tmp_path):
    from rmeval.reproduce.context import sweep_run_dir

    root = tmp_path / "outputs" / "helpsteer2_qwen3"
    search = root / "Qwen3-0.6B" / "regression" / "search" / "learning_rate=1e-05"
    search.mkdir(parents=True)
    (root / "Qwen3-0.6B" / "regression" / "seed2").mkdir()
    pd.DataFrame([{"arm": "regression", "model": "Qwen/Qwen3-0.6B", "seed": 1, "run_dir": str(search)},
                  {"arm": "regression", "model": "Qwen/Qwen3-0.6B", "seed": 2,
                   "run_dir": str(root / "Qwen3-0.6B" / "regression" / "seed2")}]).to_csv(root / "summary.csv",
                                                                                         index=False)
    assert sweep_run_dir(root / "Qwen3-0.6B" / "regression" / "seed1") == search
    assert sweep_run_dir(root / "Qwen3-0.6B" / "regression" / "seed2") == root / "Qwen3-0.6B" / "regression" / "seed2"
    missing = root / "Qwen3-1.7B" / "regression" / "seed1"  # not in the summary: as given
    assert sweep_run_dir(missing) == missing


def test_tables_5_12_13_14_27_read_the_eighteen_scorers_runs_on_one_out(tmp_path, capsys, one_torch_thread):
    out = tmp_path / "t9"
    rows = ["tulu-3-8b-rm", "armorm-llama3-8b", "dpa-mistral-7b", "human-hs2-validation"]
    names = ["pairwise_misses_table13_adjustments.yaml", "pairwise_misses_table12_calibrated_variance.yaml",
             "pairwise_misses_table14_prompt_means.yaml", "pairwise_misses_table27_prompt_length.yaml",
             "pairwise_misses_table5_judge_digits.yaml"]
    for name in names:
        assert load_reproduction(RECIPES / name).runs_of == "pairwise_misses_table9_eighteen_scorers.yaml"
        assert main(["reproduce", str(RECIPES / name), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                     "--only", *rows]) == 0
        if name == names[0]:
            md = (out / "table.md").read_text()
            removed = [json.loads((out / "rows" / r / "hs2" / "audit.json").read_text())["variance_explained"]
                       ["rating_residuals"]["log_length"]["between_removed"]["estimate"] for r in rows[:3]]
            line = next(x for x in md.splitlines() if x.startswith("| Table 13, length_between |"))
            assert f"| 0.270 to 0.330 | {min(removed):.3f} to {max(removed):.3f} |" in line
        if name == "pairwise_misses_table27_prompt_length.yaml":
            human = json.loads((out / "rows" / "human-hs2-validation" / "hs2" / "human.json").read_text())
            diff = human["attributes"]["helpfulness"]["longer_minus_shorter"]["single_turn"]
            cell = _figures(out)[("human-hs2-validation", "human_st")]
            assert float(cell["ours"]) == pytest.approx(diff["estimate"]) and cell["published"] == "-0.05"
    assert "0 rows computed, 4 cached" in capsys.readouterr().out  # the last four read the first one's rows
    assert _figures(out)[("judge-llama-3.1-70b", "top_is_5")]["missing"].startswith("not yet computed")


def test_table_28_the_paraphrase_shifts_stand_in_run(tmp_path, capsys, one_torch_thread):
    path = RECIPES / "pairwise_misses_table28_paraphrases.yaml"
    assert main(["reproduce", str(path), "--dry-run", "--out", str(tmp_path / "plan")]) == 0
    assert ("rmeval variants" in capsys.readouterr().out
            and "--task paraphrase" in (tmp_path / "plan" / "plan.md").read_text())
    out = tmp_path / "t28"
    assert main(["reproduce", str(path), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", "tulu-3-8b-rm"]) == 0
    s = pd.read_parquet(out / "rows" / "tulu-3-8b-rm" / "hs2" / "scores.parquet")
    o = s[s["condition"] == "original"][["prompt_id", "response_id", "score"]]
    p = s[s["condition"] == "paraphrase"].merge(o, on=["prompt_id", "response_id"], suffixes=("", "_o"))
    d, sd = p["score"] - p["score_o"], o["score"].std(ddof=1)
    figs = _figures(out)
    assert float(figs[("tulu-3-8b-rm", "abs_shift")]["ours"]) == pytest.approx(d.abs().mean() / sd)
    assert float(figs[("tulu-3-8b-rm", "signed_shift")]["ours"]) == pytest.approx(d.mean() / sd)


def test_table_29_scores_again_without_each_marker_and_sets_the_scorings_side_by_side(tmp_path, one_torch_thread):
    out = tmp_path / "t29"
    assert main(["reproduce", str(RECIPES / "pairwise_misses_table29_markers.yaml"), "--stand-in", "--out", str(out),
                 "--wandb-mode", "disabled", "--only", "tulu-3-8b-rm"]) == 0
    row = out / "rows" / "tulu-3-8b-rm" / "hs2"
    ref = pd.read_parquet(row / "scores.parquet")
    no_eos = pd.read_parquet(row / "variants" / "no_eos" / "scores.parquet")
    no_bos = pd.read_parquet(row / "variants" / "no_bos" / "scores.parquet")
    sv = json.loads((row / "audit.json").read_text())["scoring_variants"]
    # the stand-in's template ends every scored text with its EOS token and its tokenizer has no BOS
    assert sv["no_eos"]["markers_dropped"] == {"eos": len(ref)} and sv["no_bos"]["markers_dropped"] == {"bos": 0}
    assert not np.allclose(no_eos["score"], ref["score"]) and np.array_equal(no_bos["score"], ref["score"])

    def share(s):
        return icc1(s[s["condition"] == "original"], "score", "prompt_id")

    figs = _figures(out)
    assert float(figs[("tulu-3-8b-rm", "share")]["ours"]) == pytest.approx(share(ref))
    assert float(figs[("tulu-3-8b-rm", "share_no_eos")]["ours"]) == pytest.approx(share(no_eos))
    assert float(figs[("tulu-3-8b-rm", "share_change_no_eos")]["ours"]) == pytest.approx(share(no_eos) - share(ref))
    assert float(figs[("tulu-3-8b-rm", "share_change_no_bos")]["ours"]) == 0.0
    assert float(figs[("tulu-3-8b-rm", "margin_change_no_bos")]["ours"]) == 0.0
    own = json.loads((row / "variants" / "no_eos" / "audit.json").read_text())  # the variant's own audit
    main_margin = json.loads((row / "audit.json").read_text())["transplant"]["random"]["margin_sd"]["estimate"]
    assert float(figs[("tulu-3-8b-rm", "margin_change_no_eos")]["ours"]) == pytest.approx(
        own["transplant"]["random"]["margin_sd"]["estimate"] - main_margin)
    assert figs[("tulu-3-8b-rm", "margin_change_no_eos")]["published"] == "-0.57"


def test_table_22_reads_the_leaderboard_experiment_and_says_what_to_run_without_it(tmp_path, capsys):
    """The table's rows are the experiment's: a real run reads `rmeval leaderboard`'s leaderboard.json
    (planted here) where the settings say, and without it each cell names the command."""
    exp, out, path = tmp_path / "exp", tmp_path / "t22", tmp_path / "t22.yaml"
    path.write_text((RECIPES / "pairwise_misses_table22_leaderboard.yaml").read_text().replace(
        "out: outputs/experiments/leaderboard_helpsteer2", f"out: {exp}"))
    args = ["reproduce", str(path), "--out", str(out), "--wandb-mode", "disabled"]
    assert main(args) == 0
    cmd = f"rmeval leaderboard --config recipes/leaderboard_helpsteer2_study.yaml --out {exp}"
    assert f"no {exp / 'leaderboard.json'} yet: {cmd}" in (out / "table.md").read_text()
    capsys.readouterr()
    rms = ["skywork-reward-v2-qwen3-8b", "skywork-reward-llama-3.1-8b-v0.2", "llama-3.1-tulu-3-8b-rm"]

    def rm(k):
        return {"raw": {"n_assignments_differing_from_full_coverage": 3 * k,
                        "mean_tau_vs_judge": {"estimate": 0.5, "ci95": [0.2, 0.8]}},
                "centred_minus_raw_tau_vs_judge": {"estimate": 0.04 * k - 0.05, "ci95": [-0.2, 0.2]}}

    res = {"policies": ["a", "b", "c"], "anchor": "b",
           "judges": {"llama-3.1-70b-instruct": {}, "mistral-small-24b-instruct": {}},
           "reward_models": {r: {"llama-3.1-70b-instruct": rm(k), "mistral-small-24b-instruct": rm(k + 1)}
                             for k, r in enumerate(rms)},
           "judge_vs_human": {"llama-3.1-70b-instruct": {"estimate": 0.8, "ci95": [0.7, 0.9], "n_pairs": 250}},
           "judge_vs_judge": {"llama-3.1-70b-instruct vs mistral-small-24b-instruct":
                              {"kendall_tau": 1.0, "pairwise_agreement": 0.9, "n_pairs": 1400}}}
    exp.mkdir()
    (exp / "leaderboard.json").write_text(json.dumps(res))
    assert main(args) == 0
    figs = _figures(out)
    for k, r in enumerate(rms):
        assert float(figs[(r, "n_differ")]["ours"]) == 3 * k
        assert float(figs[(r, "tau_change")]["ours"]) == pytest.approx(0.04 * k - 0.05)
        assert float(figs[(r, "tau_change_second")]["ours"]) == pytest.approx(0.04 * (k + 1) - 0.05)
    assert float(figs[("judges", "vs_human")]["ours"]) == 0.8 and figs[("judges", "vs_human")]["published"] == "0.78"
    assert float(figs[("judges", "judges_pairs")]["ours"]) == 1400
    printed = capsys.readouterr().out
    assert "0 to 12 | 0 to 6" in printed  # the statement over the three reward models: 0, 3, 6 assignments
