"""Where evaluation models run, as a user meets it on the command line: --device/--dtype/... flags
(rmcore.device through rmeval.cli.flags), recorded in the reports; one-line errors for a device
that is not there and for a model name that is not found; reports written with the user's umask."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest
import torch

from rmeval.cli import build_parser, main

SPEC = "simulated:n_prompts=10,responses_per_prompt=3,seed=4"


def _audit(ckpt, out, *extra: str) -> int:
    return main(["audit", "--checkpoint", str(ckpt), "--data", SPEC, "--out", str(out), "--conditions", "original",
                 "--max-length", "96", "--n-boot", "50", "--n-boot-regression", "50", "--wandb-mode", "disabled",
                 "--no-progress", *extra])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_a_missing_gpu_is_one_line(tmp_path, capsys, minilm_ckpt):
    assert _audit(minilm_ckpt, tmp_path / "a", "--device", "cuda") == 2
    line = _one_line(capsys)
    assert line.startswith("rmeval: error:") and "no CUDA GPU" in line
    assert _audit(minilm_ckpt, tmp_path / "b", "--device-map", "auto") == 2
    assert "device_map auto" in _one_line(capsys)
    assert _audit(minilm_ckpt, tmp_path / "c", "--device", "gpu0") == 2
    assert "device must be auto, cpu, cuda, cuda:N" in _one_line(capsys)
    assert not (tmp_path / "a" / "scores.parquet").exists()


def test_bfloat16_is_recorded_and_close_to_float32(tmp_path, minilm_ckpt):
    assert _audit(minilm_ckpt, tmp_path / "fp32") == 0
    assert _audit(minilm_ckpt, tmp_path / "bf16", "--dtype", "bfloat16") == 0
    meta = {d: json.loads((tmp_path / d / "audit.json").read_text())["meta"]["placement"] for d in ("fp32", "bf16")}
    assert meta["fp32"] == {"device": "cpu", "dtype": "float32", "attn_implementation": meta["fp32"]["attn_implementation"],
                            "loader": "classifier", "reward_head": None}
    assert meta["bf16"]["dtype"] == "bfloat16" and meta["bf16"]["device"] == "cpu"
    a, b = (pd.read_parquet(tmp_path / d / "scores.parquet").sort_values(["prompt_id", "response_id"]) for d in
            ("fp32", "bf16"))
    diff = np.abs(a["score"].to_numpy() - b["score"].to_numpy())
    assert diff.max() > 0  # another dtype really ran
    assert diff.max() < 0.05 * a["score"].std()


def test_reports_follow_the_umask(tmp_path, minilm_ckpt):
    old = os.umask(0o022)
    try:
        assert _audit(minilm_ckpt, tmp_path / "a") == 0
        for name in ("audit.json", "audit.md", "scores.parquet"):
            assert stat.S_IMODE((tmp_path / "a" / name).stat().st_mode) == 0o644, name
        os.umask(0o027)
        from rmcore.io import atomic_write_json

        atomic_write_json(tmp_path / "x.json", {"a": 1})
        assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_a_mistyped_model_is_not_found_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _audit("minilm-rm-typo", tmp_path / "a") == 2
    line = _one_line(capsys)
    assert "--checkpoint: not found" in line and "RLHFlow/ArmoRM-Llama3-8B-v0.1" in line
    assert _audit("someone/no-such-reward-model", tmp_path / "b") == 2
    line = _one_line(capsys)
    assert "not found" in line and "someone/no-such-reward-model" in line
    assert main(["pairwise", "--checkpoint", "./missing/dir", "--data", SPEC, "--out", str(tmp_path / "c")]) == 2
    assert "not found" in _one_line(capsys)


def _placement(parser, argv):
    """The Placement in the settings the command reads from ``argv``."""
    import dataclasses

    from rmcore.device import Placement
    from rmcore.settings import from_args

    args = parser.parse_args(argv)
    todo = [from_args(args.settings, args)]
    while todo:
        s = todo.pop()
        if isinstance(s, Placement):
            return s
        todo += [getattr(s, f.name) for f in dataclasses.fields(s) if dataclasses.is_dataclass(getattr(s, f.name))]
    raise AssertionError(f"no placement in {argv}")


def test_every_model_command_has_the_device_flags():
    parser = build_parser()
    for argv in (["audit", "--checkpoint", "c", "--data", "d", "--out", "o"],
                 ["pairwise", "--checkpoint", "c", "--data", "d", "--out", "o"],
                 ["suitability", "--checkpoint", "c", "--data", "d", "--out", "o"],
                 ["variants", "--data", "d", "--task", "paraphrase", "--out", "o"],
                 ["judges", "elicit", "--out", "o"]):
        args = _placement(parser, [*argv, "--device", "cpu", "--dtype", "bfloat16", "--attn-implementation", "eager",
                                   "--trust-remote-code", "--device-map", "auto"])
        assert (args.device, args.dtype, args.attn_implementation, args.trust_remote_code, args.device_map) == (
            "cpu", "bfloat16", "eager", True, "auto"), argv
        defaults = _placement(parser, argv)
        assert (defaults.device, defaults.dtype) == ("auto", "auto"), argv


def test_help_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for cmd in ("audit", "pairwise", "variants"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "--dtype" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
