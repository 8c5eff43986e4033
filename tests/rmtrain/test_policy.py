"""Policy training against a reward model (rmtrain.policy), the reward server and the win rate.

Material, all built here: a tiny causal policy (rmtrain.policy.tiny, tokenizer trained on the
simulated set) and a *planted* reward model, a real one-label Qwen2ForSequenceClassification
checkpoint whose weights are set by hand so that its score is exactly +c or -c (c = sqrt(32), the
hidden size's root) by a known token property: the response's last token lies on the positive side
of a fixed hyperplane in the policy's embedding space (30% of the vocabulary). Its tokenizer has no
chat template, so the scorer's plain layout puts the response's last token last. The task is
learnable by construction (one direction of the policy's hidden state raises every good token), and
the runs are set so that learning it does not hang on the machine's arithmetic: one-token answers
(the rewarded token is the sampled one), sampled from the whole distribution (temperature 1, top-p
1: no good token is ever cut off), and a reward with no spread within a class. With a spread (each
token's own score magnitude, as the scoring tests' graded reward model has) GRPO's group-scaled
advantages turn the small differences between bad tokens into full-size ones and the policy
collapsed onto the least bad token, and with eight-token answers at temperature 0.8 and top-p 0.9
the reward rose in about half of the seeds 1-6, for GRPO and RLOO alike (it failed at the suite's
own seed on this machine); as set here both rose by 0.66-1.0 of the range 2c and ended with
0.97-1.0 of their answers good, in each of seeds 1-8. policy-eval's win rate is tested on
*planted* policy runs (their greedy answers in the response cache), not on trained ones: two tiny
trained policies may answer alike on one CPU and not on another, so a win rate of theirs is an
accident of the machine's arithmetic."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from rmcore.errors import ConfigError
from rmtrain.policy.config import load_policy_config, policy_config_from_dict
from tests.support import ROOT, TINY_SET, set_texts

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DATA = {"name": "simulated", "n_prompts": 40, "responses_per_prompt": 2, "seed": 0}


def _texts() -> list[str]:
    return set_texts(TINY_SET)


def planted_reward_model(policy: Path, out: Path, spread: float = 0.3) -> tuple[Path, np.ndarray]:
    """One-layer Qwen2 classifier: attention and MLP write nothing, so the last position's hidden
    state is its token embedding; coordinate 0 of that embedding is +1 for good tokens and -1
    otherwise, and the score head reads coordinate 0 (after the final RMSNorm). The other
    coordinates are N(0, ``spread``^2): through the RMSNorm they give each token its own score
    magnitude; with ``spread`` 0 the score is exactly +-sqrt(hidden size), one value per class."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmcore.models.tiny import save_tiny, tiny_model

    tok = AutoTokenizer.from_pretrained(policy)
    tok.chat_template = None
    emb = AutoModelForCausalLM.from_pretrained(policy).get_input_embeddings().weight.detach()
    v = torch.randn(emb.shape[1], generator=torch.Generator().manual_seed(1))
    proj = emb @ v
    good = (proj > proj.quantile(0.7)).float()
    h = 32
    rm = tiny_model(tok, "qwen2", head="classifier", hidden_size=h, intermediate_size=8, num_hidden_layers=1,
                    max_position_embeddings=1024, num_labels=1)
    with torch.no_grad():
        e = torch.randn(len(tok), h) * spread
        e[:, 0] = good * 2 - 1
        rm.model.embed_tokens.weight.copy_(e)
        layer = rm.model.layers[0]
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
        rm.score.weight.zero_()
        rm.score.weight[0, 0] = 1.0
    return save_tiny(out, rm, tok), good.numpy().astype(bool)


@pytest.fixture(scope="module")
def models(built_once: Any) -> dict[str, Any]:
    """The tiny policy and the two planted reward models, built once for the run (tests/conftest.py)."""
    def build(root: Path) -> None:
        from rmtrain.policy.tiny import build_tiny_policy

        torch.set_num_threads(1)
        policy = build_tiny_policy(_texts(), root / "policy")
        # trained against: exactly two score values; compared between scoring paths: one score per token
        rm, good = planted_reward_model(policy, root / "rm", spread=0.0)
        (rm / "train_summary.json").write_text(json.dumps({"arm": "bradley_terry", "seed": 3}))
        planted_reward_model(policy, root / "rm_graded")
        np.save(root / "good.npy", good)

    root = built_once("policy_models", build)
    return {"policy": root / "policy", "rm": root / "rm", "rm_graded": root / "rm_graded",
            "good": np.load(root / "good.npy"), "root": root}


