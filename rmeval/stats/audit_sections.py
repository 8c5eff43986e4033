"""Assemble the audit of one reward model from its scores table and the human ratings.

Everything here is numpy/scipy/scikit-learn on tables; no model is touched (the texts are
scored by ``rmeval.audit.pipeline``'s pipeline, and turned into features by ``rmeval.audit.features``, before
these statistics run on the tables written). A condition that was not scored is ABSENT from the
audit (never reported as zero or NaN), so a downstream reader can tell "not measured" from
"measured as nothing". Likewise without a rated attribute (a preference set such as RM-Bench or
HH-RLHF) every human-referenced section is absent and the model-side ones remain.

The audit is a list of sections (``AUDIT_SECTIONS``, ``rmeval.stats.sections.AuditSection``), each
one top-level key of audit.json, declared once below with its compute, the random streams it
draws from and the figures a sweep reads of it; ``compute_audit`` runs them in order, the sweep's
figures (``sweep_figures``) and the stream table (``streams``) are views of them, and
``rmeval.audit.report`` renders each (``register_markdown``). docs/extending.md: a new section.

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
from rmcore.errors import ConfigError, DataError
from rmcore.settings.registry import Registry

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
from .sections import (
    ROLES,
    AuditInputs,
    AuditSection,
    Figure,
    check_section,
    section_figures,
    stream_table,
    value_at,
)
from .selection import top_selection
from .settings import StatsSettings
from .share import residual_share, share, share_pair
from .splits import prompt_splits
from .transplant import fixed_reply_match, prompt_only, shift, transplant

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


def _scoring_variant(inp: AuditInputs, variant: pd.DataFrame) -> dict[str, Any]:
    """The same responses scored another way (``variant``, a scores table): the shares and the
    transplant figures of both scorings with paired differences (same resamples)."""
    o, by_cond, n_boot, resamples = inp.orig_scores, inp.by_cond, inp.settings.n_boot, inp.resamples
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
        w = resample_weights(k, n_boot, inp.rng("scoring_variants"))  # the same draw for every kind
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



# -- the sections, in audit.json's order ------------------------------------------------------------
# Each reads the inputs compute_audit derives once (rmeval.stats.sections.AuditInputs) and returns
# its value, or None when it has nothing to report (then it is absent).

def _shares(inp: AuditInputs) -> dict[str, Any]:
    """The ``share`` section: between-prompt variance shares of each condition's scores and of the
    ratings, with the reliability-corrected human share."""
    orig, by_cond, attribute, n_boot = inp.orig, inp.by_cond, inp.attribute, inp.settings.n_boot
    sh: dict[str, Any] = {}
    if orig is not None:
        s, g = orig["score"].to_numpy(float), orig["prompt_id"].to_numpy()
        sh["original"] = share(s, g, n_boot=n_boot, rng=inp.rng("share.original"))
        if "single_turn" in orig.columns and orig["single_turn"].any():
            m = orig["single_turn"].to_numpy(bool)
            sh["single_turn"] = share(s[m], g[m], n_boot=n_boot, rng=inp.rng("share.single_turn"))
    if "generic" in by_cond:
        gen = by_cond["generic"]
        sh["generic"] = share(gen["score"].to_numpy(float), gen["prompt_id"].to_numpy(), n_boot=n_boot,
                              rng=inp.rng("share.generic"))
    if orig is not None:
        # pooled ranks: the share without the influence of a few extreme scores. Ranks are taken once
        # on the full sample; a resample only duplicates prompts, so the order they encode is kept.
        sh["ranks"] = share(rankdata(s), g, n_boot=n_boot, rng=inp.rng("share.ranks"))
        if "response_length" in orig.columns and np.isfinite(orig["response_length"]).any():
            length = orig["response_length"].to_numpy(float)
            log_len = _log_length(length)
            sh["log_length"] = residual_share(s, log_len, g, n_boot=n_boot, rng=inp.rng("share.log_length"))
            sh["log_length"]["n_zero_length"] = int((length == 0).sum())
    human_src = orig if orig is not None else inp.ratings
    if attribute is not None:
        sh["human"] = share(human_src[attribute].to_numpy(float), human_src["prompt_id"].to_numpy(),
                            n_boot=n_boot, rng=inp.rng("share.human"))
        sh["human"]["attribute"] = attribute
    for cond in PER_RESPONSE_SHARES:  # last_turn: multi-turn prompts cut to their last user turn
        if cond in by_cond:
            per = by_cond[cond].groupby(["prompt_id", "response_id"], sort=False)["score"].mean().reset_index()
            sh[cond] = share(per["score"].to_numpy(float), per["prompt_id"].to_numpy(), n_boot=n_boot,
                             rng=inp.rng(f"share.{cond}"))
    if attribute is not None:
        for label, r in (inp.settings.human_reliability or {}).items():
            sh.setdefault("human_corrected", {})[label] = corrected_share(sh["human"], r)
    return sh


def _share_vs_human(inp: AuditInputs) -> dict[str, Any] | None:
    """Each model share beside the humans' on the same responses (``_vs_human``)."""
    return _vs_human(inp.frames, inp.attribute, inp.resamples) or None


