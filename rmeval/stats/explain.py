"""What explains the prompt-level variance of a reward (the study's appendix "Feature probes and
variance decomposition", Tables 12-13). Pure numpy/scipy/scikit-learn on tables: the texts were
turned into features beforehand (``rmeval.audit.features``).

Variance components (``rmcore.data.variance``): sigma_b^2 (between prompts) and sigma_w^2 (within) of
the one-way random-effects model; the share is sigma_b^2 / (sigma_b^2 + sigma_w^2). For a reward
s and what is left of it after an adjustment, the residual e::

    between_removed = 1 - sigma_b^2(e) / sigma_b^2(s)      within_removed = 1 - sigma_w^2(e) / sigma_w^2(s)
    share_change    = share(e) - share(s)

so an adjustment that removes within-prompt variance faster than between-prompt variance RAISES
the share while taking part of the prompt level away (the study's log-length and ratings rows).

Sections (each present when its inputs are):

* ``calibrated``: the reward linearly calibrated to the rating (ridge, cross-fitted over five
  grouped folds with the penalty chosen inside each fold; ``rmeval.stats.probes``), in rating
  units: its between-prompt variance beside the rating's on the same responses (and the paired
  difference), its share, and the calibration's R^2 (the share of rating variance it explains).
* ``rating_residuals``: the reward residualised by OLS on the shown response's ratings --
  complexity and verbosity; every rated attribute -- and, with response lengths, on log length:
  the share that remains and the between/within variance removed.
* ``response_probes``: each learner (ridge, kernel ridge, boosted trees, MLP) from the response's
  sentence embeddings and text features to the reward, cross-fitted by prompt: R^2 and the
  residual's share and removed variances; above 5,000 training rows the kernel ridge is its
  Nystroem approximation, recorded in its ``approximation`` (``rmeval.stats.probes``).
* ``prompt_probe``: ridge from a prompt-level feature block to the prompt's mean reward (over its
  responses), cross-fitted by prompt, and fitted in sample: blocks ``embedding`` (the prompt's
  sentence embedding), ``length_turns`` (log word count and turn count alone) and ``hidden_state``
  (a base model's last-token state). ``residual_share``: the share of the reward after the
  cross-fitted prompt-level prediction is subtracted from each of the prompt's responses.
* ``crossed``: the crossed decomposition of the transplant scores (``rmeval.stats.crossed``).

Folds are grouped by the normalised first turn (the prompts table's ``first_turn_group``) where
it is given. Intervals are prompt bootstraps that hold the calibration, residuals and predictions
fixed (conditional on the fitted transformation); the crossed fit is refitted in every resample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.variance import components_from_sums, icc_from_sums, icc_sufficient

from .bootstrap import PromptSetResamples, bootstrap_stat, rows_with_siblings, summarize
from .crossed import crossed_decomposition
from .probes import (
    LEARNERS,
    crossfit_predict,
    crossfit_predictions,
    in_sample_predict,
    kernel_approximation,
    probe_r2,
)

RESIDUAL_SETS = {"complexity_verbosity": ("complexity", "verbosity")}
EMBEDDING_PREFIX, TEXT_PREFIX = "emb_", "txt_"  # response features: sentence embeddings, text features
PROMPT_EMBEDDING_PREFIX, HIDDEN_PREFIX = "pemb_", "hid_"  # prompt features: embedding, base-model state


def _adjusted(y: np.ndarray, e: np.ndarray, codes: np.ndarray, k: int, w: np.ndarray) -> dict[str, Any]:
    """Share of the residual e, its change from y's, and the between/within variance removed (paired)."""
    per = np.column_stack([icc_sufficient(y, codes, k), icc_sufficient(e, codes, k)])

    def removed(part: int) -> Any:
        return lambda s: 1.0 - components_from_sums(s[..., 6:])[part] / components_from_sums(s[..., :6])[part]

    stats = {"share": lambda s: icc_from_sums(s[..., 6:]),
             "share_change": lambda s: icc_from_sums(s[..., 6:]) - icc_from_sums(s[..., :6]),
             "between_removed": removed(0), "within_removed": removed(1)}
    out = {}
    for name, fn in stats.items():
        est, boot = bootstrap_stat(per, fn, w)
        out[name] = summarize(est, boot, k, w.shape[0])
    return out


def _fold_groups(prompt_ids: np.ndarray, prompts: pd.DataFrame | None) -> np.ndarray:
    """The cross-fitting group of each row: its prompt's first-turn group, else the prompt."""
    if prompts is None or "first_turn_group" not in prompts.columns:
        return np.asarray(prompt_ids).astype(str)
    groups = dict(zip(prompts["prompt_id"].astype(str), prompts["first_turn_group"].astype(str)))
    return np.array([groups.get(str(p), "p:" + str(p)) for p in prompt_ids])


def _columns(frame: pd.DataFrame | None, *prefixes: str) -> list[str]:
    if frame is None:
        return []
    return [c for c in frame.columns if c.startswith(prefixes)]


