"""The GPU check behind scripts/gpu_check.sh: one table of what matchrm does on this machine's GPU.

On a randomly initialised Qwen3-0.6B-shaped reward model (the config written out here, a byte-level
BPE tokenizer trained here with rmcore.models.tiny: nothing from the Hub) in bfloat16:

1. training pairs/s and tokens/s of rmtrain (bradley_terry, shared prompt on and off) against trl's
   RewardTrainer at its best settings (length-grouped batches), one epoch of the same pairs each
   (scripts/bench_train_speed.py's machinery; bf16 mixed precision for all three);
2. scoring texts/s of `rmeval audit` (its scoring path, original/generic/random conditions) in
   float32 and in bfloat16, and the largest score difference between the two, in score SDs
   (scripts/bench_scoring.py's ``audit_scoring``);
3. the reward server's rewards/s through its command line and HTTP interface (`rmeval
   serve-reward`, OpenRLHF's /get_reward protocol);
4. `pytest -m gpu`;
5. one short GRPO step with vLLM when scripts/gpu_grpo_step.py is there (said when it is not).

Without CUDA it builds the model's config and tokenizer, then stops and says which steps need a
GPU. Tokens/s counts the tokens of the chosen and rejected texts of the pairs trained (the same
numerator for every trainer, whatever each pads or shares).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("WANDB_MODE", "disabled")

# Qwen/Qwen3-0.6B's published shape (config.json of the release), written out here
QWEN3_06B = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu"}


def build_model(out: Path, n_prompts: int, vocab: int, cuda: bool) -> tuple[str, int]:
    """The reward model (Qwen3ForSequenceClassification, random weights incl. its score head, saved
    in bfloat16) and its tokenizer trained on the benchmark's texts; returns (path, parameters). Without
    CUDA only the tokenizer and config are built (the parameters counted on the meta device)."""
    import torch
    from bench_util import rating_set_texts
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, train_tokenizer

    rs = load_rating_set({"name": "simulated", "n_prompts": n_prompts, "responses_per_prompt": 4, "seed": 0})
    tok = train_tokenizer(rating_set_texts(rs), vocab, chat_template=CHAT_TEMPLATE, eos_token=EOS, pad_token=PAD)
    cfg = AutoConfig.for_model("qwen3", vocab_size=len(tok), num_labels=1, pad_token_id=tok.pad_token_id,
                               eos_token_id=tok.eos_token_id, **QWEN3_06B)
    with torch.device("meta"):
        n_params = sum(p.numel() for p in AutoModelForSequenceClassification.from_config(cfg).parameters())
    if cuda:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = AutoModelForSequenceClassification.from_config(cfg, dtype=torch.bfloat16)
        model.save_pretrained(out)
        del model
        torch.cuda.empty_cache()
    else:
        cfg.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out), n_params


def training(model: str, out: Path, a: argparse.Namespace) -> dict[str, Any]:
    """rmtrain (shared prompt on, off) and trl best, one epoch of the same pairs each, bf16."""
    import bench_train_speed as bts
    import numpy as np

    ns = argparse.Namespace(model=model, data="simulated", n_prompts=a.n_prompts, max_pairs=a.train_pairs, steps=0,
                            batch_size=a.train_batch, max_length=a.max_length, lr=1e-5, seed=1,
                            no_shared_prompt=False, no_packed_encoder=False)
    res: dict[str, Any] = {}
    for name, shared in (("rmtrain (shared prompt)", True), ("rmtrain (no shared prompt)", False), ("trl best", None)):
        ns.no_shared_prompt = shared is False
        cfg = bts.build_config(ns, str(out / name.split()[0]))
        cfg.training.bf16, cfg.training.use_cpu = True, False
        prep = bts.prepare(cfg)
        tokens = int(sum(len(x) for x in prep["dataset"]["chosen_input_ids"]) +
                     sum(len(x) for x in prep["dataset"]["rejected_input_ids"]))
        r = bts.run_trl(cfg, prep, best=True) if shared is None else bts.run_ours(cfg, prep)
        res[name] = {"pairs_per_s": r["pairs_per_s"], "tokens_per_s": tokens / r["train_runtime_s"],
                     "pairs": r["pairs"], "final_loss": float(np.mean(r["losses"][-3:])) if r["losses"] else None}
    return res


def scoring(model: str, a: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    from bench_scoring import audit_scoring

    runs = {d: audit_scoring(model, d, device="cuda", n_prompts=a.n_prompts, max_length=a.max_length,
                             batch_size=a.score_batch, max_tokens=a.max_tokens) for d in ("float32", "bfloat16")}
    diff = np.abs(runs["float32"]["scores"] - runs["bfloat16"]["scores"])
    return {"texts": runs["float32"]["texts"], "float32": runs["float32"]["texts_per_s"],
            "bfloat16": runs["bfloat16"]["texts_per_s"], "max_abs_diff": float(diff.max()),
            "max_diff_in_sd": float(diff.max() / np.std(runs["float32"]["scores"]))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reward_server(model: str, a: argparse.Namespace, log: Path) -> dict[str, Any]:
    """`rmeval serve-reward` started as a user starts it, then timed over HTTP (/get_reward)."""
    from rmcore.data.loading import load_rating_set

    port = _free_port()
    cmd = [sys.executable, "-m", "rmeval.cli", "serve-reward", "--checkpoint", model, "--port", str(port)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}/get_reward"
        deadline = time.time() + 300
        rs = load_rating_set({"name": "simulated", "n_prompts": a.n_prompts, "responses_per_prompt": 4, "seed": 0})
        prompts = [p.last_user_text for p in rs.prompts for _ in p.responses]
        queries = [p.last_user_text + r.text for p in rs.prompts for r in p.responses]

        def post(q: list[str], pr: list[str]) -> list[float]:
            body = json.dumps({"query": q, "prompts": pr, "labels": [""] * len(q)}).encode()
            req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())["rewards"]

        while True:  # up once it answers
            if proc.poll() is not None:
                return {"error": f"serve-reward exited with {proc.returncode}; log {log}"}
            try:
                post(queries[:2], prompts[:2])
                break
            except OSError:
                if time.time() > deadline:
                    return {"error": f"serve-reward did not answer in 300 s; log {log}"}
                time.sleep(2)
        t0, n = time.perf_counter(), 0
        for i in range(0, len(queries), a.server_batch):
            n += len(post(queries[i:i + a.server_batch], prompts[i:i + a.server_batch]))
        return {"rewards_per_s": n / (time.perf_counter() - t0), "rewards": n, "batch": a.server_batch}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_step(cmd: list[str], timeout: int, log: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "summary": f"timed out after {timeout} s"}
    log.write_text(p.stdout + p.stderr)
    tail = [ln for ln in (p.stdout + p.stderr).strip().splitlines() if ln.strip()]
    return {"ok": p.returncode == 0, "summary": (tail[-1] if tail else "") [:160], "seconds": time.perf_counter() - t0}


def table(rows: list[tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="working directory (default: a new one under /tmp)")
    ap.add_argument("--n-prompts", type=int, default=400, help="simulated prompts (4 responses each)")
    ap.add_argument("--train-pairs", type=int, default=2048)
    ap.add_argument("--train-batch", type=int, default=16, help="pairs per step")
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--score-batch", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=65536, help="padded tokens per scoring batch")
    ap.add_argument("--server-batch", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: train,score,server,pytest,grpo")
    a = ap.parse_args()
    import tempfile

    import torch

    out = Path(a.out or tempfile.mkdtemp(prefix="gpu_check."))
    out.mkdir(parents=True, exist_ok=True)
    skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_name(0) if cuda else "none"
    print(f"gpu_check: torch {torch.__version__} (CUDA build {torch.version.cuda or 'no'}), GPU: {gpu}; work dir {out}",
          flush=True)
    t_start = time.perf_counter()
    model, n_params = build_model(out / "qwen3-0.6b-rm", a.n_prompts, a.vocab, cuda)
    rows: list[tuple[str, str]] = [("machine", f"{gpu}; torch {torch.__version__}"),
                                   ("model", f"Qwen3-0.6B-shaped reward model, {n_params / 1e6:.0f}M parameters, "
                                             f"random init, bfloat16 ({model})")]
    if not cuda:
        print(f"model config and tokenizer built ({n_params / 1e6:.0f}M parameters); no CUDA GPU on this machine: "
              "stopping here. The remaining steps (training, scoring, reward server, pytest -m gpu, GRPO step) need "
              "one; run scripts/gpu_check.sh on a GPU node (docs/gpu-cluster.md).", flush=True)
        rows.append(("status", "stopped before the GPU steps: torch sees no CUDA GPU"))
        print(table(rows))
        return 0
    results: dict[str, Any] = {"model_parameters": n_params, "gpu": gpu}
    if "train" not in skip:
        print("training: rmtrain (shared prompt on, off) and trl best ...", flush=True)
        results["train"] = training(model, out / "train", a)
        for name, r in results["train"].items():
            rows.append((f"train {name}", f"{r['pairs_per_s']:.1f} pairs/s, {r['tokens_per_s']:.0f} tokens/s"))
        best = results["train"]["trl best"]["pairs_per_s"]
        rows.append(("train ratio rmtrain/trl best",
                     f"{results['train']['rmtrain (shared prompt)']['pairs_per_s'] / best:.2f}x shared prompt, "
                     f"{results['train']['rmtrain (no shared prompt)']['pairs_per_s'] / best:.2f}x without"))
    if "score" not in skip:
        print("scoring: rmeval audit's scoring in float32 and bfloat16 ...", flush=True)
        results["score"] = s = scoring(model, a)
        rows.append(("audit scoring float32", f"{s['float32']:.0f} texts/s ({s['texts']} texts)"))
        rows.append(("audit scoring bfloat16", f"{s['bfloat16']:.0f} texts/s ({s['bfloat16'] / s['float32']:.2f}x)"))
        rows.append(("max |score diff| bf16 vs fp32", f"{s['max_abs_diff']:.3g} ({s['max_diff_in_sd']:.3f} score SD)"))
    if "server" not in skip:
        print("reward server: rmeval serve-reward over HTTP ...", flush=True)
        results["server"] = r = reward_server(model, a, out / "serve_reward.log")
        rows.append(("reward server", f"{r['rewards_per_s']:.0f} rewards/s (batches of {r['batch']})"
                     if "rewards_per_s" in r else r["error"]))
    if "pytest" not in skip:
        print("pytest -m gpu ...", flush=True)
        results["pytest"] = r = run_step([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests"], 300,
                                         out / "pytest_gpu.log")
        rows.append(("pytest -m gpu", ("passed: " if r["ok"] else "FAILED: ") + r["summary"]))
    if "grpo" not in skip:
        script = ROOT / "scripts" / "gpu_grpo_step.py"
        if script.is_file():
            print("one GRPO step with vLLM ...", flush=True)
            results["grpo"] = r = run_step([sys.executable, str(script), "--out", str(out / "grpo")], 300,
                                           out / "grpo.log")
            rows.append(("GRPO step (vLLM)", ("ok: " if r["ok"] else "FAILED: ") + r["summary"]))
        else:
            rows.append(("GRPO step (vLLM)", "absent: scripts/gpu_grpo_step.py not in this checkout"))
    rows.append(("total", f"{time.perf_counter() - t_start:.0f} s"))
    (out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
