"""Prompt-swap statistics: transplant margins, paraphrase / last-turn shifts, prompt-only score.

Every effect is expressed in SDs of the original scores so checkpoints and models with different
score scales compare. The SD is recomputed inside each bootstrap resample (it is part of the
statistic), from per-prompt sums n, sum y, sum y^2.

Two scale-free match statistics sit beside the margin (the study's Table 25):

* ``auc``: the ROC AUC of the audited responses' scores under their own prompts (positives,
  s_i) against their scores under the donor prompts (negatives, t_j), ties counted half::

      AUC = sum_ij ( [s_i > t_j] + 0.5 [s_i = t_j] ) / (n_pos n_neg)

  (the Mann-Whitney U over n_pos n_neg; scikit-learn's ``roc_auc_score``). Pairs are taken across
  responses and prompts, so it asks whether a matched score is higher than a mismatched one
  anywhere in the set. Under a prompt resample with multiplicities w_p every positive and negative
  carries its prompt's weight, and the sum runs over weighted pairs (sorted once; a resample is a
  sparse product and a cumulative sum over the distinct score values).
* ``auc_paired``: the share of (response, donor) pairs in which the response's own-prompt score is
  higher than its score under that donor, ties half -- the same comparison within a response.

``fixed_reply_match``: the same margin, match accuracy and AUCs for one fixed reply scored under
each prompt (the prompt-only score) and under that prompt's donors: what the prompt alone decides,
with chance accuracy 1 / (donors + 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from .bootstrap import bootstrap_stat, group_codes, per_prompt_sums, resample_weights, summarize
from .settings import N_BOOT

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


def auc_weighted(pos: np.ndarray, pos_codes: np.ndarray, neg: np.ndarray, neg_codes: np.ndarray,
                 weights: np.ndarray) -> tuple[float, np.ndarray]:
    """ROC AUC of positives against negatives, ties half, on the full sample and under each row of
    ``weights`` ((B, k) prompt multiplicities; a value carries the weight of its prompt code)."""
    k = weights.shape[1]
    values = np.concatenate([pos, neg])
    uniq, inv = np.unique(values, return_inverse=True)
    u = len(uniq)
    m_pos = sparse.csr_matrix((np.ones(len(pos)), (inv[:len(pos)], pos_codes)), shape=(u, k))
    m_neg = sparse.csr_matrix((np.ones(len(neg)), (inv[len(pos):], neg_codes)), shape=(u, k))

    def stat(w: np.ndarray) -> np.ndarray:
        p = np.asarray(m_pos @ w.T).T  # (b, distinct values): weight of positives at each value
        n = np.asarray(m_neg @ w.T).T
        above = p.sum(1, keepdims=True) - np.cumsum(p, axis=1)  # positive weight strictly above
        with np.errstate(divide="ignore", invalid="ignore"):
            return (n * (above + 0.5 * p)).sum(1) / (p.sum(1) * n.sum(1))

    est = float(stat(np.ones((1, k)))[0])
    chunk = max(1, int(2e7 // max(u, 1)))  # bounded memory: chunk x distinct values floats
    boot = np.concatenate([stat(weights[i:i + chunk]) for i in range(0, weights.shape[0], chunk)]) \
        if weights.shape[0] else np.zeros(0)
    return est, boot


def transplant(original: pd.DataFrame, wrong: pd.DataFrame, *, n_boot: int = N_BOOT,
               rng: np.random.Generator | int | None = 0,
               weights: np.ndarray | None = None, scale: pd.DataFrame | None = None,
               boot_out: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Margin (own-prompt score minus mean wrong-prompt score, in original-score SDs), match
    accuracy (own score above every wrong-prompt score), both averaged over responses, and the
    scale-free ``auc`` and ``auc_paired`` (module doc).

    ``original``: prompt_id, response_id, score under the own prompt. ``wrong``: the same
    responses scored under donor prompts (prompt_id = the response's own prompt). ``scale``: the
    table whose score SD is the unit and whose prompts are resampled (default ``original``; the
    fixed reply's margins are in the SDs of the rated responses' scores). ``boot_out``: filled with
    each figure's bootstrap replicates (for paired differences between two scorings).
    """
    codes_o, prompts, sd_sums = _prompt_frame(original if scale is None else scale)
    k = len(prompts)
    agg = wrong.groupby(KEY, sort=False)["score"].agg(["mean", "max", "size"]).reset_index()
    m = agg.merge(original[KEY + ["score"]], on=KEY, how="left")
    if m["score"].isna().any():
        bad = m.loc[m["score"].isna(), KEY].iloc[0].tolist()
        raise ValueError(f"response {bad} has transplant scores but no original score")
    d = (m["score"] - m["mean"]).to_numpy(float)
    hit = (m["score"] > m["max"]).to_numpy(float)
    codes = _prompt_codes(m["prompt_id"].to_numpy(), prompts)
    # per (response, donor) pair: own score above the donor's, ties half
    pairs = wrong[KEY + ["score"]].merge(original[KEY + ["score"]], on=KEY, suffixes=("_w", "_o"))
    own, donor = pairs["score_o"].to_numpy(float), pairs["score_w"].to_numpy(float)
    won = (own > donor) + 0.5 * (own == donor)
    pair_codes = _prompt_codes(pairs["prompt_id"].to_numpy(), prompts)
    per = np.column_stack([per_prompt_sums(codes, np.column_stack([np.ones_like(d), d, hit]), k), sd_sums,
                           per_prompt_sums(pair_codes, np.column_stack([np.ones_like(won), won]), k)])

    def margin(s: np.ndarray) -> np.ndarray:
        return s[..., 1] / s[..., 0] / _sd_from_sums(s[..., 3], s[..., 4], s[..., 5])

    def accuracy(s: np.ndarray) -> np.ndarray:
        return s[..., 2] / s[..., 0]

    def auc_paired(s: np.ndarray) -> np.ndarray:
        return s[..., 7] / s[..., 6]

    if weights is None:
        weights = resample_weights(k, n_boot, np.random.default_rng(rng))
    n_prompts = int(len(np.unique(codes)))
    out: dict[str, Any] = {}
    for name, fn in (("margin_sd", margin), ("accuracy", accuracy), ("auc_paired", auc_paired)):
        est, boot = bootstrap_stat(per, fn, weights)
        out[name] = summarize(est, boot, n_prompts, weights.shape[0])
        if boot_out is not None:
            boot_out[name] = boot
    # positives: the own-prompt scores of the responses that were transplanted
    audited = original.merge(agg[KEY], on=KEY)
    est, boot = auc_weighted(audited["score"].to_numpy(float), _prompt_codes(audited["prompt_id"].to_numpy(), prompts),
                             wrong["score"].to_numpy(float), _prompt_codes(wrong["prompt_id"].to_numpy(), prompts),
                             weights)
    out["auc"] = summarize(est, boot, n_prompts, weights.shape[0])
    if boot_out is not None:
        boot_out["auc"] = boot
    out["n_responses"] = len(m)
    out["n_donors_mean"] = float(m["size"].mean()) if len(m) else 0.0
    return out