def calibrated(orig: pd.DataFrame, attribute: str, prompts: pd.DataFrame | None, resamples: PromptSetResamples,
               seed: int) -> dict[str, Any]:
    """The ``calibrated`` section (module doc)."""
    (ids, s, h), codes, k, _, pids = rows_with_siblings(
        orig["prompt_id"].to_numpy(), np.arange(len(orig), dtype=float), orig["score"].to_numpy(float),
        orig[attribute].to_numpy(float), return_prompts=True)
    folds = _fold_groups(orig["prompt_id"].to_numpy()[ids.astype(int)], prompts)
    if k < 4 or len(np.unique(folds)) < 2:
        return {}
    cal = crossfit_predict("ridge", s[:, None], h, folds, seed=seed)
    w = resamples.weights(pids)
    per = np.column_stack([icc_sufficient(cal, codes, k), icc_sufficient(h, codes, k)])
    stats = {"between_variance": lambda x: components_from_sums(x[..., :6])[0],
             "human_between_variance": lambda x: components_from_sums(x[..., 6:])[0],
             "difference": lambda x: components_from_sums(x[..., :6])[0] - components_from_sums(x[..., 6:])[0],
             "share": lambda x: icc_from_sums(x[..., :6]), "human_share": lambda x: icc_from_sums(x[..., 6:])}
    out: dict[str, Any] = {}
    for name, fn in stats.items():
        est, boot = bootstrap_stat(per, fn, w)
        out[name] = summarize(est, boot, k, w.shape[0])
    out["r2"] = probe_r2(h, cal, codes, k, w)
    out.update(attribute=attribute, n_responses=int(len(s)), n_fold_groups=int(len(np.unique(folds))))
    return out


def rating_residuals(orig: pd.DataFrame, attributes: list[str], resamples: PromptSetResamples) -> dict[str, Any]:
    """The ``rating_residuals`` section: OLS residuals on each covariate set (module doc)."""
    sets: dict[str, list[str]] = {n: list(c) for n, c in RESIDUAL_SETS.items() if set(c) <= set(attributes)}
    if len(attributes) > 1:
        sets["all_ratings"] = list(attributes)
    out: dict[str, Any] = {}
    covs = {n: orig[c].to_numpy(float) for n, c in sets.items()}
    if "response_length" in orig.columns:
        length = orig["response_length"].to_numpy(float)
        covs["log_length"] = np.where(length > 0, np.log(np.where(length > 0, length, 1.0)), np.nan)[:, None]
        sets["log_length"] = ["log response length"]
    for name, x in covs.items():
        (s, *xs), codes, k, _, pids = rows_with_siblings(orig["prompt_id"].to_numpy(), orig["score"].to_numpy(float),
                                                         *x.T, return_prompts=True)
        if k < 2:
            continue
        design = np.column_stack([np.ones_like(s), *xs])
        resid = s - design @ np.linalg.lstsq(design, s, rcond=None)[0]
        out[name] = _adjusted(s, resid, codes, k, resamples.weights(pids))
        out[name]["covariates"] = sets[name]
        out[name]["n_responses"] = int(len(s))
    return out


def response_probes(orig: pd.DataFrame, features: pd.DataFrame, prompts: pd.DataFrame | None,
                    resamples: PromptSetResamples, *, learners: tuple[str, ...] = LEARNERS,
                    seed: int = 0, jobs: int = 1) -> dict[str, Any]:
    """The ``response_probes`` section (module doc); ``jobs``: worker processes for the learners'
    fits (``rmeval.stats.probes.crossfit_predictions``; the same predictions with any number)."""
    cols = _columns(features, EMBEDDING_PREFIX, TEXT_PREFIX)
    if not cols:
        return {}
    f = features.assign(prompt_id=features["prompt_id"].astype(str), response_id=features["response_id"].astype(str))
    m = orig.assign(prompt_id=orig["prompt_id"].astype(str), response_id=orig["response_id"].astype(str)).merge(
        f[["prompt_id", "response_id", *cols]], on=["prompt_id", "response_id"], how="inner")
    x_all = m[cols].to_numpy(float)
    ok = np.isfinite(x_all).all(axis=1)
    (ids, s), codes, k, _, pids = rows_with_siblings(m["prompt_id"].to_numpy()[ok],
                                                     np.flatnonzero(ok).astype(float), m["score"].to_numpy(float)[ok],
                                                     return_prompts=True)
    rows = ids.astype(int)
    folds = _fold_groups(m["prompt_id"].to_numpy()[rows], prompts)
    if k < 4 or len(np.unique(folds)) < 2:
        return {}
    x = x_all[rows]
    w = resamples.weights(pids)
    out: dict[str, Any] = {}
    preds = crossfit_predictions(learners, x, s, folds, seed=seed, jobs=jobs)
    for name in learners:
        pred = preds[name]
        res = _adjusted(s, s - pred, codes, k, w)
        res["r2"] = probe_r2(s, pred, codes, k, w)
        approx = kernel_approximation(folds) if name == "kernel_ridge" else None
        if approx:
            res["approximation"] = approx
        out[name] = res
    out.update(n_features=len(cols), n_embedding=sum(c.startswith(EMBEDDING_PREFIX) for c in cols),
               n_text_features=sum(c.startswith(TEXT_PREFIX) for c in cols), n_responses=int(len(s)))
    return out