def make_cfg(models: dict[str, Any], out: Path, **over: Any) -> Any:
    raw = {"policy": {"name_or_path": str(models["policy"]), "lora": {"r": 8, "alpha": 16, "dropout": 0.0}},
           "data": DATA, "heldout_prompts": 8, "reward_model": str(models["rm"]), "output_dir": str(out),
           "training": {"algorithm": "grpo", "learning_rate": 5e-2, "max_steps": 24, "per_device_batch_size": 16,
                        "num_generations": 4, "max_completion_length": 1, "temperature": 1.0, "top_p": 1.0,
                        "use_cpu": True, "beta": 0.01, "reward_max_length": 256, "gradient_checkpointing": False},
           "evaluation": {"n_prompts": 6, "max_new_tokens": 6, "n_boot": 500},
           "wandb": {"mode": "disabled"}}
    return policy_config_from_dict(raw, overrides=over)


RUN_STEPS = {("grpo", "clean"): 24, ("grpo", "perturbed"): 4, ("rloo", "perturbed"): 24, ("rloo", "clean"): 4}


@pytest.fixture(scope="module")
def runs(models: dict[str, Any], built_once: Any) -> dict[str, Path]:
    """grpo and rloo, each in both environments: one long enough to learn, one short. Built once
    for the run (tests/conftest.py: ~13 s at one thread); its first user, test_mean_reward_rises
    [grpo-clean], is marked slow so that one worker builds it at the start and the other finds it
    built."""
    def build(root: Path) -> None:
        from rmtrain.policy.train import train_policy

        torch.set_num_threads(1)  # module fixtures run before the function-scoped one_torch_thread
        for (algo, env), steps in RUN_STEPS.items():
            mode = "offline" if (algo, env) == ("rloo", "perturbed") else "disabled"
            train_policy(make_cfg(models, root / f"{algo}-{env}", **{
                "training.algorithm": algo, "training.max_steps": steps, "environment": env, "wandb.mode": mode}))

    root = built_once("policy_runs", build)
    return {(algo, env): root / f"{algo}-{env}" for algo, env in RUN_STEPS}


