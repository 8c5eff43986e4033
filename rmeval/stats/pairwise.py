"""Pairwise preference accuracy (RewardBench / RM-Bench style).

A pair is right when score(chosen) > score(rejected); a tie counts 0.5 (a reward model that
cannot separate the pair is at chance, not wrong).

RM-Bench style matrix: rows = chosen style 0..2 (concise, detailed plain, detailed markdown), columns
= rejected style 0..2; each cell is the accuracy over pairs with that style combination. Following
the RM-Bench repository's ``compute_accuracy`` (THU-KEG/RM-Bench, README.md / scripts):
``hard_acc = sum(np.triu(acc_matrix, 1)) / 3`` -- the upper-right triangle, chosen LESS styled than
rejected (chosen_style < rejected_style); ``normal_acc = mean(diag)``; ``easy_acc =
sum(np.tril(acc_matrix, -1)) / 3`` -- the lower-left triangle, chosen MORE styled than rejected.
(RM-Bench counts a tie as wrong; we count 0.5, consistently with the rest of the audit.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from rmtrain.errors import DataError

from .bootstrap import bootstrap_stat, group_codes, per_prompt_sums, resample_weights, summarize

N_STYLES = 3
_UPPER = np.triu_indices(N_STYLES, 1)
_LOWER = np.tril_indices(N_STYLES, -1)


def pair_outcomes(preferences: pd.DataFrame, scores: pd.DataFrame) -> np.ndarray:
    """1 / 0.5 / 0 per preference row; ``scores`` has prompt_id, response_id, score."""
    lookup = {(str(p), str(r)): float(v) for p, r, v in
              zip(scores["prompt_id"], scores["response_id"], scores["score"])}
    out = np.empty(len(preferences))
    for i, (p, c, r) in enumerate(zip(preferences["prompt_id"], preferences["chosen_id"],
                                      preferences["rejected_id"])):
        sc = lookup.get((str(p), str(c)))
        if sc is None:
            raise DataError(f"no score for chosen response '{c}' of prompt '{p}'", row=i, field="chosen_id")
        sr = lookup.get((str(p), str(r)))
        if sr is None:
            raise DataError(f"no score for rejected response '{r}' of prompt '{p}'", row=i,
                            field="rejected_id")
        out[i] = 1.0 if sc > sr else (0.5 if sc == sr else 0.0)
    return out


def accuracy_matrix(chosen_style: np.ndarray, rejected_style: np.ndarray, correct: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(3x3 accuracy with NaN for empty cells, 3x3 pair counts)."""
    cnt = np.zeros((N_STYLES, N_STYLES))
    hit = np.zeros((N_STYLES, N_STYLES))
    np.add.at(cnt, (chosen_style, rejected_style), 1.0)
    np.add.at(hit, (chosen_style, rejected_style), correct)
    with np.errstate(divide="ignore", invalid="ignore"):
        return hit / cnt, cnt


def hard_normal_easy(acc: np.ndarray) -> dict[str, float]:
    """RM-Bench summary of a 3x3 matrix (empty cells ignored)."""
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            hard = float(np.nanmean(acc[_UPPER]))
            normal = float(np.nanmean(np.diag(acc)))
            easy = float(np.nanmean(acc[_LOWER]))
    return {"hard": hard, "normal": normal, "easy": easy}


def _bootstrap_acc(codes: np.ndarray, correct: np.ndarray, k: int, w: np.ndarray,
                   mask: np.ndarray | None = None) -> dict[str, Any]:
    m = np.ones_like(correct, dtype=bool) if mask is None else mask
    per = per_prompt_sums(codes[m], np.column_stack([np.ones(m.sum()), correct[m]]), k)
    est, boot = bootstrap_stat(per, lambda s: s[..., 1] / s[..., 0], w)
    return summarize(est, boot, int(len(np.unique(codes[m]))), w.shape[0], n_pairs=int(m.sum()))


def _rmbench_stat(which: str) -> Callable[[np.ndarray], np.ndarray]:
    def stat(s: np.ndarray) -> np.ndarray:
        cnt = s[..., :9].reshape(s.shape[:-1] + (N_STYLES, N_STYLES))
        hit = s[..., 9:].reshape(s.shape[:-1] + (N_STYLES, N_STYLES))
        acc = hit / cnt
        if which == "hard":
            cells = acc[..., _UPPER[0], _UPPER[1]]
        elif which == "easy":
            cells = acc[..., _LOWER[0], _LOWER[1]]
        elif which == "normal":
            cells = np.diagonal(acc, axis1=-2, axis2=-1)
        else:  # average of hard, normal, easy
            return (stat_h(s) + stat_n(s) + stat_e(s)) / 3.0
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(cells, axis=-1)
    return stat


stat_h, stat_n, stat_e = _rmbench_stat("hard"), _rmbench_stat("normal"), _rmbench_stat("easy")


def pairwise_accuracy(preferences: pd.DataFrame, scores: pd.DataFrame, *, n_boot: int = 2000,
                      rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """accuracy (+ by_subset, by_section, rmbench matrix where the columns exist), bootstrapped
    over prompts."""
    correct = pair_outcomes(preferences, scores)
    codes, uniq = group_codes(preferences["prompt_id"].astype(str).to_numpy())
    k = len(uniq)
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    out: dict[str, Any] = {"accuracy": _bootstrap_acc(codes, correct, k, w)}
    for col, key in (("subset", "by_subset"), ("section", "by_section")):
        if col in preferences.columns and preferences[col].notna().any():
            vals = preferences[col].astype(object).where(preferences[col].notna(), None).to_numpy()
            out[key] = {str(v): _bootstrap_acc(codes, correct, k, w, vals == v)
                        for v in sorted({x for x in vals if x is not None}, key=str)}
    if {"chosen_style", "rejected_style"} <= set(preferences.columns):
        cs = pd.to_numeric(preferences["chosen_style"], errors="coerce").to_numpy()
        rs = pd.to_numeric(preferences["rejected_style"], errors="coerce").to_numpy()
        m = np.isfinite(cs) & np.isfinite(rs)
        if m.any():
            ci, ri = cs[m].astype(int), rs[m].astype(int)
            if ci.min() < 0 or ri.min() < 0 or ci.max() >= N_STYLES or ri.max() >= N_STYLES:
                raise DataError("style levels must be 0, 1 or 2", field="chosen_style/rejected_style")
            acc, cnt = accuracy_matrix(ci, ri, correct[m])
            cell = ci * N_STYLES + ri
            onehot = np.zeros((m.sum(), 2 * N_STYLES * N_STYLES))
            onehot[np.arange(m.sum()), cell] = 1.0
            onehot[np.arange(m.sum()), 9 + cell] = correct[m]
            per = per_prompt_sums(codes[m], onehot, k)
            rb: dict[str, Any] = {
                "matrix": [[None if not np.isfinite(v) else float(v) for v in row] for row in acc],
                "counts": cnt.astype(int).tolist(),
            }
            n_prompts = int(len(np.unique(codes[m])))
            for name, fn in (("hard", stat_h), ("normal", stat_n), ("easy", stat_e),
                             ("average", _rmbench_stat("average"))):
                est, boot = bootstrap_stat(per, fn, w)
                rb[name] = summarize(est, boot, n_prompts, n_boot)
            out["rmbench"] = rb
    return out