def prompt_probe(orig: pd.DataFrame, prompts: pd.DataFrame | None, prompt_features: pd.DataFrame | None,
                 resamples: PromptSetResamples, *, seed: int = 0) -> dict[str, Any]:
    """The ``prompt_probe`` section (module doc)."""
    (s,), codes, k, _, pids = rows_with_siblings(orig["prompt_id"].to_numpy(), orig["score"].to_numpy(float),
                                                 return_prompts=True)
    if k < 10:
        return {}
    pids = np.asarray([str(p) for p in pids])
    mean = np.bincount(codes, weights=s, minlength=k) / np.bincount(codes, minlength=k)
    blocks: dict[str, np.ndarray] = {}
    if prompts is not None and {"prompt_words", "turns"} <= set(prompts.columns):
        p = prompts.assign(prompt_id=prompts["prompt_id"].astype(str)).set_index("prompt_id").reindex(pids)
        blocks["length_turns"] = np.column_stack([np.log1p(p["prompt_words"].to_numpy(float)),
                                                  p["turns"].to_numpy(float)])
    if prompt_features is not None:
        pf = prompt_features.assign(prompt_id=prompt_features["prompt_id"].astype(str)).set_index("prompt_id")
        pf = pf.reindex(pids)
        for name, prefix in (("embedding", PROMPT_EMBEDDING_PREFIX), ("hidden_state", HIDDEN_PREFIX)):
            cols = [c for c in pf.columns if c.startswith(prefix)]
            if cols:
                blocks[name] = pf[cols].to_numpy(float)
    folds = _fold_groups(pids, prompts)
    if len(np.unique(folds)) < 2:
        return {}
    w = resamples.weights(pids)
    one = np.arange(k)  # prompt-level rows: each prompt its own code
    out: dict[str, Any] = {}
    for name, x in blocks.items():
        ok = np.isfinite(x).all(axis=1)
        if ok.sum() < 10 or not ok.all():
            continue  # a prompt without features: the block is left out rather than fitted on a subset
        pred = crossfit_predict("ridge", x, mean, folds, seed=seed)
        fitted = in_sample_predict("ridge", x, mean, folds, seed=seed)
        res = {"r2": probe_r2(mean, pred, one, k, w), "r2_in_sample": probe_r2(mean, fitted, one, k, w)}
        resid = s - pred[codes]
        res.update(_adjusted(s, resid, codes, k, w))
        res["residual_share"] = res.pop("share")
        res["n_features"] = int(x.shape[1])
        out[name] = res
    if out:
        out["n_prompts"] = int(k)
        out["n_fold_groups"] = int(len(np.unique(folds)))
    return out


def variance_explained(frames: dict[str, pd.DataFrame], by_cond: dict[str, pd.DataFrame], attribute: str | None,
                       attributes: list[str], resamples: PromptSetResamples, *, prompts: pd.DataFrame | None = None,
                       features: pd.DataFrame | None = None, prompt_features: pd.DataFrame | None = None,
                       learners: tuple[str, ...] = LEARNERS, seed: int = 0, jobs: int = 1) -> dict[str, Any]:
    """The ``variance_explained`` section (module doc). ``frames["original"]``: one row per response
    with its score and ratings; ``by_cond``: the scores table by condition (for the crossed fit);
    ``jobs``: worker processes for the response probes."""
    orig = frames["original"]
    out: dict[str, Any] = {}
    if attribute is not None:
        cal = calibrated(orig, attribute, prompts, resamples, seed)
        if cal:
            out["calibrated"] = cal
        res = rating_residuals(orig, attributes, resamples)
        if res:
            out["rating_residuals"] = res
    if features is not None:
        rp = response_probes(orig, features, prompts, resamples, learners=learners, seed=seed, jobs=jobs)
        if rp:
            out["response_probes"] = rp
    pp = prompt_probe(orig, prompts, prompt_features, resamples, seed=seed)
    if pp:
        out["prompt_probe"] = pp
    if "random" in by_cond:
        o = by_cond["original"]
        pids = np.asarray(pd.unique(o["prompt_id"].astype(str)))
        o = o.assign(prompt_id=o["prompt_id"].astype(str))
        cr = crossed_decomposition(o, by_cond["random"], by_cond.get("generic"), resamples.weights(pids), pids)
        if cr:
            out["crossed"] = cr
    if out and prompts is not None and "first_turn_group" in prompts.columns:
        out["fold_grouping"] = "first turn"
    elif out:
        out["fold_grouping"] = "prompt"
    return out
