"""The pooled sibling coefficient of a training arm over its seeds, and its contrast between arms.

The study compares matched arms by their sibling-rating coefficient "under independent ratings"
(HelpSteer, where each response was rated on its own): the Bradley-Terry arm's pooled sibling
coefficient is lower than the regression arm's by 0.07 [0.02, 0.13] at 0.6B, and the regression
arm's is 0.01 [-0.05, 0.08]. Definitions, for the runs (seeds) s = 1..S of an arm scored on the
same audit prompts and responses:

- b_s is run s's sibling coefficient (``rmeval.stats.regression``): OLS of its z-scored original
  score on the shown response's rating and the mean rating of the other responses to the prompt.
- The **pooled coefficient** of the arm is the mean over its seeds, b = (1/S) sum_s b_s. With the
  same responses and ratings for every seed, the design matrix X is the same for every s, so b is
  also the OLS coefficient of the seeds' stacked z-scored scores on the stacked X: every seed
  counts once, whatever its score scale.
- The **contrast** between arms A and B is b_A - b_B.
- **Interval**: a 95% percentile bootstrap over prompts, like every interval of the study. Each
  resample draws the audit prompts with replacement once and applies that draw to every seed of
  every arm (the same prompts were scored by every run), refitting each b_s on it (z-scoring with
  the resampled SD, as the single-run regression does); a contrast's interval is thereby paired.
  The seeds themselves are fixed: the interval is over prompts, for these seeds.

Each run's regression is a function of per-prompt sums (``sibling_sums``), so a resample of all
runs is one matrix product per run.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import resample_weights, summarize
from .regression import coefs_from_sums, sibling_sums
from .settings import N_BOOT

Run = tuple[np.ndarray, np.ndarray, np.ndarray]  # (score, rating, prompt id) of one run's responses


def pooled_sibling_contrast(arms: dict[str, list[Run]], *, n_boot: int = N_BOOT, seed: int = 0,
                            coefficient: str = "sibling") -> dict[str, Any]:
    """{"arms": {arm: {pooled, n_seeds, per_seed}}, "contrasts": {"A - B": ...}, n_prompts} for
    the runs of each arm (see the module doc); ``coefficient``: ``sibling`` or ``shown``. Arms
    without a run with at least three prompts of two rated responses are left out."""
    col = {"shown": 0, "sibling": 1}[coefficient]
    sums: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for arm, runs in arms.items():
        for score, rating, prompts in runs:
            per, ids = sibling_sums(score, rating, prompts)
            if per[:, 9].sum() > 2 and (per[:, 0] > 0).sum() >= 3:  # >= 3 prompts in the regression
                sums.setdefault(arm, []).append((per, ids))
    if not sums:
        return {}
    index = pd.Index(pd.unique(np.concatenate([ids for runs in sums.values() for _, ids in runs])))
    k = len(index)
    w = resample_weights(k, n_boot, np.random.default_rng([seed, 0x51B]))
    est: dict[str, np.ndarray] = {}
    boot: dict[str, np.ndarray] = {}
    per_seed: dict[str, list[float]] = {}
    for arm, runs in sums.items():
        e, b = [], []
        for per, ids in runs:
            full = np.zeros((k, per.shape[1]))
            full[index.get_indexer(ids)] = per  # a prompt a run did not score adds nothing to it
            with np.errstate(divide="ignore", invalid="ignore"):
                e.append(coefs_from_sums(full.sum(axis=0)[None, :])[0, col])
                b.append(coefs_from_sums(w @ full)[:, col])
        per_seed[arm] = [float(v) for v in e]
        est[arm], boot[arm] = np.mean(e), np.mean(b, axis=0)
    out: dict[str, Any] = {"coefficient": coefficient, "n_prompts": k, "n_boot": int(n_boot), "arms": {}}
    for arm in est:
        out["arms"][arm] = {"pooled": summarize(est[arm], boot[arm], k, n_boot), "n_seeds": len(per_seed[arm]),
                            "per_seed": per_seed[arm]}
    out["contrasts"] = {f"{a} - {b}": summarize(est[a] - est[b], boot[a] - boot[b], k, n_boot, arm_a=a, arm_b=b)
                        for a, b in itertools.combinations(est, 2)}
    return out
