"""RewardBench 2 scores from a scores table, by the rules of allenai/reward-bench: ``scripts/run_v2.py``
(per subset), ``rewardbench/utils.py`` (``reroll_and_score_dataset``: best of N; ``_compute_prompt_stats``
and ``process_single_model``: Ties) and the RewardBench 2 paper (the overall score).

Best of N (every subset but Ties): a prompt's scores s are those of all its completions, chosen
first then rejected (the reference unrolls a row that way); c is the first chosen one. With M the
maximum of s, the prompt scores 1/|{j : s_j = M}| when s_c = M, else 0 -- right when c alone is
the best, a share of the credit when it ties for the best (so a constant reward model scores 1/N,
chance). Any other chosen completion competes like a rejected one (the reference reads only
``scores[0]``). A subset's score is the mean over its prompts.

Ties: each question q has a reference prompt (``ref:q``, one correct answer) and a tied prompt
(``tied:q``, several correct answers), each with incorrect answers. Per prompt, with C its correct
and I its incorrect scores: the correct-incorrect margin g = min C - max I; accurate = g > 0 (a
tie with an incorrect answer is wrong); the spread of the correct answers d = max C - min C (tied
prompts). Then

    Ties = 0.30 acc_tied + 0.30 acc_ref + 0.20 P(g_tied > d) + 0.20 P(min(g_ref, g_tied) > d)
           + 0.01 mean tanh(min(g_ref, g_tied) / d - 1)

acc_ref (acc_tied) the mean accuracy over all the reference (tied) prompts, paired or not; the three
other terms over the questions that have both. d = 0 gives tanh(+-inf) = +-1, and 0/0 gives NaN,
which counts 0 (``np.nan_to_num``), as in the reference. Where the reference differs only by
failing or by a 0 that cannot change the outcome: a tied prompt with a single correct answer has no
spread (the reference compares with None and raises; here NaN, its comparisons false and its tanh
term 0), and with no reference (tied) prompt acc_ref (acc_tied) is NaN here, 0 there -- the Ties
score is NaN in both, as no question has both.

The RewardBench 2 score is the unweighted mean of the subset scores present (the paper: "the final
score is an unweighted average across all six domains"; ``run_v2.py`` reports only the subsets).

Intervals: a percentile bootstrap stratified by subset (each subset's prompts -- for Ties its
questions, a reference and a tied prompt together -- resampled with replacement within it), so
every replicate keeps the benchmark's composition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmcore.errors import DataError

from .bootstrap import percentile_ci, resample_weights
from .settings import N_BOOT

TIES = "ties"
TIES_WEIGHTS = {"tied_accuracy": 0.30, "ref_accuracy": 0.30, "correctness_preferred": 0.20,
                "correctness_preferred_hard": 0.20, "correctness_margin_score": 0.01}


def _joined(table: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    lookup = {(str(p), str(r)): float(v)
              for p, r, v in zip(scores["prompt_id"], scores["response_id"], scores["score"])}
    out = table.copy()
    vals = []
    for i, (p, r) in enumerate(zip(out["prompt_id"], out["response_id"])):
        v = lookup.get((str(p), str(r)))
        if v is None:
            raise DataError(f"no score for completion '{r}' of prompt '{p}'", row=i, field="response_id")
        vals.append(v)
    out["score"] = vals
    return out


def best_of_n(table: pd.DataFrame) -> pd.DataFrame:
    """Per prompt (best-of-N subsets): prompt_id, subset, result (1/ties at the top when the first
    correct completion is among the best, else 0). ``table``: one row per completion with
    prompt_id, subset, correct, index, score."""
    rows = []
    for pid, g in table.groupby("prompt_id", sort=False):
        first = g[g["correct"] & (g["index"] == 0)]
        if len(first) != 1:
            raise DataError(f"prompt '{pid}' has no first correct completion", field="chosen")
        s = g["score"].to_numpy()
        top = s.max()
        c = float(first["score"].iloc[0])
        rows.append({"prompt_id": pid, "subset": g["subset"].iloc[0],
                     "result": 1.0 / int(np.sum(s == top)) if c == top else 0.0})
    return pd.DataFrame(rows, columns=["prompt_id", "subset", "result"])


def ties_units(table: pd.DataFrame) -> pd.DataFrame:
    """Per Ties question q: has_ref, acc_ref, g_ref, has_tied, acc_tied, g_tied, d (spread of the
    tied prompt's correct scores). ``table`` holds the Ties completions with rb2_id ref:q / tied:q."""
    per: dict[int, dict[str, float]] = {}
    for rb2_id, g in table.groupby("rb2_id", sort=False):
        kind, _, num = str(rb2_id).partition(":")
        if kind not in ("ref", "tied") or not num.isdigit():
            raise DataError(f"a Ties prompt id must be ref:N or tied:N, got {rb2_id!r}", field="id")
        c, i = g.loc[g["correct"], "score"].to_numpy(), g.loc[~g["correct"], "score"].to_numpy()
        if not len(c) or not len(i):
            raise DataError(f"Ties prompt {rb2_id!r} needs correct and incorrect completions", field="chosen")
        gap = float(c.min() - i.max())
        u = per.setdefault(int(num), {"has_ref": 0.0, "acc_ref": 0.0, "g_ref": np.nan, "has_tied": 0.0,
                                      "acc_tied": 0.0, "g_tied": np.nan, "d": np.nan})
        u[f"has_{kind}"], u[f"acc_{kind}"], u[f"g_{kind}"] = 1.0, float(gap > 0), gap
        if kind == "tied":
            u["d"] = float(c.max() - c.min()) if len(c) > 1 else np.nan
    return pd.DataFrame.from_dict(per, orient="index").sort_index()


def _ties_columns(units: pd.DataFrame) -> np.ndarray:
    """(q, 8) per-question sums the Ties score is a function of (weighted means of these columns)."""
    both = (units["has_ref"] * units["has_tied"]).to_numpy()
    g_ref, g_tied, d = units["g_ref"].to_numpy(), units["g_tied"].to_numpy(), units["d"].to_numpy()
    hard = np.minimum(g_ref, g_tied)
    with np.errstate(divide="ignore", invalid="ignore"):
        ms = np.nan_to_num(np.tanh(hard / d - 1), nan=0.0)
    with np.errstate(invalid="ignore"):
        cp, cph = (g_tied > d).astype(float), (hard > d).astype(float)
    return np.column_stack([units["has_ref"], units["acc_ref"] * units["has_ref"], units["has_tied"],
                            units["acc_tied"] * units["has_tied"], both, both * cp, both * cph,
                            np.where(both > 0, ms, 0.0)]).astype(float)


def _ties_stat(sums: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = {"ref_accuracy": sums[..., 1] / sums[..., 0], "tied_accuracy": sums[..., 3] / sums[..., 2],
                 "correctness_preferred": sums[..., 5] / sums[..., 4],
                 "correctness_preferred_hard": sums[..., 6] / sums[..., 4],
                 "correctness_margin_score": sums[..., 7] / sums[..., 4]}
    parts["score"] = sum(TIES_WEIGHTS[k] * v for k, v in parts.items())
    return parts


def rewardbench2_scores(table: pd.DataFrame, scores: pd.DataFrame, *, n_boot: int = N_BOOT,
                        rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{"subsets": {name: {estimate, ci95, n_prompts}}, "ties": components, "score": {...}} for the
    completions ``table`` (``rmcore.data.rewardbench.rewardbench2_table``) scored in ``scores``
    (prompt_id, response_id, score)."""
    rng = np.random.default_rng(rng)
    joined = _joined(table, scores)
    is_ties = joined["subset"].str.lower() == TIES
    out: dict[str, Any] = {"subsets": {}}
    est, boots = {}, {}
    per_prompt = best_of_n(joined[~is_ties]) if (~is_ties).any() else None
    for subset in sorted(set(joined.loc[~is_ties, "subset"])):
        res = per_prompt.loc[per_prompt["subset"] == subset, "result"].to_numpy()  # type: ignore[union-attr]
        w = resample_weights(len(res), n_boot, rng)
        est[subset], boots[subset] = float(res.mean()), (w @ res) / len(res)
        out["subsets"][subset] = {"estimate": est[subset], "ci95": percentile_ci(boots[subset]),
                                  "n_prompts": len(res), "n_boot": n_boot}
    if is_ties.any():
        name = joined.loc[is_ties, "subset"].iloc[0]
        units = ties_units(joined[is_ties])
        cols = _ties_columns(units)
        point = {k: float(v) for k, v in _ties_stat(cols.sum(0)).items()}
        w = resample_weights(len(units), n_boot, rng)
        boot = _ties_stat(w @ cols)
        est[name], boots[name] = point["score"], boot["score"]
        out["subsets"][name] = {"estimate": point["score"], "ci95": percentile_ci(boot["score"]),
                                "n_prompts": int(units["has_ref"].sum() + units["has_tied"].sum()),
                                "n_questions": len(units), "n_boot": n_boot}
        out["ties"] = {k: v for k, v in point.items() if k != "score"}
    names = list(est)
    out["score"] = {"estimate": float(np.mean([est[n] for n in names])),
                    "ci95": percentile_ci(np.mean([boots[n] for n in names], axis=0)),
                    "subsets": names, "n_boot": n_boot}
    return out
