"""Reward Auditor's PPO table without a GPU: the dry run writes the launch plan (a policy recipe for
``rmtrain policy`` whose reward models are the table's rows that ``rmeval serve-reward`` can serve,
each a local snapshot of its Hub id, and per reward model the commands), which rmtrain reads and
turns into OpenRLHF's PPO command against the served snapshot; the table reads finished policies'
win rates where they are, says why a cell is missing otherwise, and computes the Spearman of the
suitability risk with the win rate (checked against hand-derived ranks)."""

from __future__ import annotations

import json
import shutil

import pytest

from rmeval.cli import main
from rmeval.reproduce.recipe import load_reproduction
from tests.support import ROOT

PPO = ROOT / "recipes" / "reproduce" / "reward_auditor_ppo_winrates.yaml"
SERVABLE = ["skywork-gemma-2-27b", "skywork-gemma-2-27b-v0.2", "skywork-v2-qwen3-8b", "skywork-llama-3.1-8b",
            "llama-3-offsetbias-rm-8b"]  # one-label sequence classifiers (loader classifier, no head)
NOT_SERVABLE = ["starling-rm-34b", "urm-llama-3.1-8b", "llama3-8b-idrm", "internlm2-7b-reward", "grm-llama3-8b-distill"]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_dry_run_writes_the_launch_plan_and_rmtrain_reads_its_policy_recipe(tmp_path, capsys, no_network):
    from rmtrain.policy.config import load_policy_config

    out = tmp_path / "ppo"
    assert main(["reproduce", str(PPO), "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    plan = json.loads((out / "policy" / "launch_plan.json").read_text())
    by = {p["reward_model"]: p for p in plan["models"]}
    assert sorted(by) == sorted(SERVABLE + NOT_SERVABLE)
    for name in SERVABLE:
        snap = out / "policy" / "reward_models" / name
        hub = load_reproduction(PPO).model(name).hub_id
        assert by[name]["commands"] == [
            f"hf download {hub} --local-dir {snap}",
            f"rmtrain policy --config {out / 'policy' / 'policy_recipe.yaml'} --reward-model {name} "
            "--environment clean",
            f"rmtrain policy --config {out / 'policy' / 'policy_recipe.yaml'} --reward-model {name} "
            "--environment perturbed"]
        assert f"`hf download {hub}" in text
    assert "serves a one-label sequence classifier" in by["urm-llama-3.1-8b"]["not_reproducible"]
    assert by["llama3-8b-idrm"]["not_reproducible"].startswith("no public Hub id")
    assert plan["evaluate"] == (f"rmtrain policy-eval --config {out / 'policy' / 'policy_recipe.yaml'} "
                                "--out outputs/policy_llama3_8b/eval")
    cfg = load_policy_config(out / "policy" / "policy_recipe.yaml")  # rmtrain's own strict reader
    assert cfg.reward_model_names() == SERVABLE
    assert cfg.reward_model_path("skywork-llama-3.1-8b") == str(out / "policy" / "reward_models"
                                                                / "skywork-llama-3.1-8b")
    assert (cfg.evaluation.suitability["skywork-v2-qwen3-8b"]
            == f"{out / 'panel' / 'chat' / 'suitability.json'}#skywork-v2-qwen3-8b")
    assert cfg.training.algorithm == "ppo" and cfg.evaluation.judge == "openai:gpt-5"
    assert not (out / "rows").exists()  # nothing scored, nothing downloaded


def test_the_policy_recipe_reads_its_prompts_where_the_data_source_is(tmp_path, capsys, no_network):
    from rmtrain.policy.config import load_policy_config

    out, rmb = tmp_path / "ppo", tmp_path / "elsewhere" / "rm-bench"
    assert main(["reproduce", str(PPO), "--dry-run", "--out", str(out), "--data-source", f"rm_bench={rmb}"]) == 0
    text = capsys.readouterr().out
    cfg = load_policy_config(out / "policy" / "policy_recipe.yaml")
    assert cfg.data == {"name": "rm_bench", "path": f"{rmb}/chat_filtered.json"}  # not ../RM-Bench
    assert (f"policy.data: {rmb}/chat_filtered.json not found; fetch it: "
            "git clone https://github.com/THU-KEG/RM-Bench") in text
    rmb.mkdir(parents=True)
    (rmb / "chat_filtered.json").write_text("[]")
    assert main(["reproduce", str(PPO), "--dry-run", "--out", str(out), "--data-source", f"rm_bench={rmb}"]) == 0
    assert "policy.data:" not in capsys.readouterr().out


def test_rmtrain_turns_a_planned_policy_into_openrlhf_ppo_against_the_served_snapshot(tmp_path, no_network):
    """The plan's `rmtrain policy` step as rmtrain runs it (no launch): a tiny policy in place of the
    8B SFT model and a tiny one-label classifier in place of the snapshot; the PPO command's flags are
    the ones tests/rmtrain/test_policy_openrlhf_parser.py checks against OpenRLHF's parser."""
    from rmeval.reproduce.recipe import ModelSpec
    from rmeval.reproduce.standins import stand_in_model
    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.openrlhf import OPENRLHF_FLAGS
    from rmtrain.policy.tiny import build_tiny_policy
    from rmtrain.policy.train import train_policy
    from tests.support import TINY_SET, set_texts

    out = tmp_path / "ppo"
    assert main(["reproduce", str(PPO), "--dry-run", "--out", str(out)]) == 0
    snap = out / "policy" / "reward_models" / "skywork-llama-3.1-8b"
    built = stand_in_model(ModelSpec(name="rm", hub_id="o/rm", params_b=1), tmp_path / "stand_ins")
    shutil.copytree(built["path"], snap)  # what `hf download` would put there
    cfg = load_policy_config(out / "policy" / "policy_recipe.yaml", {
        "environment": "perturbed", "output_dir": str(tmp_path / "run"), "heldout_prompts": 5,
        "data": {"name": "simulated", "n_prompts": 20, "responses_per_prompt": 2, "seed": 0}})
    cfg.policy.name_or_path = str(build_tiny_policy(set_texts(TINY_SET), tmp_path / "policy"))
    cfg.reward_model = cfg.reward_model_path("skywork-llama-3.1-8b")
    plan = train_policy(cfg)
    assert plan["reward_server_command"][:4] == ["rmeval", "serve-reward", "--checkpoint", str(snap.resolve())]
    assert all(a in OPENRLHF_FLAGS for a in plan["train_command"] if a.startswith("--"))
    assert (tmp_path / "run" / "openrlhf" / "train_ppo.sh").is_file()


def _panel(path, risks):
    def perts(i):
        return {"ST": {"group": "stylized", "cohens_d": 0.1, "rejected": False, "accuracy_change": -0.01 * i}}

    doc = {"models": {n: {"perturbations": perts(i), "suitability_risk": r} for i, (n, r) in enumerate(risks.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_the_table_reads_finished_win_rates_says_why_others_are_missing_and_ranks_them(tmp_path):
    from rmeval.reproduce.context import Context
    from rmeval.reproduce.policy import policy_table
    from rmeval.reproduce.table import build_cells, table_rows

    recipe = load_reproduction(PPO)
    recipe.policy.winrates = str(tmp_path / "winrates")
    ctx = Context(recipe, tmp_path / "out")
    risks = {"skywork-gemma-2-27b": 0.0, "skywork-gemma-2-27b-v0.2": 0.5, "skywork-v2-qwen3-8b": 1.0,
             "skywork-llama-3.1-8b": 2.0, "llama-3-offsetbias-rm-8b": 3.0, "urm-llama-3.1-8b": 0.7}
    _panel(ctx.out / "panel" / "chat" / "suitability.json", risks)
    # four finished evaluations (offsetbias has none yet); urm cannot be served
    for name, wr in {"skywork-gemma-2-27b": 0.5, "skywork-gemma-2-27b-v0.2": 0.4, "skywork-v2-qwen3-8b": 0.45,
                     "skywork-llama-3.1-8b": 0.2, "urm-llama-3.1-8b": 0.9}.items():
        (tmp_path / "winrates" / name).mkdir(parents=True)
        (tmp_path / "winrates" / name / "winrate.json").write_text(json.dumps({"win_rate": wr, "ci95": [0.0, 1.0]}))
    docs = {n: {"chat": {}} for n in risks}
    panel = policy_table(ctx, docs, {"chat": {}})
    # ranks of risk 1 2 3 4 against win rate 4 2 3 1: d = -3 0 0 3, rho = 1 - 6 * 18 / (4 * 15) = -0.8
    assert panel["spearman"]["suitability_risk"]["spearman"] == pytest.approx(-0.8)
    assert panel["spearman"]["n_models"] == 4 and panel["spearman_n"] == 4
    reasons = {f"{r}|{c}": why for r, c, why in panel["cell_reasons"]}
    cells, _ = build_cells(recipe, docs, panel, {"llama3-8b-idrm": "not reproducible: no public Hub id", **reasons})
    assert cells[("skywork-llama-3.1-8b", "win_rate")].ours.estimate == 0.2
    assert cells[("urm-llama-3.1-8b", "win_rate")].missing.startswith("not reproducible: rmeval serve-reward serves")
    assert cells[("urm-llama-3.1-8b", "risk")].ours.estimate == 0.7  # its risk still shown
    off = cells[("llama-3-offsetbias-rm-8b", "win_rate")].missing
    assert off.startswith(f"no {tmp_path / 'winrates' / 'llama-3-offsetbias-rm-8b' / 'winrate.json'} yet")
    assert "--reward-model llama-3-offsetbias-rm-8b --environment perturbed" in off and "rmtrain policy-eval" in off
    header, rows = table_rows(recipe, cells)
    spearman = next(r for r in rows if r[0] == "Across the reward models with a win rate")
    assert spearman[header.index("Spearman ρ (risk, win rate): ours")] == "-0.800"
    assert spearman[header.index("Spearman ρ (risk, win rate): published")] == "-0.881"
