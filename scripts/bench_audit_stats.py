"""Wall time of compute_audit on a synthetic table the size of the real audit set.

519 prompts x 2 responses, every condition: 4 donors per transplant kind, 2 paraphrases, last_turn
on a multi-turn subset, generic and prompt_only. Default resamples (2,000; 5,000 for the
regression). Target: under 5 s.

    python scripts/bench_audit_stats.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from rmeval.stats.audit_sections import compute_audit
from rmeval.tables import PROMPT_ONLY_SENTINEL, TRANSPLANT_KINDS

TARGET_S = 5.0


def synthetic(n_prompts: int = 519, k: int = 2, n_donors: int = 4, seed: int = 0
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n_prompts)  # prompt effect
    pids = np.array([f"p{i}" for i in range(n_prompts)])
    multi = rng.random(n_prompts) < 0.25
    rat, rows = [], []
    for i, p in enumerate(pids):
        for j in range(k):
            q = rng.normal()
            rid = f"{p}_r{j}"
            rat.append({"prompt_id": p, "response_id": rid, "helpfulness": 2 + 0.6 * u[i] + q,
                        "single_turn": not multi[i],
                        "response_length": float(np.exp(5 + 0.3 * q + 0.2 * rng.normal()))})
            s = u[i] + 0.8 * q + 0.3 * rng.normal()
            rows.append((p, rid, "original", 0, None, s))
            rows.append((p, rid, "generic", 0, None, u[i] + 0.3 * rng.normal()))
            for kind in TRANSPLANT_KINDS:
                for d in range(n_donors):
                    donor = pids[(i + 1 + d) % n_prompts]
                    rows.append((p, rid, kind, d, donor, s - 0.5 + 0.3 * rng.normal()))
            for v in range(2):
                rows.append((p, rid, "paraphrase", v, None, s + 0.2 * rng.normal()))
            if multi[i]:
                rows.append((p, rid, "last_turn", 0, None, s + 0.1 + 0.3 * rng.normal()))
        rows.append((p, PROMPT_ONLY_SENTINEL, "prompt_only", 0, None, u[i] + 0.4 * rng.normal()))
    scores = pd.DataFrame(rows, columns=["prompt_id", "response_id", "condition", "variant",
                                         "donor_prompt_id", "score"])
    return scores, pd.DataFrame(rat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    scores, ratings = synthetic()
    print(f"scores table: {len(scores)} rows; {ratings['prompt_id'].nunique()} prompts, {len(ratings)} responses")
    compute_audit(scores, ratings)  # warm-up (imports, first-call overheads)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        compute_audit(scores, ratings)
        times.append(time.perf_counter() - t0)
    best, med = min(times), float(np.median(times))
    print(f"compute_audit wall time: best {best:.3f} s, median {med:.3f} s "
          f"({med / TARGET_S:.2f} x the {TARGET_S:.0f} s target)")


if __name__ == "__main__":
    main()