def _share_difference(inp: AuditInputs) -> dict[str, Any] | None:
    """The original share minus the generic and last-turn ones, on shared prompt resamples."""
    diffs = {}
    for cond in ("generic", "last_turn"):
        if cond in inp.frames:
            m = inp.frames["original"].merge(inp.frames[cond][["prompt_id", "response_id", "score"]],
                                             on=["prompt_id", "response_id"], suffixes=("", "_c"))
            r = share_pair(m["score"].to_numpy(float), m["score_c"].to_numpy(float), m["prompt_id"].to_numpy(),
                           names=("original", cond), resamples=inp.resamples)
            if r:
                diffs[f"original_minus_{cond}"] = r
    return diffs or None


def _prompt_only(inp: AuditInputs) -> dict[str, Any] | None:
    if "prompt_only" not in inp.by_cond:
        return None
    return prompt_only(inp.orig_scores, inp.by_cond["prompt_only"], n_boot=inp.settings.n_boot,
                       rng=inp.rng("prompt_only"))


def _fixed_reply(inp: AuditInputs) -> dict[str, Any] | None:
    """The fixed generic reply under the prompt's donors, per donor kind."""
    if "prompt_only" not in inp.by_cond:
        return None
    fixed = {k: fixed_reply_match(inp.orig_scores, inp.by_cond["prompt_only"], inp.by_cond[c],
                                  n_boot=inp.settings.n_boot, rng=inp.rng(f"fixed_reply.{k}"))
             for k, c in FIXED_REPLY_KINDS.items() if c in inp.by_cond}
    return fixed or None


def _transplant(inp: AuditInputs) -> dict[str, Any] | None:
    tr = {k: transplant(inp.orig_scores, inp.by_cond[k], n_boot=inp.settings.n_boot, rng=inp.rng(f"transplant.{k}"))
          for k in TRANSPLANT_KINDS if k in inp.by_cond}
    return tr or None


def _shift(cond: str) -> Any:
    """The score shift under a reworded prompt (``cond``: paraphrase, last_turn)."""
    def compute(inp: AuditInputs) -> dict[str, Any] | None:
        if cond not in inp.by_cond:
            return None
        return shift(inp.orig_scores, inp.by_cond[cond], n_boot=inp.settings.n_boot, rng=inp.rng(cond))
    return compute