@pytest.mark.parametrize("algo,env", [pytest.param("grpo", "clean", marks=pytest.mark.slow), ("rloo", "perturbed")])
def test_mean_reward_rises(runs: dict, algo: str, env: str) -> None:
    s = json.loads((runs[(algo, env)] / "policy_summary.json").read_text())
    assert s["algorithm"] == algo and s["environment"] == env and s["steps"] == 24
    curve = s["reward_batch_means"]
    assert s["reward_mean_first"] == pytest.approx(np.mean(curve[: len(curve) // 10]))
    assert s["reward_mean_last"] == pytest.approx(np.mean(curve[-(len(curve) // 10):]))
    # every reward is +c or -c, so a batch mean is c (2 k / 16 - 1) for the k good answers of its 16
    c = np.sqrt(32)
    k = (np.asarray(curve) / c + 1) * 16 / 2
    np.testing.assert_allclose(k, np.round(k), atol=1e-3)
    # the share of good answers (a third or less at the start) went up by more than a quarter (the old
    # bound, a rise of 1.0 on a reward of about +-2.9, was a sixth) and ended above three quarters;
    # seeds 1-8 gave rises of 0.66-1.0 and last shares of 0.97-1.0
    assert (s["reward_mean_last"] - s["reward_mean_first"]) / (2 * c) > 0.25
    assert (s["reward_mean_last"] / c + 1) / 2 > 0.75
    assert s["kl_last"] is not None and s["kl_last"] > 0


@pytest.mark.parametrize("algo,env", [("grpo", "perturbed"), ("rloo", "clean")])
def test_other_environment_runs(runs: dict, algo: str, env: str) -> None:
    s = json.loads((runs[(algo, env)] / "policy_summary.json").read_text())
    assert s["steps"] == 4 and s["environment"] == env and s["n_rewarded"] == 4 * 16
    for key in ("reward_model", "reward_mean_first", "reward_mean_last", "kl_last"):
        assert key in s


def test_adapter_loads_with_peft_and_reward_matches_scorer(runs: dict, models: dict) -> None:
    """The saved policy is a LoRA adapter for the base model; its greedy samples score the same
    through the trl reward function as through rmeval's scorer."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from rmtrain.policy.reward import ScorerReward

    base = AutoModelForCausalLM.from_pretrained(models["policy"])
    model = PeftModel.from_pretrained(base, str(runs[("grpo", "clean")] / "adapter"))
    assert any("lora_" in n for n, _ in model.named_parameters())
    msgs = [{"role": "user", "content": "What should I know about tides?"}]
    comps = ["the sea rises", "and falls"]
    fn = ScorerReward(str(models["rm_graded"]), max_length=256)
    ref = SeqClassifierScorer(str(models["rm_graded"]), max_length=256).score([(msgs, c) for c in comps])
    got = fn(prompts=[msgs, msgs], completions=[[{"role": "assistant", "content": c}] for c in comps],
             reward_messages=[json.dumps(msgs)] * 2)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_wandb_logs_reward_kl_length_environment_and_tags(runs: dict) -> None:
    from tests.support import read_run

    run = read_run(runs[("rloo", "perturbed")] / "wandb")
    assert {"environment:perturbed", "algorithm:rloo", "rm_arm:bradley_terry", "rm_seed:3"} <= set(run["tags"])
    keys = set().union(*(h.keys() for h in run["history"]))
    assert {"policy/reward_mean", "policy/reward_sd", "policy/kl", "policy/response_length",
            "policy/environment"} <= keys


def test_perturbed_environment_files(models: dict, tmp_path: Path) -> None:
    from rmeval.perturbations import RESPONSE_PERTURBATIONS, STYLIZED_CODES, item_seed, perturb_prompt
    from rmtrain.policy.environment import build_environment, read_rows

    raw = {"policy": str(models["policy"]), "data": {**DATA, "n_prompts": 63}, "heldout_prompts": 3,
           "environments": {"controlled_fraction": 0.4, "stylized_fraction": 0.6, "seed": 5}}
    counts = {}
    for env in ("clean", "perturbed"):
        counts[env] = build_environment(policy_config_from_dict(raw, overrides={"environment": env}), tmp_path)
    clean, pert = read_rows(tmp_path / "clean.jsonl"), read_rows(tmp_path / "perturbed.jsonl")
    assert [r["prompt_id"] for r in clean] == [r["prompt_id"] for r in pert] and len(pert) == 60
    assert all(r["perturbation"] is None and r["style"] is None for r in clean)
    assert all(r["messages"] == r["reward_messages"] for r in clean)
    n_pert = [r["perturbation"] for r in pert if r["perturbation"]]
    n_style = [r["style"] for r in pert if r["style"]]
    assert len(n_pert) == 24 and len(n_style) == 36  # 0.4 and 0.6 of 60
    assert sorted(set(n_pert)) == sorted(["EF", "PH", "IU", "IW", "CN"])
    assert all(n_pert.count(c) in (4, 5) for c in set(n_pert))  # each code an equal share (+-1)
    assert all(n_style.count(c) in (7, 8) for c in STYLIZED_CODES)
    by_id = {r["prompt_id"]: r for r in clean}
    for r in pert:
        orig = by_id[r["prompt_id"]]["messages"][-1]["content"]
        seen_by_rm = r["reward_messages"][-1]["content"]
        if r["perturbation"]:
            assert seen_by_rm == perturb_prompt(r["perturbation"], orig,
                                                item_seed(5, r["perturbation"], r["prompt_id"]))
        else:
            assert seen_by_rm == orig
        if r["style"]:  # the policy sees the style instruction, the reward model does not
            instr = RESPONSE_PERTURBATIONS[r["style"]].rollout.format(language="Chinese")
            assert r["messages"][-1]["content"] == f"{seen_by_rm}\n\n{instr}"
        else:
            assert r["messages"] == r["reward_messages"]
    assert counts["perturbed"]["n_perturbed"] == 24 and counts["perturbed"]["n_styled"] == 36
    assert len(read_rows(tmp_path / "heldout.jsonl")) == 3


def test_reward_server_http_equals_rmeval_scoring(models: dict) -> None:
    """OpenRLHF's request (query = decoded prompt + response with special tokens, prompts, labels)
    through a real HTTP request gives the scores rmeval gives the same texts."""
    from transformers import AutoTokenizer

    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from rmeval.scoring.server import RewardService, make_server

    scorer = SeqClassifierScorer(str(models["rm_graded"]), max_length=256)
    server = make_server(RewardService(scorer), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/get_reward"
    try:
        tok = AutoTokenizer.from_pretrained(models["policy"])
        convs = [[{"role": "user", "content": "How do tides work?"}],
                 [{"role": "user", "content": "Plan a trip."}, {"role": "assistant", "content": "Where to?"},
                  {"role": "user", "content": "Rome"}]]
        responses = ["The moon pulls the sea.", "Visit the Forum first."]
        shown = [convs[0], [*convs[1][:-1], {"role": "user", "content": "Rome\n\nWrite your answer in Chinese."}]]
        prompts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in shown]
        queries = [p + r + tok.eos_token for p, r in zip(prompts, responses)]
        body = {"query": queries, "prompts": prompts, "labels": [json.dumps(c) for c in convs]}
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        got = json.loads(urllib.request.urlopen(req, timeout=30).read())
        ref = SeqClassifierScorer(str(models["rm_graded"]), max_length=256).score(list(zip(convs, responses)))
        np.testing.assert_allclose(got["rewards"], ref, rtol=1e-6)
        bad = {"query": ["something else"], "prompts": ["prompt"], "labels": [""]}
        req = urllib.request.Request(url, data=json.dumps(bad).encode(), headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        assert e.value.code == 400 and "does not start with its prompt" in e.value.read().decode()
    finally:
        server.shutdown()
        server.server_close()


def test_openrlhf_plan_for_8b_recipe(models: dict, tmp_path: Path) -> None:
    from rmtrain.policy.openrlhf import OPENRLHF_FLAGS
    from rmtrain.policy.train import train_policy

    cfg = load_policy_config(ROOT / "recipes" / "policy_llama3_8b_ppo.yaml", {
        "environment": "perturbed", "output_dir": str(tmp_path / "rm01" / "perturbed"),
        "data": {**DATA, "n_prompts": 30}, "heldout_prompts": 5})
    assert len(cfg.reward_models) == 10
    hub_policy = cfg.policy.name_or_path
    cfg.policy.name_or_path = str(models["policy"])  # the Hub is unreachable here: the tiny chat policy
    cfg.reward_model = str(models["rm"])
    plan = train_policy(cfg)
    cmd = plan["train_command"]
    assert cmd[:3] == ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    flags = {}
    for i, a in enumerate(cmd):
        if a.startswith("--"):
            assert a in OPENRLHF_FLAGS
            flags[a] = cmd[i + 1] if i + 1 < len(cmd) and not cmd[i + 1].startswith("--") else True
    study = {"--actor.adam.lr": 5e-7, "--critic.adam.lr": 1.5e-6, "--rollout.n_samples_per_prompt": 16,
             "--rollout.temperature": 0.8, "--rollout.top_p": 0.9, "--actor.max_norm": 0.8,
             "--critic.max_norm": 0.8, "--algo.advantage.gamma": 0.999, "--train.max_epochs": 1}
    for flag, value in study.items():
        assert float(flags[flag]) == value, flag
    assert flags["--algo.advantage.estimator"] == "gae" and flags["--data.apply_chat_template"] is True
    assert flags["--reward.remote_url"] == "http://127.0.0.1:5000/get_reward"
    assert flags["--data.label_key"] == "label" and flags["--data.input_key"] == "messages"
    assert int(flags["--ds.lora.rank"]) == 64
    assert plan["not_supported"]["repetition_penalty"]["value"] == 1.1
    assert plan["reward_server_command"][:2] == ["rmeval", "serve-reward"]
    d = tmp_path / "rm01" / "perturbed"
    rows = [json.loads(x) for x in (d / "openrlhf" / "prompts.jsonl").read_text().splitlines()]
    env = [json.loads(x) for x in (d / "environment" / "perturbed.jsonl").read_text().splitlines()]
    assert len(rows) == len(env) == 25 == plan["n_prompts"]
    for r, e in zip(rows, env):
        assert r["messages"] == e["messages"] and json.loads(r["label"]) == e["reward_messages"]
    script = (d / "openrlhf" / "train_ppo.sh").read_text()
    assert "rmeval serve-reward" in script and "openrlhf.cli.train_ppo_ray" in script
    assert hub_policy == "OpenRLHF/Llama-3-8b-sft-mixture"


def _planted_suitability(path: Path, ds: dict[str, float], unsuitable: set[str], acc: dict[str, float]) -> Path:
    perts = {c: {"group": "controlled", "n": 50, "cohens_d": d, "rejected": c in unsuitable,
                 "unsuitable": c in unsuitable, "accuracy_change": acc[c]} for c, d in ds.items()}
    path.mkdir(parents=True, exist_ok=True)
    (path / "suitability.json").write_text(json.dumps({"perturbations": perts}))
    return path


class LongerIsBetter:
    """A content-blind rule judge: the longer response wins, equal lengths tie."""

    def judge(self, items: list[tuple[str, str, str]]) -> list[str | None]:
        return ["A" if len(a) > len(b) else "B" if len(b) > len(a) else "C" for _, a, b in items]


# Planted greedy answers of two policies to the six held-out prompts, in the held-out order. Under
# LongerIsBetter, B is longer on prompts 1-4, A on prompt 5, and prompt 6's answers differ in content
# but not in length (a tie): B over A wins 4, loses 1, ties 1, win rate (4 + 1/2) / 6 = 0.75.
PLANTED = {
    "A": ["The tide rises.", "Rome.", "Use a list.", "It depends.",
          "Boil the water first, then add the pasta and stir it often.", "Yes, it is."],
    "B": ["The moon pulls the sea, so the tide rises twice a day.", "Start at the Forum, then walk to Trajan's market.",
          "Use a list when order matters and a set when it does not.",
          "It depends on the soil and on how much sun it gets.", "Boil it.", "No, it was."],
}


def planted_policy_run(cfg: Any, d: Path, policy: Path, answers: list[str]) -> Path:
    """A policy run directory as `rmtrain policy` leaves it, as far as policy-eval reads it: the
    held-out prompts (written by build_environment), policy_summary.json, and the greedy answers in
    the response cache, so no policy is loaded. The adapter path names nothing: were the cache
    ignored, generation would fail rather than produce texts of its own."""
    from rmtrain.policy.environment import build_environment, read_rows

    build_environment(cfg, d / "environment")
    rows = read_rows(d / "environment" / "heldout.jsonl")[: cfg.evaluation.n_prompts]
    assert len(rows) == len(answers)
    (d / "policy_summary.json").write_text(json.dumps({"policy": str(policy), "adapter": str(d / "no-adapter"),
                                                      "reward_model": f"planted-rm-{d.name}"}))
    (d / "eval_responses.jsonl").write_text("".join(json.dumps({"prompt_id": r["prompt_id"], "response": t}) + "\n"
                                                    for r, t in zip(rows, answers)))
    return d


def test_policy_eval_win_rate_and_spearman(models: dict, tmp_path: Path) -> None:
    """Two planted policies (their greedy answers planted in the response cache) judged in both
    orders, by a rule judge whose verdicts are known and by a tiny local LM (hf backend); three
    reward models get the pair in different roles: rmA (clean A, perturbed B), rmB (swapped) and
    rmC (A against itself). The rule judge's win rates are known by hand, so the Spearman
    correlations against the planted suitability are too; pingouin and a scipy bootstrap are the
    references. Of the tiny LM judge only what holds for any deterministic judge is asserted."""
    import pingouin as pg
    from scipy import stats

    from rmtrain.policy.evaluate import evaluate_all

    cfg0 = make_cfg(models, tmp_path / "unused")
    pol = {k: planted_policy_run(cfg0, tmp_path / "runs" / k, models["policy"], v) for k, v in PLANTED.items()}
    roles = {"rmA": ("A", "B"), "rmB": ("B", "A"), "rmC": ("A", "A")}
    root = tmp_path / "policies"
    suit = {}
    ds = [{"EF": 0.1, "PH": 0.5}, {"EF": 0.9, "PH": 0.2}, {"EF": 0.3, "PH": 0.05}]
    uns = [{"PH"}, {"EF", "PH"}, set()]
    acc = [{"EF": -0.02, "PH": 0.04}, {"EF": -0.10, "PH": 0.0}, {"EF": 0.01, "PH": 0.01}]
    for i, (name, (clean, pert)) in enumerate(roles.items()):
        (root / name).mkdir(parents=True)
        (root / name / "clean").symlink_to(pol[clean])
        (root / name / "perturbed").symlink_to(pol[pert])
        suit[name] = str(_planted_suitability(tmp_path / "suit" / name, ds[i], uns[i], acc[i]))
    cfg = make_cfg(models, tmp_path / "unused", **{
        "output_root": str(root), "reward_models": {n: "x" for n in roles}, "evaluation.suitability": suit,
        "evaluation.judge": f"hf:{models['policy']}", "evaluation.n_boot": 4000})
    # the tiny LM judge from evaluation.judge: its verdicts are incidental, but any deterministic judge
    # sees rmB's orders as rmA's swapped, and identical answers (rmC) in both orders alike
    out_hf = tmp_path / "eval_hf"
    hf_table = evaluate_all(cfg, out_hf)
    assert hf_table["n_models"] == 3
    hf = {n: json.loads((out_hf / n / "winrate.json").read_text()) for n in roles}
    assert all(w["n_prompts"] == 6 and w["wins"] + w["losses"] + w["ties"] == 6 for w in hf.values())
    assert (hf["rmA"]["wins"], hf["rmA"]["losses"]) == (hf["rmB"]["losses"], hf["rmB"]["wins"])
    assert hf["rmA"]["win_rate"] == pytest.approx(1 - hf["rmB"]["win_rate"])
    assert hf["rmC"]["ties"] == 6 and hf["rmC"]["win_rate"] == 0.5

    out = tmp_path / "eval"
    table = evaluate_all(cfg, out, judge=LongerIsBetter())
    wrs, counts = [], []
    for name, (clean, pert) in roles.items():
        wr = json.loads((out / name / "winrate.json").read_text())
        js = [json.loads(x) for x in (out / name / "judgments.jsonl").read_text().splitlines()]
        assert len(js) == wr["n_prompts"] == 6
        assert [j["clean"] for j in js] == PLANTED[clean] and [j["perturbed"] for j in js] == PLANTED[pert]
        wins = sum(j["verdict_perturbed_first"] == "A" and j["verdict_perturbed_second"] == "B" for j in js)
        losses = sum(j["verdict_perturbed_first"] == "B" and j["verdict_perturbed_second"] == "A" for j in js)
        assert (wr["wins"], wr["losses"], wr["ties"]) == (wins, losses, 6 - wins - losses)
        assert wr["win_rate"] == pytest.approx((wins + 0.5 * (6 - wins - losses)) / 6)
        assert wr["ci95"][0] <= wr["win_rate"] <= wr["ci95"][1]
        assert wr["reward_model"] == f"planted-rm-{pert}"
        # percentile bootstrap over prompts of the per-prompt outcomes (1 win, 0 loss, 1/2 tie): scipy's,
        # on its own draws, agrees within one step of the 1/12 grid the resampled means lie on
        o = [1.0] * wins + [0.0] * losses + [0.5] * (6 - wins - losses)
        ref = stats.bootstrap((o,), np.mean, method="percentile", n_resamples=20000, random_state=0)
        ci = ref.confidence_interval
        assert wr["ci95"] == pytest.approx([ci.low, ci.high], abs=1 / 12 + 1e-9)
        wrs.append(wr["win_rate"])
        counts.append((wins, losses))
    # by hand from PLANTED: B over A wins 4, loses 1, ties 1; A over B the reverse; A over A all ties
    assert counts == [(4, 1), (1, 4), (0, 0)] and wrs == pytest.approx([0.75, 0.25, 0.5])
    assert wrs[0] == pytest.approx(1 - wrs[1]) and wrs[2] == 0.5 and wrs[0] != 0.5
    # every resample of six ties is a tie: a degenerate interval; rmA's is not
    assert json.loads((out / "rmC" / "winrate.json").read_text())["ci95"] == [0.5, 0.5]
    assert json.loads((out / "rmA" / "winrate.json").read_text())["ci95"][0] < 0.75
    risk = [0.5, 1.1, 0.0]  # sum of d over the unsuitable perturbations, by hand
    accs = [0.01, -0.05, 0.01]
    assert [m["suitability_risk"] for m in table["models"]] == pytest.approx(risk)
    assert [m["accuracy_change"] for m in table["models"]] == pytest.approx(accs)
    # ranks by hand: risk 2 3 1 against win rate 3 1 2, d = -1 2 -1, rho = 1 - 6*6/(3*8) = -0.5;
    # accuracy 2.5 1 2.5 (a tie) against 3 1 2: Pearson of the ranks, 1.5 / sqrt(1.5 * 2) = sqrt(3)/2
    for key, x, rho in (("suitability_risk", risk, -0.5), ("accuracy_change", accs, np.sqrt(3) / 2)):
        ref = pg.corr(x, wrs, method="spearman")
        pcol = "p_val" if "p_val" in ref else "p-val"
        assert table[key]["spearman"] == pytest.approx(float(ref["r"].iloc[0]))
        assert table[key]["spearman"] == pytest.approx(rho)
        assert table[key]["p_value"] == pytest.approx(float(ref[pcol].iloc[0]))
    assert (out / "spearman.png").stat().st_size > 0 and "suitability risk" in (out / "spearman.md").read_text()


def test_spearman_against_hand_ranks() -> None:
    from rmeval.experiments.winrate import spearman_table

    rows = [{"name": f"m{i}", "suitability_risk": r, "accuracy_change": a, "win_rate": w}
            for i, (r, a, w) in enumerate([(0.0, 0.02, 0.55), (0.4, -0.01, 0.50), (1.2, 0.03, 0.41),
                                           (2.0, -0.04, 0.30), (0.9, 0.00, 0.47)])]
    t = spearman_table(rows)
    # risk ranks 1 2 4 5 3, win-rate ranks 5 4 2 1 3: d = -4 -2 2 4 0 -> rho = 1 - 6*40/(5*24) = -1
    assert t["suitability_risk"]["spearman"] == pytest.approx(-1.0)
    # accuracy ranks 4 2 5 1 3 vs 5 4 2 1 3: d = -1 -2 3 0 0 -> rho = 1 - 6*14/120 = 0.3
    assert t["accuracy_change"]["spearman"] == pytest.approx(0.3)
    with pytest.raises(ConfigError, match="at least 3"):
        spearman_table(rows[:2])


def test_win_rate_counts_orders_and_ties() -> None:
    from rmeval.experiments.winrate import parse_verdict, win_rate

    first = ["A", "A", "B", "C", None, "A"]
    second = ["B", "A", "A", "B", "B", "C"]
    r = win_rate(first, second, n_boot=200)
    # prompt 1 win, 2 position-bias tie, 3 loss, 4-6 ties
    assert (r["wins"], r["losses"], r["ties"]) == (1, 1, 4) and r["win_rate"] == pytest.approx(0.5)
    assert r["order_disagreements"] == 1 and r["unreadable_verdicts"] == 1
    assert parse_verdict("analysis ... [[B]] then final [[ A ]]") == "A" and parse_verdict("none") is None


def test_bad_inputs(models: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from rmeval.scoring.server import check_reward_checkpoint
    from rmtrain.cli import main
    from rmtrain.policy.train import train_policy

    # a two-label classifier is not a reward model
    cfg = AutoConfig.from_pretrained(models["rm"])
    cfg.num_labels = 2
    two = tmp_path / "two_label"
    AutoModelForSequenceClassification.from_config(cfg).save_pretrained(two)
    with pytest.raises(ConfigError, match=r"not a one-label sequence classifier.*num_labels=2.*rmtrain train"):
        check_reward_checkpoint(two)
    with pytest.raises(ConfigError, match="not a one-label sequence classifier"):
        check_reward_checkpoint(models["policy"])  # a causal LM
    # unknown environment, through the command line
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"policy": str(models["policy"]), "data": DATA}))
    assert main(["policy", "--config", str(recipe), "--reward-model", str(models["rm"]),
                 "--environment", "noisy", "--out", str(tmp_path / "o")]) == 2
    assert "unknown environment 'noisy': use one of clean, perturbed" in capsys.readouterr().err
    # a policy without a chat template and no plain format
    from rmtrain.policy.tiny import build_tiny_policy

    plain = build_tiny_policy(_texts()[:50], tmp_path / "plain_policy", chat_template=False)
    with pytest.raises(ConfigError, match="has no chat template: set policy.prompt_format: plain"):
        train_policy(make_cfg(models, tmp_path / "p", **{"policy.name_or_path": str(plain)}))
