"""Model-side prompt splits: does the score move with the kind of prompt (the study's Table 27)?

The prompts are cut into two halves, A and B, fixed once on the full sample (not per resample).
A split is made on the prompts it analyses -- those of the subset that have scores (and, with a
rated attribute, ratings) for at least two responses in the analysed condition -- never on the
whole prompts table, whose unscored prompts would otherwise move the cut (100 unscored long
prompts turned a 150/150 split into 200/100):

* ``length``: A = the prompts whose word count (every turn of the conversation) is above the
  median of the analysed prompts' word counts, B = the rest (the human side's rule,
  ``rmeval.audit.human``). On a subset (single-turn prompts) the median is the subset's.
* ``topic_1``, ``topic_2``: two balanced topic splits. The first user turns are clustered by a
  20-cluster TF-IDF k-means (``rmeval.audit.features.prompt_table`` writes each prompt's cluster); the
  clusters (all of the table's, so the order does not depend on which are analysed) are taken in a
  seeded random order and each goes to the half that has fewer analysed prompts so far, so the
  halves differ by at most one cluster's size and no topic is cut in two.

For each split, on all prompts and on single-turn prompts, under the original and the generic
prompt (a response scored under "Please respond.", grouped by its own prompt):

    difference = (mean score on A - mean score on B) / SD(scores)      (SD of the subset, per resample)

the same for the human rating, and model minus human (the study: the model's difference exceeds
the humans'); the between-prompt share on each half and A - B; the random-transplant margin on
each half (in SDs of the subset's original scores) and A - B. Every figure is bootstrapped over
the subset's prompts with ONE resample matrix, so the differences are paired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.variance import icc_from_sums, icc_sufficient

from .bootstrap import PromptSetResamples, bootstrap_stat, per_prompt_sums, rows_with_siblings, summarize

HALVES = {"length": ("longer", "shorter"), "topic_1": ("topic half 1", "topic half 2"),
          "topic_2": ("topic half 1", "topic half 2")}
N_TOPIC_SPLITS = 2


# -- the shared core: a mean difference between two halves, from per-prompt sums ----------------

def split_sums(values: np.ndarray, codes: np.ndarray, k: int, in_a: np.ndarray) -> np.ndarray:
    """(k, 7) per-prompt sums [n_A, sum_A y, n_B, sum_B y, n, sum y, sum y^2] (y centred) of
    ``values`` whose prompt (``codes``) lies in half A (``in_a``, one bool per row)."""
    a = np.asarray(in_a, dtype=float)
    y = values - values.mean()
    return per_prompt_sums(codes, np.column_stack([a, a * y, 1 - a, (1 - a) * y, np.ones_like(y), y, y * y]), k)


def split_points(s: np.ndarray) -> np.ndarray:
    """Mean on A minus mean on B, in the values' own units."""
    return s[..., 1] / s[..., 0] - s[..., 3] / s[..., 2]


def split_in_sd(s: np.ndarray) -> np.ndarray:
    """The difference in SDs of the values (all rows of both halves)."""
    n, sy, qy = s[..., 4], s[..., 5], s[..., 6]
    return split_points(s) / np.sqrt((qy - sy * sy / n) / (n - 1))


