"""`rmeval judges reweight --baselines ...`: every numeric baseline flag is checked before any work,
with one line naming the flag, exit 2 and nothing written."""

from __future__ import annotations

import pytest

from rmcore.errors import ConfigError
from rmeval.cli import main
from rmeval.judges.settings import BaselineSettings


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("rubric_k", 0, "--rubric-k"), ("lora_steps", 0, "--lora-steps"), ("lora_batch_size", -1, "--lora-batch-size"),
    ("batch_size", 0, "--batch-size"), ("max_length", 4, "--max-length"), ("lora_budget", 1, "--lora-budget"),
    ("lora_lr", float("nan"), "--lora-lr"), ("lora_lr", 0.0, "--lora-lr"), ("lora_lr", float("inf"), "--lora-lr"),
])
def test_bad_numbers_are_refused_naming_the_flag(field, value, flag):
    with pytest.raises(ConfigError, match=f"^{flag}: .* is out of range; allowed: "):
        BaselineSettings(model="m", judge="j", **{field: value})


def test_defaults_and_all_labels_are_accepted():
    assert BaselineSettings(model="m", judge="j").lora_budget == 256
    assert BaselineSettings(model="m", judge="j", lora_budget=None, lora_lr=1e-5).lora_budget is None


@pytest.mark.parametrize("extra", [["--lora-lr", "nan"], ["--rubric-k", "0"], ["--lora-budget", "-3"]])
def test_cli_one_line_exit_2_nothing_written(tmp_path, capsys, extra):
    out = tmp_path / "out"
    argv = ["judges", "reweight", "--judgments", str(tmp_path / "absent.parquet"), "--items",
            str(tmp_path / "absent.jsonl"), "--out", str(out), "--baselines", "rubric,lora",
            "--baseline-model", str(tmp_path / "m"), "--baseline-judge", "j", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"rmeval: error: {extra[0]}: ")
    assert not out.exists()
