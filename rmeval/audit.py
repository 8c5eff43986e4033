"""Assemble the audit of one reward model from its scores table and the human ratings.

Everything here is cheap numpy/scipy on a scores table; no model is touched. A condition that was
not scored is ABSENT from the audit (never reported as zero or NaN), so a downstream reader can
tell "not measured" from "measured as nothing".
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from rmtrain.errors import DataError

from .stats.pairwise import pairwise_accuracy
from .stats.regression import sibling_regression
from .stats.selection import top_selection
from .stats.share import residual_share, share
from .stats.transplant import prompt_only, shift, transplant
from .tables import (
    TRANSPLANT_KINDS,
    condition_names,
    validate_preferences,
    validate_ratings,
    validate_scores,
)

# A fixed stream per statistic: adding or removing one condition never changes another's interval.
_STREAMS = {name: i for i, name in enumerate(
    ["share.original", "share.single_turn", "share.generic", "share.ranks", "share.log_length",
     "share.human", "prompt_only", *[f"transplant.{k}" for k in TRANSPLANT_KINDS], "paraphrase",
     "last_turn", "sibling_regression", "selection", "pairwise"])}


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[name]])


def compute_audit(scores: pd.DataFrame, ratings: pd.DataFrame, *, preferences: pd.DataFrame | None = None,
                  attribute: str = "helpfulness", n_boot: int = 2000, n_boot_regression: int = 5000,
                  seed: int = 0, top_fraction: float = 0.3) -> dict[str, Any]:
    """The audit as a nested dict (see module docs of rmeval.stats.* for each definition)."""
    t0 = time.perf_counter()
    ratings = validate_ratings(ratings, attribute=attribute)
    scores = validate_scores(scores, ratings)
    present = [c for c in condition_names() if (scores["condition"] == c).any()]
    by_cond = {c: g for c, g in scores.groupby("condition", sort=False)}
    audit: dict[str, Any] = {}

    rcols = ["prompt_id", "response_id", attribute] + [c for c in ("single_turn", "response_length")
                                                         if c in ratings.columns]
    orig = None
    if "original" in by_cond:
        orig = by_cond["original"].merge(ratings[rcols], on=["prompt_id", "response_id"], how="left")

    # -- between-prompt variance shares ----------------------------------------------------------
    sh: dict[str, Any] = {}
    if orig is not None:
        s, g = orig["score"].to_numpy(float), orig["prompt_id"].to_numpy()
        sh["original"] = share(s, g, n_boot=n_boot, rng=_rng(seed, "share.original"))
        if "single_turn" in orig.columns and orig["single_turn"].any():
            m = orig["single_turn"].to_numpy(bool)
            sh["single_turn"] = share(s[m], g[m], n_boot=n_boot, rng=_rng(seed, "share.single_turn"))
    if "generic" in by_cond:
        gen = by_cond["generic"]
        sh["generic"] = share(gen["score"].to_numpy(float), gen["prompt_id"].to_numpy(), n_boot=n_boot,
                              rng=_rng(seed, "share.generic"))
    if orig is not None:
        # pooled ranks: the share without the influence of a few extreme scores. Ranks are taken once
        # on the full sample; a resample only duplicates prompts, so the order they encode is kept.
        sh["ranks"] = share(rankdata(s), g, n_boot=n_boot, rng=_rng(seed, "share.ranks"))
        if "response_length" in orig.columns and np.isfinite(orig["response_length"]).any():
            length = orig["response_length"].to_numpy(float)
            log_len = np.full(len(length), np.nan)  # empty responses (length 0) have no log length
            log_len[length > 0] = np.log(length[length > 0])
            sh["log_length"] = residual_share(s, log_len, g, n_boot=n_boot, rng=_rng(seed, "share.log_length"))
            sh["log_length"]["n_zero_length"] = int((length == 0).sum())
        human_src = orig
    else:
        human_src = ratings
    sh["human"] = share(human_src[attribute].to_numpy(float), human_src["prompt_id"].to_numpy(),
                        n_boot=n_boot, rng=_rng(seed, "share.human"))
    sh["human"]["attribute"] = attribute
    audit["share"] = sh

    if orig is not None:
        o = orig[["prompt_id", "response_id", "score"]]
        if "prompt_only" in by_cond:
            audit["prompt_only"] = prompt_only(o, by_cond["prompt_only"], n_boot=n_boot,
                                               rng=_rng(seed, "prompt_only"))
        tr = {k: transplant(o, by_cond[k], n_boot=n_boot, rng=_rng(seed, f"transplant.{k}"))
              for k in TRANSPLANT_KINDS if k in by_cond}
        if tr:
            audit["transplant"] = tr
        for cond in ("paraphrase", "last_turn"):
            if cond in by_cond:
                audit[cond] = shift(o, by_cond[cond], n_boot=n_boot, rng=_rng(seed, cond))
        h = orig[attribute].to_numpy(float)
        reg = sibling_regression(s, h, g, n_boot=n_boot_regression, rng=_rng(seed, "sibling_regression"))
        if reg:
            reg["attribute"] = attribute
            audit["sibling_regression"] = reg
        sel = top_selection(s, h, g, top_fraction=top_fraction, n_boot=n_boot, rng=_rng(seed, "selection"))
        if sel:
            sel["top_fraction"] = top_fraction
            sel["attribute"] = attribute
            audit["selection"] = sel
        if preferences is not None:
            prefs = validate_preferences(preferences)
            audit["pairwise"] = pairwise_accuracy(prefs, o, n_boot=n_boot, rng=_rng(seed, "pairwise"))
    elif preferences is not None:
        raise DataError("pairwise accuracy needs original-condition scores", field="condition")

    audit["meta"] = {
        "n_prompts": int(scores["prompt_id"].nunique()),
        "n_responses": int(len(orig)) if orig is not None else 0,
        "n_rated_responses": int(len(ratings)),
        "conditions": present,
        "attribute": attribute,
        "n_boot": int(n_boot),
        "n_boot_regression": int(n_boot_regression),
        "seed": int(seed),
        "top_fraction": float(top_fraction),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return audit
