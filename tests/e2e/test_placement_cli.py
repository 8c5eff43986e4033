"""Where evaluation models run, as a user meets it on the command line: --device/--dtype/... flags
(rmcore.models.device through rmeval.cli.flags), recorded in the reports; one-line errors for a device
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


# The bound on a bfloat16 score's error. The reward is s = w . z + b, z the pooled 384-vector the
# classifier reads. In bfloat16 each stored number (z_i, w_i, b, s) is rounded to 8 significant bits,
# a relative error of at most u = 2^-8; the CPU kernels (AVX2, AVX-512, AMX alike) multiply bfloat16
# inputs exactly and accumulate in float32, whose error (K u32 for K <= 1536 terms, about 1e-4) is
# small beside u. So the head itself adds at most 3 u sum_i |w_i z_i| (z, w and s rounded; b = 0 is
# exact), and z arrives with the error of the encoder below it: taken as two roundings of relative
# size u per layer (the attention and the feed-forward block, each ending in a LayerNorm that keeps
# the residual stream's scale, so errors add rather than multiply) and two more for the embeddings
# and the pooler. Hence |s_bf16 - s_fp32| <= P u sum_i |w_i z_i| with P = 3 + 2 (L + 1), L = 6
# layers. The scale is each text's own sum_i |w_i z_i| (the score's condition), not the scores'
# spread: a random head cancels most of w . z (|s| ~ 0.01 against sum |w z| ~ 0.3), so a bound in
# score SDs (the earlier 0.05 SD, measured 0.046 SD on an AMD EPYC and 0.047 SD on a Xeon with AMX)
# sits on the rounding noise itself. Measured by this test on an Intel Xeon with AMX (one torch thread): at most
# 0.48 u sum |w z|, against P = 17.
U_BF16, U_FP32 = 2.0 ** -8, 2.0 ** -24
N_LAYERS, LONGEST_SUM = 6, 1536  # MiniLM-L6; its feed-forward width, the longest dot product
P = 3 + 2 * (N_LAYERS + 1)


def _float32_reference(ckpt, keys):
    """(score, sum_i |w_i z_i| + |b|) of each (prompt_id, response_id) of SPEC: transformers' own
    BertForSequenceClassification in float32, one text at a time (no padding, no packing), the text
    laid out as the scorer lays it out (``encode_example``, 96 tokens)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmcore.data.loading import load_data
    from rmcore.models.formatting import encode_example

    rs = load_data(SPEC)
    texts = {(p.prompt_id, r.response_id): (list(p.messages), r.text) for p in rs.prompts for r in p.responses}
    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForSequenceClassification.from_pretrained(ckpt, dtype=torch.float32).eval()
    w, b = model.classifier.weight[0].double(), model.classifier.bias.double().abs().sum()
    scores, scales = [], []
    with torch.no_grad():
        for key in keys:
            e = encode_example(tok, *texts[key], 96)
            inputs = {"input_ids": torch.tensor([e.input_ids])}
            if e.token_type_ids is not None:
                inputs["token_type_ids"] = torch.tensor([e.token_type_ids])
            z = model.bert(**inputs).pooler_output[0].double()  # what the classifier reads (dropout is off)
            scores.append(float(model.classifier(z.float()[None])[0, 0]))
            scales.append(float((w * z).abs().sum() + b))
    return np.array(scores), np.array(scales)


def test_bfloat16_is_recorded_and_within_its_rounding_of_float32(tmp_path, minilm_ckpt):
    assert _audit(minilm_ckpt, tmp_path / "fp32") == 0
    assert _audit(minilm_ckpt, tmp_path / "bf16", "--dtype", "bfloat16") == 0
    meta = {d: json.loads((tmp_path / d / "audit.json").read_text())["meta"]["placement"] for d in ("fp32", "bf16")}
    assert meta["fp32"] == {"device": "cpu", "dtype": "float32",
                            "attn_implementation": meta["fp32"]["attn_implementation"],
                            "loader": "classifier", "reward_head": None}
    assert meta["bf16"]["dtype"] == "bfloat16" and meta["bf16"]["device"] == "cpu"
    a, b = (pd.read_parquet(tmp_path / d / "scores.parquet").sort_values(["prompt_id", "response_id"]) for d in
            ("fp32", "bf16"))
    ref, scale = _float32_reference(minilm_ckpt, list(zip(a["prompt_id"], a["response_id"])))
    fp32, bf16 = a["score"].to_numpy(), b["score"].to_numpy()
    # the reference reads the same texts: float32 sums in another order (packed, batched) differ by at
    # most K u32 of sum |terms| per dot product, K the longest sum, through the same P roundings
    assert np.all(np.abs(fp32 - ref) <= P * LONGEST_SUM * U_FP32 * scale)
    assert np.abs(bf16 - fp32).max() > 0  # another dtype really ran
    assert np.all(np.abs(bf16 - ref) <= P * U_BF16 * scale), (np.abs(bf16 - ref) / (U_BF16 * scale)).max()


def test_reports_follow_the_umask(tmp_path, minilm_ckpt):
    old = os.umask(0o022)
    try:
        assert _audit(minilm_ckpt, tmp_path / "a") == 0
        for name in ("audit.json", "audit.md", "scores.parquet"):
            assert stat.S_IMODE((tmp_path / "a" / name).stat().st_mode) == 0o644, name
        os.umask(0o027)
        from rmcore.io.files import atomic_write_json

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


@pytest.mark.parametrize("env,why", [
    ({"HF_HUB_OFFLINE": "1"}, "not a local path, and not in the Hugging Face cache with the Hub offline"),
    ({"HF_ENDPOINT": "http://127.0.0.1:9"},  # nothing listens on port 9 (discard): refused at once
     "not a local path, not in the Hugging Face cache, and the Hub at http://127.0.0.1:9 cannot be reached"),
])
def test_a_hub_id_that_cannot_be_reached_is_our_line_alone(tmp_path, env, why):
    """The whole stderr of the process (what huggingface_hub logs or prints included) is one line of
    ours, for a reward model and an embedder (a --checkpoint: test_a_mistyped_model_is_not_found_at_once);
    nothing is written."""
    import subprocess
    import sys

    from tests.support import ROOT

    name = "someone/no-such-reward-model"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))}
    base.update(env, PYTHONPATH=str(ROOT), WANDB_MODE="disabled", HF_HOME=str(tmp_path / "hf"))
    for argv, what in ((["serve-reward", "--checkpoint", name], f"reward model {name}"),
                       (["features", "--data", SPEC, "--out", str(tmp_path / "f"), "--embedders", name], "embedder")):
        proc = subprocess.run([sys.executable, "-m", "rmeval.cli", *argv], cwd=tmp_path, env=base,
                              capture_output=True, text=True, timeout=300)
        err = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and err == [f"rmeval: error: file {name}: {what}: not found ({why})"], err
        assert proc.stdout == ""
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no output, nothing downloaded


def _placement(parser, argv):
    """The Placement in the settings the command reads from ``argv``."""
    import dataclasses

    from rmcore.models.device import Placement
    from rmcore.settings.fields import from_args

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
