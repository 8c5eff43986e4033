"""The human side of the audit: every statistic that needs only the ratings (no model).

``compute_human`` works on a ratings table (prompt_id, response_id, one column per attribute,
single_turn, response_words, prompt_words and, for vote data, exposure); ``human_table`` builds
it from a rating set. Per attribute:

* the between-prompt share (ICC(1)) with a prompt-bootstrap interval on all prompts, on
  single-turn prompts and on pooled ranks, and after OLS residualisation on log response length
  (words: no tokenizer is involved on this side);
* the leave-one-out rating correlation (each rating with its siblings' mean);
* the humans' own disjoint-half correlation of prompt means;
* the longer-minus-shorter prompt difference (prompts split at the median prompt length), on all
  and on single-turn prompts;
* with an exposure column (Reddit votes): the share after the exposure is regressed out.

With per-annotator ratings (``annotations``) the rater reliabilities and the corrected share;
with borrowed reliabilities (``reliabilities``) the corrected share under each.

Ranks are taken over the rated rows only (average ranks for ties, as ``scipy.stats.rankdata``);
a response without a rating keeps no rank and is left out of the rank share, like the raw share
leaves it out, instead of turning every rank into NaN.

``human_audit(spec, settings, out)`` is the whole pipeline -- load the rating set, read the
annotations, compute, write OUT/human.json and OUT/human.md -- the one function ``rmeval human``
calls.
"""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from rmcore.data.helpsteer_annotations import load_helpsteer2_annotations
from rmcore.data.loading import load_data
from rmcore.data.schema import pick_attribute, skipped_note
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import interval, num, table
from rmeval.audit.settings import HumanSettings
from rmeval.stats.prompt_means import disjoint_half_correlation, loo_correlation, prompt_split_difference
from rmeval.stats.reliability import corrected_share, rater_reliability, spearman_brown
from rmeval.stats.settings import N_BOOT
from rmeval.stats.share import residual_share, share

NON_ATTRIBUTES = ("prompt_id", "response_id", "single_turn", "response_words", "prompt_words", "exposure",
                  "response_length")


def _rng(seed: int, name: str) -> np.random.Generator:
    """One fixed stream per statistic: adding one never moves another's interval."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _words(text: str) -> int:
    return len(str(text).split())


def human_table(rating_set: Any) -> pd.DataFrame:
    """Ratings table of a rating set with word lengths (and exposure where the loader set one)."""
    rows = []
    for p in rating_set.prompts:
        prompt_words = sum(_words(m["content"]) for m in p.messages)
        for r in p.responses:
            row: dict[str, Any] = {"prompt_id": p.prompt_id, "response_id": r.response_id}
            row.update({a: r.ratings.get(a, float("nan")) for a in rating_set.attributes})
            row.update(single_turn=p.single_turn, response_words=_words(r.text), prompt_words=prompt_words)
            if "exposure" in r.meta:
                row["exposure"] = float(r.meta["exposure"])
            rows.append(row)
    return pd.DataFrame(rows)


def attributes_of(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in NON_ATTRIBUTES]


def _log(x: np.ndarray) -> np.ndarray:
    out = np.full(len(x), np.nan)  # an empty response has no log length
    out[x > 0] = np.log(x[x > 0])
    return out


def finite_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (1..n) of the finite values; NaN where a value is missing."""
    v = np.asarray(values, dtype=float)
    out = np.full(len(v), np.nan)
    ok = np.isfinite(v)
    out[ok] = rankdata(v[ok])
    return out