def fixed_reply_match(original: pd.DataFrame, own: pd.DataFrame, donors: pd.DataFrame, *, n_boot: int = N_BOOT,
                      rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """One fixed reply under each prompt (``own``: the prompt-only rows) against the same reply under
    the prompt's donors (``donors``): margin in SDs of the ``original`` scores, match accuracy with
    its chance level 1 / (donors + 1), ``auc`` and ``auc_paired``."""
    out = transplant(own, donors, n_boot=n_boot, rng=rng, scale=original)
    sizes = donors.groupby(KEY, sort=False).size().to_numpy(float)
    out["chance_accuracy"] = float(np.mean(1.0 / (sizes + 1.0))) if len(sizes) else float("nan")
    out["n_prompts"] = out.pop("n_responses")
    return out


def shift(original: pd.DataFrame, perturbed: pd.DataFrame, *, n_boot: int = N_BOOT,
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


def pearson_from_sums(s: np.ndarray) -> np.ndarray:
    """Pearson's r from the sums along the last axis (n, Σx, Σy, Σx², Σy², Σxy):
    r = (Σxy − ΣxΣy/n) / sqrt((Σx² − (Σx)²/n)(Σy² − (Σy)²/n))."""
    n, sx, sy, qx, qy, sxy = (s[..., i] for i in range(6))
    cov = sxy - sx * sy / n
    return cov / np.sqrt((qx - sx * sx / n) * (qy - sy * sy / n))


def prompt_only(original: pd.DataFrame, prompt_only_scores: pd.DataFrame, *, n_boot: int = N_BOOT,
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
    est, boot = bootstrap_stat(per, pearson_from_sums, w)
    return summarize(est, boot, k, n_boot)