def above_median(feature: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """Per prompt: its feature (the mean over its rows; constant within a prompt) above the median prompt's."""
    per = np.bincount(codes, weights=feature, minlength=k) / np.bincount(codes, minlength=k)
    return per > np.median(per)


def balanced_halves(clusters: np.ndarray, seed: int, split: int = 1, counted: np.ndarray | None = None) -> np.ndarray:
    """One bool per prompt: True for half A of a balanced assignment of whole clusters (module doc).
    ``split`` numbers the assignment (each draws its own cluster order); ``counted`` (one bool per
    prompt, default all): the prompts whose number each half balances -- the order of the clusters
    is drawn over all of them either way."""
    clusters = np.asarray(clusters)
    labels, codes = np.unique(clusters, return_inverse=True)
    sizes = np.bincount(codes, weights=None if counted is None else np.asarray(counted, dtype=float),
                        minlength=len(labels))
    order = np.random.default_rng([seed, 0x70C, split]).permutation(len(labels))
    n_a = n_b = 0
    half_a = set()
    for i in order:
        if n_a <= n_b:
            half_a.add(labels[i])
            n_a += sizes[i]
        else:
            n_b += sizes[i]
    return np.isin(clusters, list(half_a))


# -- the audit section ------------------------------------------------------------------------------

def _margin_rows(original: pd.DataFrame, wrong: pd.DataFrame | None) -> pd.Series | None:
    """Per response (index prompt_id, response_id): own score minus mean wrong-prompt score."""
    if wrong is None:
        return None
    key = ["prompt_id", "response_id"]
    w = wrong.assign(prompt_id=wrong["prompt_id"].astype(str), response_id=wrong["response_id"].astype(str))
    o = original.assign(prompt_id=original["prompt_id"].astype(str), response_id=original["response_id"].astype(str))
    mean = w.groupby(key, sort=False)["score"].mean()
    own = o.set_index(key)["score"]
    return (own - mean).dropna()


SplitRule = Callable[[pd.Index], np.ndarray]  # the analysed prompt ids -> one bool per prompt: in half A


def _cell(frame: pd.DataFrame, attribute: str | None, rule: SplitRule, margin: pd.Series | None,
          resamples: PromptSetResamples) -> dict[str, Any]:
    """Every figure of one split on one subset and condition (module doc); ``rule`` cuts the
    prompts this cell analyses."""
    cols = [np.arange(len(frame), dtype=float), frame["score"].to_numpy(float)]  # row numbers ride along
    if attribute is not None:
        cols.append(frame[attribute].to_numpy(float))
    kept, codes, k, _, prompts = rows_with_siblings(frame["prompt_id"].to_numpy(), *cols, return_prompts=True)
    if k < 4:
        return {}
    a_prompt = np.asarray(rule(pd.Index([str(p) for p in prompts])), dtype=bool)
    if a_prompt.all() or not a_prompt.any():
        return {}
    in_a = a_prompt[codes]
    rows, s = kept[0].astype(int), kept[1]
    blocks = {"score": split_sums(s, codes, k, in_a)}
    if attribute is not None:
        blocks["human"] = split_sums(kept[2], codes, k, in_a)
    icc = icc_sufficient(s, codes, k)
    blocks["share_a"] = icc * a_prompt[:, None]
    blocks["share_b"] = icc * (~a_prompt)[:, None]
    if margin is not None:
        ids = pd.MultiIndex.from_arrays([frame["prompt_id"].astype(str), frame["response_id"].astype(str)])
        d = margin.reindex(ids).to_numpy(float)[rows]
        has = np.isfinite(d)  # a response without transplant rows leaves the margin, not the rest
        dd = np.where(has, d, 0.0)
        blocks["margin"] = per_prompt_sums(codes, np.column_stack([has * in_a, dd * in_a, has * ~in_a,
                                                                    dd * ~in_a]), k)
    names = list(blocks)
    width = np.cumsum([0] + [blocks[n].shape[1] for n in names])
    per = np.column_stack([blocks[n] for n in names])
    at = {n: slice(width[i], width[i + 1]) for i, n in enumerate(names)}
    w = resamples.weights(prompts)

    def sd(s_: np.ndarray) -> np.ndarray:
        sc = s_[..., at["score"]]
        n, sy, qy = sc[..., 4], sc[..., 5], sc[..., 6]
        return np.sqrt((qy - sy * sy / n) / (n - 1))

    stats: dict[str, Any] = {
        "score_difference": lambda s_: split_in_sd(s_[..., at["score"]]),
        "score_difference_points": lambda s_: split_points(s_[..., at["score"]]),
        "share_a": lambda s_: icc_from_sums(s_[..., at["share_a"]]),
        "share_b": lambda s_: icc_from_sums(s_[..., at["share_b"]]),
        "share_difference": lambda s_: icc_from_sums(s_[..., at["share_a"]]) - icc_from_sums(s_[..., at["share_b"]]),
    }
    if "human" in at:
        stats["human_difference"] = lambda s_: split_in_sd(s_[..., at["human"]])
        stats["model_minus_human"] = lambda s_: split_in_sd(s_[..., at["score"]]) - split_in_sd(s_[..., at["human"]])
    if "margin" in at:
        def margin_half(s_: np.ndarray, half: int) -> np.ndarray:
            m = s_[..., at["margin"]]
            return m[..., 2 * half + 1] / m[..., 2 * half] / sd(s_)

        stats["margin_a"] = lambda s_: margin_half(s_, 0)
        stats["margin_b"] = lambda s_: margin_half(s_, 1)
        stats["margin_difference"] = lambda s_: margin_half(s_, 0) - margin_half(s_, 1)
    out: dict[str, Any] = {"n_prompts_a": int(a_prompt.sum()), "n_prompts_b": int((~a_prompt).sum())}
    for name, fn in stats.items():
        est, boot = bootstrap_stat(per, fn, w)
        out[name] = summarize(est, boot, k, w.shape[0])
    return out


def prompt_splits(frames: dict[str, pd.DataFrame], prompts: pd.DataFrame, attribute: str | None,
                  resamples: PromptSetResamples, *, wrong: pd.DataFrame | None = None,
                  seed: int = 0) -> dict[str, Any]:
    """The ``prompt_splits`` section (module doc).

    ``frames``: per condition ("original", "generic") one row per response with prompt_id,
    response_id, score and, with ``attribute``, the rating. ``prompts``: one row per prompt with
    prompt_words, single_turn and topic (the k-means cluster). ``wrong``: the random-transplant
    rows, for the margin on each half."""
    p = prompts.assign(prompt_id=prompts["prompt_id"].astype(str)).set_index("prompt_id")
    orig = frames["original"]
    margin = _margin_rows(orig, wrong)
    single = p["single_turn"].astype(bool) if "single_turn" in p.columns else pd.Series(True, index=p.index)
    subsets = {"all": p.index}
    if single.any() and not single.all():
        subsets["single_turn"] = p.index[single.to_numpy()]
    rules: dict[str, SplitRule] = {}  # split -> the cut of the prompts a cell analyses (module doc)
    if "prompt_words" in p.columns:
        words = p["prompt_words"].astype(float)

        def longer(ids: pd.Index) -> np.ndarray:
            w = words.loc[ids].to_numpy()
            return w > np.median(w)

        rules["length"] = longer
    if "topic" in p.columns and p["topic"].nunique() >= 2:
        topics = p["topic"].to_numpy()

        def topic_half(ids: pd.Index, split: int) -> np.ndarray:
            a = balanced_halves(topics, seed, split, counted=p.index.isin(ids))
            return pd.Series(a, index=p.index).loc[ids].to_numpy()

        for i in range(1, N_TOPIC_SPLITS + 1):
            rules[f"topic_{i}"] = lambda ids, i=i: topic_half(ids, i)
    out: dict[str, Any] = {}
    for split, rule in rules.items():
        res: dict[str, Any] = {"halves": list(HALVES[split])}
        for cond in ("original", "generic"):
            if cond not in frames:
                continue
            f = frames[cond]
            f = f.assign(prompt_id=f["prompt_id"].astype(str))
            for subset, ids in subsets.items():
                sub = f[f["prompt_id"].isin(ids)]
                cell = _cell(sub, attribute, rule, margin if cond == "original" else None, resamples)
                if cell:
                    res[subset if cond == "original" else f"generic_{subset}" if subset != "all" else "generic"] = cell
        if len(res) > 1:
            out[split] = res
    if out and "topic" in p.columns:
        out["n_topic_clusters"] = int(p["topic"].nunique())
    return out
