"""Assemble the audit of one reward model from its scores table and the human ratings.

Everything here is numpy/scipy/scikit-learn on tables; no model is touched (the texts are
scored by ``rmeval.audit.pipeline``'s pipeline, and turned into features by ``rmeval.audit.features``, before
these statistics run on the tables written). A condition that was not scored is ABSENT from the
audit (never reported as zero or NaN), so a downstream reader can tell "not measured" from
"measured as nothing". Likewise without a rated attribute (a preference set such as RM-Bench or
HH-RLHF) every human-referenced section is absent and the model-side ones remain.

Sections beyond the shares and substitutions: ``fixed_reply`` (one fixed reply under the prompt's
donors, ``rmeval.stats.transplant.fixed_reply_match``), ``prompt_splits`` (longer vs shorter and
topic halves, ``rmeval.stats.splits``; needs the prompts table), ``variance_explained``
(calibration, rating residuals, response / prompt / hidden-state probes and the crossed
decomposition, ``rmeval.stats.explain``) and ``scoring_variants`` (the same responses scored
another way, e.g. without the end-of-sequence marker: shares and transplant figures side by side
with paired differences).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from rmcore.data.schema import table_attributes
from rmcore.errors import DataError

from ..tables import (
    TRANSPLANT_KINDS,
    condition_names,
    validate_preferences,
    validate_ratings,
    validate_scores,
)
from .bootstrap import PromptSetResamples, resample_weights, rows_with_siblings, summarize
from .centering import centering_variants
from .explain import variance_explained
from .pairwise import pairwise_accuracy
from .probes import LEARNERS, default_jobs
from .prompt_means import disjoint_half_correlation, prompt_mean_correlation
from .regression import sibling_regression
from .reliability import corrected_share
from .selection import top_selection
from .settings import StatsSettings
from .share import residual_share, share, share_pair
from .splits import prompt_splits
from .transplant import fixed_reply_match, prompt_only, shift, transplant

# A fixed stream per statistic: adding or removing one condition never changes another's interval.
_STREAMS = {name: i for i, name in enumerate(
    ["share.original", "share.single_turn", "share.generic", "share.ranks", "share.log_length",
     "share.human", "prompt_only", *[f"transplant.{k}" for k in TRANSPLANT_KINDS], "paraphrase",
     "last_turn", "sibling_regression", "selection", "pairwise",
     # added later: appended so the streams above keep their values
     "share.last_turn", "sibling_regression.generic", "share.paraphrase",
     *[f"share.{k}" for k in TRANSPLANT_KINDS],
     "sibling_regression.random", "centering",
     "fixed_reply.random", "fixed_reply.related", "scoring_variants"])}
FIXED_REPLY_KINDS = {"random": "fixed_reply_random", "related": "fixed_reply_related"}

# Like-for-like comparisons: (name, model condition, single-turn prompts only, transform).
VS_HUMAN = (("original", "original", False, "raw"), ("single_turn", "original", True, "raw"),
            ("generic", "generic", False, "raw"), ("generic_single_turn", "generic", True, "raw"),
            ("ranks", "original", False, "ranks"), ("ranks_single_turn", "original", True, "ranks"),
            ("log_length", "original", False, "log_length"), ("last_turn", "last_turn", False, "raw"),
            ("paraphrase", "paraphrase", False, "raw"), *[(k, k, False, "raw") for k in TRANSPLANT_KINDS])
# Conditions scored several times per response (variants, donors) enter a share as the response's
# mean; prompt_only has one row per prompt, so no share is defined for it.
PER_RESPONSE_SHARES = ("last_turn", "paraphrase", *TRANSPLANT_KINDS)


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[name]])


def _log_length(length: np.ndarray) -> np.ndarray:
    out = np.full(len(length), np.nan)  # empty responses (length 0) have no log length
    out[length > 0] = np.log(length[length > 0])
    return out


def _with_ratings(cond: pd.DataFrame, ratings: pd.DataFrame, rcols: list[str]) -> pd.DataFrame:
    """One row per response of a condition (score averaged over variants/donors) with its ratings."""
    per = cond.groupby(["prompt_id", "response_id"], sort=False)["score"].mean().reset_index()
    return per.merge(ratings[rcols], on=["prompt_id", "response_id"], how="left")


def _vs_human(frames: dict[str, pd.DataFrame], attribute: str, resamples: PromptSetResamples) -> dict[str, Any]:
    """Each model share beside the human share of the SAME responses under the SAME transform,
    with the paired model-minus-human difference (same prompt resamples)."""
    out: dict[str, Any] = {}
    for name, cond, single, transform in VS_HUMAN:
        df = frames.get(cond)
        if df is None:
            continue
        if single:
            if "single_turn" not in df.columns or not df["single_turn"].any() or df["single_turn"].all():
                continue  # no single-turn subset, or it is the whole set (same figure as the parent row)
            df = df[df["single_turn"].to_numpy(bool)]
        s, h, g = df["score"].to_numpy(float), df[attribute].to_numpy(float), df["prompt_id"].to_numpy()
        cov = None
        if transform == "ranks":
            s, h = rankdata(s), rankdata(h)  # ranks taken on this subset, for model and humans alike
        elif transform == "log_length":
            if "response_length" not in df.columns:
                continue
            cov = _log_length(df["response_length"].to_numpy(float))
        r = share_pair(s, h, g, covariate=cov, names=("model", "human"), resamples=resamples)
        if r:
            r.update(condition=cond, prompts="single-turn" if single else "all", transform=transform)
            out[name] = r
    return out


def _prompt_means(frames: dict[str, pd.DataFrame], attribute: str, resamples: PromptSetResamples) -> dict[str, Any]:
    """Correlations across prompts of prompt means: model vs human (whole prompt and disjoint halves,
    the humans' own halves), and generic vs original; one resample matrix per prompt set."""

    def weights(g: np.ndarray, *cols: np.ndarray) -> np.ndarray | None:
        *_, k, _, prompts = rows_with_siblings(g, *cols, return_prompts=True)
        return resamples.weights(prompts) if k >= 3 else None

    o = frames["original"]
    s, h, g = o["score"].to_numpy(float), o[attribute].to_numpy(float), o["prompt_id"].to_numpy()
    w = weights(g, s, h)
    out: dict[str, Any] = {
        "model_vs_human": prompt_mean_correlation(s, h, g, weights=w),
        "model_vs_human_disjoint": disjoint_half_correlation(s, h, g, weights=w),
        "human_disjoint": disjoint_half_correlation(h, h, g, weights=w),
    }
    if "generic" in frames:
        m = o.merge(frames["generic"][["prompt_id", "response_id", "score"]], on=["prompt_id", "response_id"],
                    suffixes=("", "_g"))
        sg, so, hg, gg = (m["score_g"].to_numpy(float), m["score"].to_numpy(float), m[attribute].to_numpy(float),
                          m["prompt_id"].to_numpy())
        wg = weights(gg, sg, so)
        out["generic_vs_original"] = prompt_mean_correlation(sg, so, gg, weights=wg)
        out["generic_vs_human"] = prompt_mean_correlation(sg, hg, gg, weights=wg)
        out["generic_vs_human_disjoint"] = disjoint_half_correlation(sg, hg, gg, weights=wg)
    out["attribute"] = attribute
    return out


def _rated_columns(ratings: pd.DataFrame, attribute: str | None) -> list[str]:
    """The numeric rated attributes of a ratings table, the audited one first."""
    cols = [c for c in table_attributes(ratings) if pd.api.types.is_numeric_dtype(ratings[c])]
    return ([attribute] if attribute else []) + [c for c in cols if c != attribute]


def _scoring_variant(o: pd.DataFrame, by_cond: dict[str, pd.DataFrame], variant: pd.DataFrame, *, n_boot: int,
                     seed: int, resamples: PromptSetResamples) -> dict[str, Any]:
    """The same responses scored another way (``variant``, a scores table): the shares and the
    transplant figures of both scorings with paired differences (same resamples)."""
    var = {c: g for c, g in variant.groupby("condition", sort=False)}
    if "original" not in var:
        return {}
    out: dict[str, Any] = {}
    for cond in ("original", "generic"):
        if cond in by_cond and cond in var:
            m = by_cond[cond].merge(var[cond][["prompt_id", "response_id", "variant", "score"]],
                                    on=["prompt_id", "response_id", "variant"], suffixes=("", "_v"))
            # a = the variant: share_pair's difference is a - b, variant minus reference like the transplant's
            r = share_pair(m["score_v"].to_numpy(float), m["score"].to_numpy(float), m["prompt_id"].to_numpy(),
                           names=("variant", "reference"), resamples=resamples)
            if r:
                out[f"share_{cond}"] = r
    vo = var["original"][["prompt_id", "response_id", "score"]]
    k = int(o["prompt_id"].nunique())
    tr: dict[str, Any] = {}
    for kind in TRANSPLANT_KINDS:
        if kind not in by_cond or kind not in var:
            continue
        w = resample_weights(k, n_boot, _rng(seed, "scoring_variants"))
        b_ref: dict[str, np.ndarray] = {}
        b_var: dict[str, np.ndarray] = {}
        ref = transplant(o, by_cond[kind], weights=w, boot_out=b_ref)
        alt = transplant(vo, var[kind], weights=w, boot_out=b_var, scale=vo)
        diff = {n: summarize(alt[n]["estimate"] - ref[n]["estimate"], b_var[n] - b_ref[n], ref[n]["n_prompts"],
                             n_boot) for n in b_ref}
        tr[kind] = {"reference": ref, "variant": alt, "difference": diff}
    if tr:
        out["transplant"] = tr
    return out


def compute_audit(scores: pd.DataFrame, ratings: pd.DataFrame, settings: StatsSettings | None = None, *,
                  preferences: pd.DataFrame | None = None, attribute: str | None = "helpfulness",
                  reference_scores: pd.DataFrame | None = None, prompts: pd.DataFrame | None = None,
                  features: pd.DataFrame | None = None, prompt_features: pd.DataFrame | None = None,
                  compare: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
    """The audit as a nested dict (see module docs of rmeval.stats.* for each definition), computed
    as ``settings`` say (``rmeval.stats.settings.StatsSettings``: resamples, seed, the human share's
    reliabilities, the probes' learners; default its defaults).

    ``attribute`` None: no rated attribute (a preference set); the human-referenced sections are
    left out. ``reference_scores``: (prompt_id, score) of an independent pool of reference responses
    scored by the same model, for the pool-centring variants. ``prompts``: the prompt table
    (``rmeval.audit.features.prompt_table``) for the prompt splits and the probes' first-turn folds;
    ``features`` / ``prompt_features``: the response and prompt features of ``rmeval.audit.features``
    for the probes. ``compare``: {name: scores table} of the same texts scored another way."""
    settings = settings or StatsSettings()
    t0 = time.perf_counter()
    ratings = validate_ratings(ratings, attribute=attribute)
    scores = validate_scores(scores, ratings)
    by_cond = {c: g for c, g in scores.groupby("condition", sort=False)}
    rated = _rated_columns(ratings, attribute)
    rcols = ["prompt_id", "response_id", *rated] + [c for c in ("single_turn", "response_length")
                                                     if c in ratings.columns]
    orig = None
    if "original" in by_cond:
        orig = by_cond["original"].merge(ratings[rcols], on=["prompt_id", "response_id"], how="left")
    audit: dict[str, Any] = {"share": _shares(orig, by_cond, ratings, attribute, settings)}
    frames = {c: _with_ratings(by_cond[c], ratings, rcols) for c in ("original", "generic", *PER_RESPONSE_SHARES)
              if c in by_cond}
    resamples = PromptSetResamples(settings.seed, settings.n_boot)  # one matrix per prompt set: paired comparisons
    audit.update(_paired_shares(frames, attribute, resamples))
    if orig is not None:
        o = orig[["prompt_id", "response_id", "score"]]
        audit.update(_model_side(o, by_cond, settings))
        if attribute is not None:
            audit.update(_against_humans(orig, frames, by_cond, attribute, resamples, settings, reference_scores))
        audit.update(_explained(orig, frames, by_cond, attribute, rated, resamples, settings, prompts=prompts,
                                features=features, prompt_features=prompt_features))
        for name, table in (compare or {}).items():
            sv = _scoring_variant(o, by_cond, validate_scores(table, ratings), n_boot=settings.n_boot,
                                  seed=settings.seed, resamples=resamples)
            if sv:
                audit.setdefault("scoring_variants", {})[name] = sv
        if preferences is not None:
            prefs = validate_preferences(preferences)
            audit["pairwise"] = pairwise_accuracy(prefs, o, n_boot=settings.n_boot,
                                                  rng=_rng(settings.seed, "pairwise"))
    elif preferences is not None:
        raise DataError("pairwise accuracy needs original-condition scores", field="condition")
    audit["meta"] = {
        "n_prompts": int(scores["prompt_id"].nunique()),
        "n_responses": int(len(orig)) if orig is not None else 0,
        "n_rated_responses": int(len(ratings)),
        "conditions": [c for c in condition_names() if (scores["condition"] == c).any()],
        "attribute": attribute,
        "n_boot": int(settings.n_boot),
        "n_boot_regression": int(settings.n_boot_regression),
        "seed": int(settings.seed),
        "top_fraction": float(settings.top_fraction),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return audit


def _shares(orig: pd.DataFrame | None, by_cond: dict[str, pd.DataFrame], ratings: pd.DataFrame,
            attribute: str | None, settings: StatsSettings) -> dict[str, Any]:
    """The ``share`` section: between-prompt variance shares of each condition's scores and of the
    ratings, with the reliability-corrected human share."""
    n_boot, seed = settings.n_boot, settings.seed
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
            log_len = _log_length(length)
            sh["log_length"] = residual_share(s, log_len, g, n_boot=n_boot, rng=_rng(seed, "share.log_length"))
            sh["log_length"]["n_zero_length"] = int((length == 0).sum())
    human_src = orig if orig is not None else ratings
    if attribute is not None:
        sh["human"] = share(human_src[attribute].to_numpy(float), human_src["prompt_id"].to_numpy(),
                            n_boot=n_boot, rng=_rng(seed, "share.human"))
        sh["human"]["attribute"] = attribute
    for cond in PER_RESPONSE_SHARES:  # last_turn: multi-turn prompts cut to their last user turn
        if cond in by_cond:
            per = by_cond[cond].groupby(["prompt_id", "response_id"], sort=False)["score"].mean().reset_index()
            sh[cond] = share(per["score"].to_numpy(float), per["prompt_id"].to_numpy(), n_boot=n_boot,
                             rng=_rng(seed, f"share.{cond}"))
    if attribute is not None:
        for label, r in (settings.human_reliability or {}).items():
            sh.setdefault("human_corrected", {})[label] = corrected_share(sh["human"], r)
    return sh


def _paired_shares(frames: dict[str, pd.DataFrame], attribute: str | None,
                   resamples: PromptSetResamples) -> dict[str, Any]:
    """``share_vs_human`` (each model share beside the humans') and ``share_difference`` (the
    original share minus the generic and last-turn ones), on shared prompt resamples."""
    out: dict[str, Any] = {}
    if attribute is not None:
        vs = _vs_human(frames, attribute, resamples)
        if vs:
            out["share_vs_human"] = vs
    if "original" in frames:
        diffs = {}
        for cond in ("generic", "last_turn"):
            if cond in frames:
                m = frames["original"].merge(frames[cond][["prompt_id", "response_id", "score"]],
                                             on=["prompt_id", "response_id"], suffixes=("", "_c"))
                r = share_pair(m["score"].to_numpy(float), m["score_c"].to_numpy(float), m["prompt_id"].to_numpy(),
                               names=("original", cond), resamples=resamples)
                if r:
                    diffs[f"original_minus_{cond}"] = r
        if diffs:
            out["share_difference"] = diffs
    return out


def _model_side(o: pd.DataFrame, by_cond: dict[str, pd.DataFrame], settings: StatsSettings) -> dict[str, Any]:
    """The sections read from the scores alone: ``prompt_only``, ``fixed_reply``, ``transplant`` and
    the paraphrase and last-turn shifts."""
    n_boot, seed = settings.n_boot, settings.seed
    out: dict[str, Any] = {}
    if "prompt_only" in by_cond:
        out["prompt_only"] = prompt_only(o, by_cond["prompt_only"], n_boot=n_boot, rng=_rng(seed, "prompt_only"))
        fixed = {k: fixed_reply_match(o, by_cond["prompt_only"], by_cond[c], n_boot=n_boot,
                                      rng=_rng(seed, f"fixed_reply.{k}"))
                 for k, c in FIXED_REPLY_KINDS.items() if c in by_cond}
        if fixed:
            out["fixed_reply"] = fixed
    tr = {k: transplant(o, by_cond[k], n_boot=n_boot, rng=_rng(seed, f"transplant.{k}"))
          for k in TRANSPLANT_KINDS if k in by_cond}
    if tr:
        out["transplant"] = tr
    for cond in ("paraphrase", "last_turn"):
        if cond in by_cond:
            out[cond] = shift(o, by_cond[cond], n_boot=n_boot, rng=_rng(seed, cond))
    return out


def _against_humans(orig: pd.DataFrame, frames: dict[str, pd.DataFrame], by_cond: dict[str, pd.DataFrame],
                    attribute: str, resamples: PromptSetResamples, settings: StatsSettings,
                    reference_scores: pd.DataFrame | None) -> dict[str, Any]:
    """The sections against the ratings: ``sibling_regression`` (and by condition), ``prompt_means``,
    ``selection`` and ``centering``."""
    n_boot, seed, top = settings.n_boot, settings.seed, settings.top_fraction
    s, h, g = orig["score"].to_numpy(float), orig[attribute].to_numpy(float), orig["prompt_id"].to_numpy()
    out: dict[str, Any] = {}
    reg = sibling_regression(s, h, g, n_boot=settings.n_boot_regression, rng=_rng(seed, "sibling_regression"))
    if reg:
        reg["attribute"] = attribute
        out["sibling_regression"] = reg
        by_c = {"original": reg}
        for cond in ("generic", "random"):  # random: a response's mean score over its wrong prompts
            if cond in by_cond:
                f = frames[cond]
                r = sibling_regression(f["score"].to_numpy(float), f[attribute].to_numpy(float),
                                       f["prompt_id"].to_numpy(), n_boot=n_boot,
                                       rng=_rng(seed, f"sibling_regression.{cond}"))
                if r:
                    r["attribute"] = attribute
                    by_c[cond] = r
        out["sibling_regression_by_condition"] = by_c
    out["prompt_means"] = _prompt_means(frames, attribute, resamples)
    sel = top_selection(s, h, g, top_fraction=top, n_boot=n_boot, rng=_rng(seed, "selection"))
    if sel:
        sel["top_fraction"] = top
        sel["attribute"] = attribute
        out["selection"] = sel
    cen = centering_variants(s, h, g, top_fraction=top, pool=reference_scores, n_boot=n_boot,
                             rng=_rng(seed, "centering"))
    if cen:
        cen["attribute"] = attribute
        out["centering"] = cen
    return out


def _explained(orig: pd.DataFrame, frames: dict[str, pd.DataFrame], by_cond: dict[str, pd.DataFrame],
               attribute: str | None, rated: list[str], resamples: PromptSetResamples, settings: StatsSettings, *,
               prompts: pd.DataFrame | None, features: pd.DataFrame | None,
               prompt_features: pd.DataFrame | None) -> dict[str, Any]:
    """``prompt_splits`` (with the prompt table) and ``variance_explained`` (calibration, residuals,
    the probes and the crossed decomposition)."""
    out: dict[str, Any] = {}
    if prompts is not None:
        sp = prompt_splits(frames, prompts, attribute, resamples, wrong=by_cond.get("random"), seed=settings.seed)
        if sp:
            out["prompt_splits"] = sp
    ve = variance_explained(frames, by_cond, attribute, [c for c in rated if c in orig.columns], resamples,
                            prompts=prompts, features=features, prompt_features=prompt_features,
                            learners=tuple(settings.probe_learners or LEARNERS), seed=settings.seed,
                            jobs=default_jobs() if settings.probe_jobs is None else settings.probe_jobs)
    if ve:
        out["variance_explained"] = ve
    return out