def _human_arrays(inp: AuditInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(original score, rating, prompt id) of the original-condition rows."""
    o = inp.orig
    return o["score"].to_numpy(float), o[inp.attribute].to_numpy(float), o["prompt_id"].to_numpy()


def _sibling_regression(inp: AuditInputs) -> dict[str, Any] | None:
    reg = sibling_regression(*_human_arrays(inp), n_boot=inp.settings.n_boot_regression,
                             rng=inp.rng("sibling_regression"))
    if not reg:
        return None
    reg["attribute"] = inp.attribute
    return reg


def _sibling_regression_by_condition(inp: AuditInputs) -> dict[str, Any] | None:
    """The sibling regression of the original scores beside the same under the generic prompt and
    under random wrong prompts (a response's mean score over its donors)."""
    reg = inp.audit.get("sibling_regression")
    if reg is None:
        return None
    by_c = {"original": reg}
    for cond in ("generic", "random"):
        if cond in inp.by_cond:
            f = inp.frames[cond]
            r = sibling_regression(f["score"].to_numpy(float), f[inp.attribute].to_numpy(float),
                                   f["prompt_id"].to_numpy(), n_boot=inp.settings.n_boot,
                                   rng=inp.rng(f"sibling_regression.{cond}"))
            if r:
                r["attribute"] = inp.attribute
                by_c[cond] = r
    return by_c


def _selection(inp: AuditInputs) -> dict[str, Any] | None:
    top = inp.settings.top_fraction
    sel = top_selection(*_human_arrays(inp), top_fraction=top, n_boot=inp.settings.n_boot, rng=inp.rng("selection"))
    if not sel:
        return None
    sel["top_fraction"] = top
    sel["attribute"] = inp.attribute
    return sel


def _centering(inp: AuditInputs) -> dict[str, Any] | None:
    cen = centering_variants(*_human_arrays(inp), top_fraction=inp.settings.top_fraction, pool=inp.reference_scores,
                             n_boot=inp.settings.n_boot, rng=inp.rng("centering"))
    if not cen:
        return None
    cen["attribute"] = inp.attribute
    return cen


def _prompt_splits(inp: AuditInputs) -> dict[str, Any] | None:
    if inp.prompts is None:
        return None
    return prompt_splits(inp.frames, inp.prompts, inp.attribute, inp.resamples, wrong=inp.by_cond.get("random"),
                         seed=inp.settings.seed) or None


def _variance_explained(inp: AuditInputs) -> dict[str, Any] | None:
    """Calibration, rating residuals, the probes and the crossed decomposition."""
    s = inp.settings
    return variance_explained(inp.frames, inp.by_cond, inp.attribute, [c for c in inp.rated if c in inp.orig.columns],
                              inp.resamples, prompts=inp.prompts, features=inp.features,
                              prompt_features=inp.prompt_features, learners=tuple(s.probe_learners or LEARNERS),
                              seed=s.seed, jobs=default_jobs() if s.probe_jobs is None else s.probe_jobs) or None


def _scoring_variants(inp: AuditInputs) -> dict[str, Any] | None:
    """{name: ``_scoring_variant``} of every other scoring of the same texts."""
    out = {}
    for name, table in inp.compare.items():
        sv = _scoring_variant(inp, validate_scores(table, inp.ratings))
        if sv:
            out[name] = sv
    return out or None


def _pairwise(inp: AuditInputs) -> dict[str, Any] | None:
    if inp.preferences is None:
        return None
    if inp.orig is None:
        raise DataError("pairwise accuracy needs original-condition scores", field="condition")
    return pairwise_accuracy(validate_preferences(inp.preferences), inp.orig_scores, n_boot=inp.settings.n_boot,
                             rng=inp.rng("pairwise"))


# The built-in sections. A stream's index is fixed for ever (rmeval.stats.sections): the indices
# below are those every earlier audit drew from, and a new stream takes next_stream_index().
def _adopt(name: str, obj: Any) -> AuditSection:
    """A plugin's section (an entry point of group matchrm.audit_sections naming an AuditSection),
    checked against the sections loaded before it as register_section checks one."""
    if not isinstance(obj, AuditSection) or obj.name != name:
        raise ConfigError(f"plugin audit section '{name}': {obj!r} is not an rmeval.stats.sections.AuditSection "
                          f"named '{name}'")
    check_section(obj, [s for n, s in AUDIT_SECTIONS.loaded().items() if n != name])
    return obj


# plugins: entry points of group matchrm.audit_sections, computed after the built-ins
AUDIT_SECTIONS: Registry[AuditSection] = Registry("audit section", group="matchrm.audit_sections", adopt=_adopt)


def register_section(section: AuditSection, *, replace: bool = False) -> AuditSection:
    """Add ``section`` to the audit (after the sections registered before it, in audit.json and in
    the sweep's figure columns); its streams and figures are checked against the others'
    (``rmeval.stats.sections.check_section``)."""
    check_section(section, [s for n, s in AUDIT_SECTIONS.loaded().items() if not (replace and n == section.name)])
    return AUDIT_SECTIONS.register(section.name, section, replace=replace)


_O, _OH = ("original",), ("original", "attribute")
for _section in (
    AuditSection("share", _shares, streams={
        "share.original": 0, "share.single_turn": 1, "share.generic": 2, "share.ranks": 3, "share.log_length": 4,
        "share.human": 5, "share.last_turn": 17, "share.paraphrase": 19, "share.random": 20, "share.overlap": 21,
        "share.embedding": 22, "share.length": 23, "share.related": 24},
        figures={"share_original": Figure(("original", "estimate"), "between-prompt share"),
                 "share_generic": Figure(("generic", "estimate"), "share (generic prompt)"),
                 "share_human": Figure(("human", "estimate"), "human share", "reference")}),
    AuditSection("share_vs_human", _share_vs_human, needs=("attribute",)),
    AuditSection("share_difference", _share_difference, needs=_O),
    AuditSection("prompt_only", _prompt_only, needs=_O, streams={"prompt_only": 6}),
    AuditSection("fixed_reply", _fixed_reply, needs=_O, streams={"fixed_reply.random": 27, "fixed_reply.related": 28}),
    AuditSection("transplant", _transplant, needs=_O, streams={
        "transplant.random": 7, "transplant.overlap": 8, "transplant.embedding": 9, "transplant.length": 10,
        "transplant.related": 11},
        figures={"transplant_random_margin_sd": Figure(("random", "margin_sd", "estimate"),
                                                       "random-wrong-prompt margin (SD)"),
                 "transplant_random_accuracy": Figure(("random", "accuracy", "estimate"),
                                                      "random-wrong-prompt match accuracy")}),
    AuditSection("paraphrase", _shift("paraphrase"), needs=_O, streams={"paraphrase": 12}),
    AuditSection("last_turn", _shift("last_turn"), needs=_O, streams={"last_turn": 13}),
    AuditSection("sibling_regression", _sibling_regression, needs=_OH, streams={"sibling_regression": 14},
                 figures={"sibling_coefficient": Figure(("sibling", "estimate"), "sibling coefficient")}),
    AuditSection("sibling_regression_by_condition", _sibling_regression_by_condition, needs=_OH,
                 streams={"sibling_regression.generic": 18, "sibling_regression.random": 25}),
    AuditSection("prompt_means", lambda inp: _prompt_means(inp.frames, inp.attribute, inp.resamples), needs=_OH),
    AuditSection("selection", _selection, needs=_OH, streams={"selection": 15}),
    AuditSection("centering", _centering, needs=_OH, streams={"centering": 26}),
    AuditSection("prompt_splits", _prompt_splits, needs=_O),
    AuditSection("variance_explained", _variance_explained, needs=_O),
    AuditSection("scoring_variants", _scoring_variants, needs=_O, streams={"scoring_variants": 29}),
    AuditSection("pairwise", _pairwise, streams={"pairwise": 16},
                 figures={"pair_accuracy": Figure(("accuracy", "estimate"), "pair accuracy (audit prompts)",
                                                  "accuracy")}),
):
    register_section(_section)


def streams() -> dict[str, int]:
    """The random streams' table (name -> index, in index order) of every registered section."""
    return stream_table(AUDIT_SECTIONS.values())


def sweep_figures(*roles: str) -> dict[str, Figure]:
    """{name: figure, its path from the top of audit.json} of the registered sections' figures of
    ``roles`` (default: every role), in section order: the one list a sweep's ledger, summary.csv,
    report.md and W&B table read."""
    return section_figures(AUDIT_SECTIONS.values(), roles or ROLES)


def figure_values(audit: dict[str, Any], *roles: str) -> dict[str, float | None]:
    """The sweep's figures of ``roles`` (default every role) of one audit record: a float, or None
    where the audit has no such value."""
    out: dict[str, float | None] = {}
    for name, fig in sweep_figures(*roles).items():
        v = value_at(audit, fig.path)
        out[name] = float(v) if v is not None else None
    return out


def figure_interval(audit: dict[str, Any], name: str) -> list[float] | None:
    """The 95% interval beside a figure that is an estimate (its ``ci95``); None where absent."""
    path = sweep_figures()[name].path
    return value_at(audit, (*path[:-1], "ci95")) if path[-1] == "estimate" else None


def compute_audit(scores: pd.DataFrame, ratings: pd.DataFrame, settings: StatsSettings | None = None, *,
                  preferences: pd.DataFrame | None = None, attribute: str | None = "helpfulness",
                  reference_scores: pd.DataFrame | None = None, prompts: pd.DataFrame | None = None,
                  features: pd.DataFrame | None = None, prompt_features: pd.DataFrame | None = None,
                  compare: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
    """The audit as a nested dict: every registered section (``AUDIT_SECTIONS``, in order; see the
    module docs of rmeval.stats.* for each definition) then ``meta``, computed as ``settings`` say
    (``rmeval.stats.settings.StatsSettings``: resamples, seed, the human share's reliabilities, the
    probes' learners; default its defaults).

    ``attribute`` None: no rated attribute (a preference set); the human-referenced sections are
    left out. ``reference_scores``: (prompt_id, score) of an independent pool of reference responses
    scored by the same model, for the pool-centring variants. ``prompts``: the prompt table
    (``rmeval.audit.features.prompt_table``) for the prompt splits and the probes' first-turn folds;
    ``features`` / ``prompt_features``: the response and prompt features of ``rmeval.audit.features``
    for the probes. ``compare``: {name: scores table} of the same texts scored another way."""
    settings = settings or StatsSettings()
    t0 = time.perf_counter()
    inp = _inputs(scores, ratings, settings, attribute, preferences=preferences, reference_scores=reference_scores,
                  prompts=prompts, features=features, prompt_features=prompt_features, compare=compare or {})
    for name, section in AUDIT_SECTIONS.items():
        if section.ready(inp):
            value = section.compute(inp)
            if value is not None:
                inp.audit[name] = value
    audit = inp.audit
    audit["meta"] = {
        "n_prompts": int(inp.scores["prompt_id"].nunique()),
        "n_responses": int(len(inp.orig)) if inp.orig is not None else 0,
        "n_rated_responses": int(len(inp.ratings)),
        "conditions": [c for c in condition_names() if (inp.scores["condition"] == c).any()],
        "attribute": attribute,
        "n_boot": int(settings.n_boot),
        "n_boot_regression": int(settings.n_boot_regression),
        "seed": int(settings.seed),
        "top_fraction": float(settings.top_fraction),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return audit


def _inputs(scores: pd.DataFrame, ratings: pd.DataFrame, settings: StatsSettings, attribute: str | None,
            **tables: Any) -> AuditInputs:
    """The validated tables and what every section reads of them (``AuditInputs``)."""
    ratings = validate_ratings(ratings, attribute=attribute)
    scores = validate_scores(scores, ratings)
    by_cond = {c: g for c, g in scores.groupby("condition", sort=False)}
    rated = _rated_columns(ratings, attribute)
    rcols = ["prompt_id", "response_id", *rated] + [c for c in ("single_turn", "response_length")
                                                     if c in ratings.columns]
    orig = None
    if "original" in by_cond:
        orig = by_cond["original"].merge(ratings[rcols], on=["prompt_id", "response_id"], how="left")
    frames = {c: _with_ratings(by_cond[c], ratings, rcols) for c in ("original", "generic", *PER_RESPONSE_SHARES)
              if c in by_cond}
    return AuditInputs(scores=scores, ratings=ratings, by_cond=by_cond, orig=orig,
                       orig_scores=orig[["prompt_id", "response_id", "score"]] if orig is not None else None,
                       frames=frames, attribute=attribute, rated=rated, settings=settings,
                       # one matrix per prompt set: paired comparisons
                       resamples=PromptSetResamples(settings.seed, settings.n_boot), streams=streams(), **tables)
