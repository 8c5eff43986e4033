"""Prompt-swap statistics: transplant margins, paraphrase / last-turn shifts, prompt-only score.

Every effect is expressed in SDs of the original scores so checkpoints and models with different
score scales compare. The SD is recomputed inside each bootstrap resample (it is part of the
statistic), from per-prompt sums n, sum y, sum y^2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import bootstrap_stat, group_codes, per_prompt_sums, resample_weights, summarize

KEY = ["prompt_id", "response_id"]


def _sd_from_sums(n: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.sqrt((q - s * s / n) / (n - 1))


def _prompt_frame(original: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of original rows, unique prompt ids, and (k, 3) SD sums [n, sum y, sum y^2]."""
    codes, prompts = group_codes(original["prompt_id"].to_numpy())
    y = original["score"].to_numpy(float)
    y = y - y.mean()  # SD is shift-invariant; centring avoids cancellation
    sums = per_prompt_sums(codes, np.column_stack([np.ones_like(y), y, y * y]), len(prompts))
    return codes, prompts, sums


def _prompt_codes(prompt_ids: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    index = pd.Index(prompts)
    codes = index.get_indexer(prompt_ids)
    if (codes < 0).any():
        bad = prompt_ids[codes < 0][0]
        raise ValueError(f"prompt '{bad}' has perturbed scores but no original score")
    return codes


def transplant(original: pd.DataFrame, wrong: pd.DataFrame, *, n_boot: int = 2000,
               rng: np.random.Generator | int | None = 0,
               weights: np.ndarray | None = None) -> dict[str, Any]:
    """Margin (own-prompt score minus mean wrong-prompt score, in original-score SDs) and match
    accuracy (own score above every wrong-prompt score), averaged over responses.

    ``original``: prompt_id, response_id, score (condition original). ``wrong``: the same
    responses scored under donor prompts (prompt_id = the response's own prompt).
    """
    codes_o, prompts, sd_sums = _prompt_frame(original)
    k = len(prompts)
    agg = wrong.groupby(KEY, sort=False)["score"].agg(["mean", "max", "size"]).reset_index()
    m = agg.merge(original[KEY + ["score"]], on=KEY, how="left")
    if m["score"].isna().any():
        bad = m.loc[m["score"].isna(), KEY].iloc[0].tolist()
        raise ValueError(f"response {bad} has transplant scores but no original score")
    d = (m["score"] - m["mean"]).to_numpy(float)
    hit = (m["score"] > m["max"]).to_numpy(float)
    codes = _prompt_codes(m["prompt_id"].to_numpy(), prompts)
    per = np.column_stack([per_prompt_sums(codes, np.column_stack([np.ones_like(d), d, hit]), k), sd_sums])

    def margin(s: np.ndarray) -> np.ndarray:
        return s[..., 1] / s[..., 0] / _sd_from_sums(s[..., 3], s[..., 4], s[..., 5])

    def accuracy(s: np.ndarray) -> np.ndarray:
        return s[..., 2] / s[..., 0]

    if weights is None:
        weights = resample_weights(k, n_boot, np.random.default_rng(rng))
    n_prompts = int(len(np.unique(codes)))
    out: dict[str, Any] = {}
    for name, fn in (("margin_sd", margin), ("accuracy", accuracy)):
        est, boot = bootstrap_stat(per, fn, weights)
        out[name] = summarize(est, boot, n_prompts, weights.shape[0])
    out["n_responses"] = len(m)
    out["n_donors_mean"] = float(m["size"].mean()) if len(m) else 0.0
    return out


def shift(original: pd.DataFrame, perturbed: pd.DataFrame, *, n_boot: int = 2000,
          rng: np.random.Generator | int | None = 0,
          weights: np.ndarray | None = None) -> dict[str, Any]:
    """Mean absolute and mean signed (perturbed - original) score shift per response and variant,
    in original-score SDs (paraphrased prompt; last-turn-only prompt)."""
    codes_o, prompts, sd_sums = _prompt_frame(original)
    k = len(prompts)
    m = perturbed[KEY + ["score"]].merge(original[KEY + ["score"]], on=KEY, how="left",
                                         suffixes=("_p", "_o"))
    if m["score_o"].isna().any():
        bad = m.loc[m["score_o"].isna(), KEY].iloc[0].tolist()
        raise ValueError(f"response {bad} has perturbed scores but no original score")
    d = (m["score_p"] - m["score_o"]).to_numpy(float)
    codes = _prompt_codes(m["prompt_id"].to_numpy(), prompts)
    per = np.column_stack([per_prompt_sums(codes, np.column_stack([np.ones_like(d), np.abs(d), d]), k),
                           sd_sums])

    def sd(s: np.ndarray) -> np.ndarray:
        return _sd_from_sums(s[..., 3], s[..., 4], s[..., 5])

    if weights is None:
        weights = resample_weights(k, n_boot, np.random.default_rng(rng))
    n_prompts = int(len(np.unique(codes)))
    out: dict[str, Any] = {}
    for name, col in (("abs_shift_sd", 1), ("signed_shift_sd", 2)):
        est, boot = bootstrap_stat(per, lambda s, c=col: s[..., c] / s[..., 0] / sd(s), weights)
        out[name] = summarize(est, boot, n_prompts, weights.shape[0])
    out["n_pairs"] = len(m)
    return out


def _pearson_from_sums(s: np.ndarray) -> np.ndarray:
    n, sx, sy, qx, qy, sxy = (s[..., i] for i in range(6))
    cov = sxy - sx * sy / n
    return cov / np.sqrt((qx - sx * sx / n) * (qy - sy * sy / n))


def prompt_only(original: pd.DataFrame, prompt_only_scores: pd.DataFrame, *, n_boot: int = 2000,
                rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Pearson correlation across prompts of the prompt-only score (a fixed generic reply under
    each prompt) with the prompt's mean original score: how much of the score the prompt alone
    predicts."""
    po = prompt_only_scores.groupby("prompt_id", sort=False)["score"].mean()
    mo = original.groupby("prompt_id", sort=False)["score"].mean()
    joined = pd.concat([po.rename("x"), mo.rename("y")], axis=1, join="inner")
    x = joined["x"].to_numpy(float)
    y = joined["y"].to_numpy(float)
    x, y = x - x.mean(), y - y.mean()
    per = np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y])
    k = len(x)
    if k < 3:
        return summarize(float("nan"), None, k, 0)
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per, _pearson_from_sums, w)
    return summarize(est, boot, k, n_boot)
