"""Judge elicitation throughput: prefix KV-cache reuse across attributes vs one full forward per call.

Same tiny causal LM (rmcore.models.tiny: built from a config, byte-level BPE tokenizer trained on the items), same
items (RM-Bench chat pairs), same questions (the 20 core attributes + the overall verdict, both
orders), same token ids. ``LocalPairJudge(prefix_reuse=True)`` runs each item's prefix once and
only the short attribute questions per call; ``prefix_reuse=False`` runs every call in full
(length-sorted batches). Prints calls/s for each, the ratio, and whether the directions agree.

    python scripts/bench_judges.py [--items 8] [--hidden 256] [--layers 4] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rmcore.data.preference_sets import load_rm_bench
from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer
from rmeval.judges.elicit import (
    ATTRIBUTE_QUESTION,
    OVERALL_QUESTION,
    LocalPairJudge,
    build_calls,
    items_from_rating_set,
    questions_for,
)
from rmeval.judges.inventory import load_inventory

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "rm-bench" / "chat_filtered.json"


def tiny_judge(path: Path, texts: list[str], hidden: int, layers: int) -> Path:
    """A random tiny Llama (rmcore.models.tiny) with a BPE tokenizer trained on ``texts`` (pad and EOS tokens)."""
    tok = train_tokenizer(texts, 2000, pad_token="[PAD]", eos_token="[EOS]")
    model = tiny_model(tok, "llama", hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)
    return save_tiny(path, model, tok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    items = items_from_rating_set(load_rm_bench(args.data), "rm_bench_chat", limit=args.items, seed=0)
    questions = questions_for(load_inventory(names=["core"]))
    calls = build_calls(items, questions)
    with tempfile.TemporaryDirectory() as tmp:
        texts = [ATTRIBUTE_QUESTION, OVERALL_QUESTION, *items["query"], *items["response_a"], *items["response_b"]]
        path = tiny_judge(Path(tmp), texts, args.hidden, args.layers)
        res = {}
        for reuse in (True, False):
            judge = LocalPairJudge(path, batch_size=args.batch_size, max_length=args.max_length, prefix_reuse=reuse)
            judge.p_first(calls[: len(questions)])  # warm-up
            t0 = time.perf_counter()
            p = judge.p_first(calls)
            res[reuse] = (len(calls) / (time.perf_counter() - t0), p, judge)
    lens = [len(a) + len(b) for a, b in (res[True][2].encode(c) for c in calls[:: len(questions)])]
    d_fast, d_slow = np.sign(res[True][1] - 0.5), np.sign(res[False][1] - 0.5)
    print(f"{len(items)} items x {len(questions)} questions x 2 orders = {len(calls)} calls; "
          f"mean call length {np.mean(lens):.0f} tokens; model hidden {args.hidden}, {args.layers} layers, "
          f"{args.threads} thread(s)")
    print(f"prefix reuse:      {res[True][0]:8.1f} calls/s")
    print(f"full forward/call: {res[False][0]:8.1f} calls/s")
    print(f"speed-up: {res[True][0] / res[False][0]:.2f}x; same directions: {bool(np.all(d_fast == d_slow))} "
          f"(max |dp| {np.max(np.abs(res[True][1] - res[False][1])):.2e})")


if __name__ == "__main__":
    main()