def attribute_stats(table: pd.DataFrame, attribute: str, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Every ratings-only statistic of one attribute (see module doc)."""
    y = table[attribute].to_numpy(float)
    g = table["prompt_id"].to_numpy()
    st = table["single_turn"].to_numpy(bool) if "single_turn" in table.columns else np.ones(len(y), bool)
    key = f"human.{attribute}"
    sh: dict[str, Any] = {"all": share(y, g, n_boot=n_boot, rng=_rng(seed, f"{key}.all"))}
    if st.any():
        sh["single_turn"] = share(y[st], g[st], n_boot=n_boot, rng=_rng(seed, f"{key}.single_turn"))
    sh["ranks"] = share(finite_ranks(y), g, n_boot=n_boot, rng=_rng(seed, f"{key}.ranks"))
    if st.any() and not st.all():
        sh["ranks_single_turn"] = share(finite_ranks(y[st]), g[st], n_boot=n_boot,
                                        rng=_rng(seed, f"{key}.ranks_single_turn"))
    if "response_words" in table.columns:
        sh["log_length"] = residual_share(y, _log(table["response_words"].to_numpy(float)), g, n_boot=n_boot,
                                          rng=_rng(seed, f"{key}.log_length"))
    if "exposure" in table.columns:
        sh["exposure_adjusted"] = residual_share(y, table["exposure"].to_numpy(float), g, n_boot=n_boot,
                                                 rng=_rng(seed, f"{key}.exposure"))
    out: dict[str, Any] = {
        "share": sh,
        "loo_correlation": loo_correlation(y, g, n_boot=n_boot, rng=_rng(seed, f"{key}.loo")),
        "disjoint_half_correlation": disjoint_half_correlation(y, y, g, n_boot=n_boot, rng=_rng(seed, f"{key}.half")),
    }
    if "prompt_words" in table.columns:
        pw = table["prompt_words"].to_numpy(float)
        split = {"all": prompt_split_difference(y, g, pw, n_boot=n_boot, rng=_rng(seed, f"{key}.split"))}
        if st.any() and not st.all():
            split["single_turn"] = prompt_split_difference(y[st], g[st], pw[st], n_boot=n_boot,
                                                           rng=_rng(seed, f"{key}.split_single_turn"))
        out["longer_minus_shorter"] = {k: v for k, v in split.items() if v}
    return out


def compute_human(table: pd.DataFrame, *, attributes: list[str] | None = None, n_boot: int = N_BOOT, seed: int = 0,
                  annotations: pd.DataFrame | None = None, raters_per_rating: float = 1.0,
                  reliabilities: dict[str, float] | None = None, main_attribute: str | None = None
                  ) -> dict[str, Any]:
    """The human audit as a nested dict.

    ``annotations``: long table (response_id, attribute, value), one row per rater's rating;
    ``raters_per_rating``: how many raters the table's ratings average (1 for HelpSteer, 3 for
    HelpSteer2's released label), which sets the reliability the share is divided by;
    ``reliabilities``: borrowed values {label: R} applied to the main attribute's share."""
    t0 = time.perf_counter()
    attrs = attributes or attributes_of(table)
    if not attrs:
        raise DataError("the ratings table has no rated attribute column")
    for a in attrs:
        if a not in table.columns:
            raise DataError(f"ratings have no attribute '{a}'; they have {attributes_of(table)}", field=a)
    main = pick_attribute(attrs, main_attribute)
    if main not in attrs:
        raise DataError(f"main attribute '{main}' is not among the computed attributes {attrs}", field=main)
    res: dict[str, Any] = {"attributes": {a: attribute_stats(table, a, n_boot=n_boot, seed=seed) for a in attrs}}
    main_share = res["attributes"][main]["share"]["all"]
    corrected: dict[str, Any] = {}
    if annotations is not None:
        ann = annotations[annotations["attribute"] == main]
        if ann.empty:
            raise DataError(f"the annotations hold no '{main}' ratings", field="attribute")
        rel = rater_reliability(ann["value"].to_numpy(float), ann["response_id"].to_numpy(), k=raters_per_rating,
                                n_boot=n_boot, rng=_rng(seed, "reliability"))
        res["reliability"] = rel
        for label in ("single_rater", "one_vs_rest", "kept_three"):
            r = spearman_brown(rel[label], raters_per_rating)
            if np.isfinite(r) and 0 < r <= 1:
                corrected[f"{label}(k={raters_per_rating:g})"] = corrected_share(main_share, r)
    for label, r in (reliabilities or {}).items():
        corrected[f"borrowed:{label}"] = corrected_share(main_share, r)
    if corrected:
        res["share_corrected"] = corrected
    st = table["single_turn"].to_numpy(bool) if "single_turn" in table.columns else np.ones(len(table), bool)
    res["meta"] = {"n_prompts": int(table["prompt_id"].nunique()), "n_responses": int(len(table)),
                   "n_single_turn_prompts": int(table.loc[st, "prompt_id"].nunique()),
                   "attributes": attrs, "main_attribute": main, "n_boot": int(n_boot), "seed": int(seed),
                   "raters_per_rating": float(raters_per_rating),
                   "seconds": round(time.perf_counter() - t0, 3)}
    return res


# -- the pipeline ---------------------------------------------------------------------------------


def human_audit(spec: str, settings: HumanSettings, out: str | os.PathLike) -> dict[str, Any]:
    """Every ratings-only statistic of the rating set ``spec`` (a data SPEC), written to
    OUT/human.json and OUT/human.md; returns the document."""
    rs = load_data(spec, settings.max_prompts, settings.seed)
    if not rs.attributes:
        raise ConfigError(f"--data {spec}: no rated attribute (a preference set such as RM-Bench or HH-RLHF "
                          "carries labels, not ratings); rmeval human needs a rating set: helpsteer, helpsteer2, "
                          "shp, simulated or a generic file with rating columns")
    annotations, skipped = None, None
    if settings.annotations:
        annotations, skipped = load_helpsteer2_annotations(settings.annotations, rs)
        if annotations.empty:
            raise DataError(f"{settings.annotations}: no annotation matches a response of {spec} "
                            f"(skipped: {dict(skipped)})")
    attrs = [settings.attribute] if settings.attribute else None
    res = compute_human(human_table(rs), attributes=attrs, n_boot=settings.n_boot, seed=settings.seed,
                        annotations=annotations, raters_per_rating=settings.raters_per_rating,
                        reliabilities=settings.reliabilities or None, main_attribute=settings.attribute)
    res["meta"].update({"data": spec, "rating_set": rs.name, "skipped": dict(rs.skipped)})
    if annotations is not None:
        res["meta"]["annotations"] = {"file": settings.annotations, "n_ratings": int(len(annotations)),
                                      "skipped": dict(skipped or {})}
    write_human_report(res, out, title=f"Human ratings: {rs.name}")
    return res


# -- report --------------------------------------------------------------------------------------

SHARE_LABELS = {"all": "all prompts", "single_turn": "single-turn prompts", "ranks": "ranks (all prompts)",
                "ranks_single_turn": "ranks (single-turn prompts)", "log_length": "log-length adjusted",
                "exposure_adjusted": "exposure adjusted"}


def render_human_markdown(res: dict[str, Any], title: str = "Human ratings") -> str:
    meta = res["meta"]
    lines = [f"# {title}", "",
             f"{meta['n_prompts']} prompts ({meta['n_single_turn_prompts']} single-turn), {meta['n_responses']} "
             f"responses; {meta['n_boot']} prompt-level bootstrap resamples (95% percentile intervals), "
             f"seed {meta['seed']}.", "",
             "The between-prompt share is the human reference for a model's share on the same prompts and "
             "the same transform. It describes how the rating variance is distributed; it is not a target "
             "a model must match, and it depends on the rating protocol (independent ratings vs one "
             "annotator rating a prompt's responses in sequence).", ""]
    for what, counts in (("the data", meta.get("skipped") or {}),
                         ("the annotations", (meta.get("annotations") or {}).get("skipped") or {})):
        if skipped_note(counts):  # on_bad: skip drops rows; never silently
            lines += [f"Skipped while reading {what}: {skipped_note(counts)}.", ""]
    lines += ["## Between-prompt share (ICC(1))", ""]
    lines += table(["attribute", "subset", "share", "95% CI", "prompts"],
                   [[a, SHARE_LABELS.get(name, name), num(r["estimate"]), interval(r), r["n_prompts"]]
                    for a, st in res["attributes"].items() for name, r in st["share"].items()])
    lines += ["", "## Agreement between a prompt's ratings", "",
              "Leave-one-out: each rating against the mean of its siblings (pooled over responses). "
              "Disjoint halves: prompt means of one half of the responses against the other half.", ""]
    lines += table(["attribute", "leave-one-out r", "95% CI", "disjoint-half r", "95% CI"],
                   [[a, num(lo["estimate"]), interval(lo), num(dh["estimate"]), interval(dh)]
                    for a, lo, dh in ((a, st["loo_correlation"], st["disjoint_half_correlation"])
                                      for a, st in res["attributes"].items())])
    split_rows = [(a, n, r) for a, st in res["attributes"].items()
                  for n, r in st.get("longer_minus_shorter", {}).items()]
    if split_rows:
        lines += ["", "## Longer minus shorter prompts", "",
                  "Mean rating of responses to prompts above the median prompt length (words) minus the rest.", ""]
        lines += table(["attribute", "prompts", "difference (SD)", "95% CI", "difference (points)", "95% CI"],
                       [[a, n, num(r["estimate"]), interval(r), num(r["points"]["estimate"]), interval(r["points"])]
                        for a, n, r in split_rows])
    if "reliability" in res:
        lines += ["", f"## Rater reliability ({meta['main_attribute']})", ""]
        lines += table(["measure", "value"],
                       [[k, num(v)] for k, v in res["reliability"].items() if isinstance(v, float)])
    if "share_corrected" in res:
        lines += ["", f"## Reliability-corrected share ({meta['main_attribute']})", "",
                  "Observed share divided by the ratings' reliability under an independent additive-noise "
                  "model. A sensitivity analysis, not a ceiling: the noise model is an assumption, and a "
                  "scorer that compresses within-prompt differences has a higher share than the quality it "
                  "predicts without being wrong.", ""]
        lines += table(["reliability", "R", "corrected share", "95% CI"],
                       [[k, num(r["reliability"]), num(r["estimate"]), interval(r)]
                        for k, r in res["share_corrected"].items()])
    return "\n".join(lines).rstrip() + "\n"


def write_human_report(res: dict[str, Any], out_dir: str | Path, title: str = "Human ratings") -> dict[str, Path]:
    """OUT/human.json and OUT/human.md (each written atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {"json": atomic_write_json(out / "human.json", res),
            "markdown": atomic_write_text(out / "human.md", render_human_markdown(res, title))}
