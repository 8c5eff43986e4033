"""Write an audit to disk (JSON + readable Markdown + PNG plots) and log it to W&B."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.data.schema import skipped_note
from rmcore.io.files import atomic_save_figure, atomic_write_json, atomic_write_text
from rmcore.io.markdown import MISSING, estimate, interval, num, table
from rmcore.runtime.wandb_log import Tracker, flatten
from rmcore.settings.registry import Registry
from rmeval.stats.audit_sections import AUDIT_SECTIONS

SHARE_NAMES = ("original", "single_turn", "generic", "ranks", "log_length", "last_turn", "paraphrase", "random",
               "overlap", "embedding", "length", "related", "human")
VS_LABELS = {"original": "original, all prompts", "single_turn": "original, single-turn prompts",
             "generic": "generic prompt, all prompts", "generic_single_turn": "generic prompt, single-turn prompts",
             "ranks": "ranks, all prompts", "ranks_single_turn": "ranks, single-turn prompts",
             "log_length": "log-length adjusted", "last_turn": "last turn only (multi-turn prompts)",
             "paraphrase": "paraphrased prompts (mean per response)",
             **{k: f"{k} wrong prompts (mean per response)" for k in ("random", "overlap", "embedding", "length",
                                                                    "related")}}

# The reading the study signs: a share is a description of where the variance lies, not a verdict.
SHARE_READING = (
    "Share of score variance that lies between prompts. A model share above the human share of the same "
    "responses says that more of the score's variance lies between prompts than the ratings' does; it does "
    "not by itself show an erroneous prompt offset, because a scorer that compresses the differences "
    "between a prompt's responses has a larger share too. Between-prompt clustering is a diagnostic, not an "
    "estimate of bias: whether the prompt-level part agrees with the humans is asked by the prompt-mean "
    "correlations and the sibling regression, and whether it helps by the selection test below.")


@dataclass(frozen=True)
class MarkdownPart:
    """How audit.md shows one or more audit sections: ``render(audit)`` -> Markdown lines, called
    when one of ``sections`` (the audit.json keys it reads) is in the audit."""

    render: Callable[[dict[str, Any]], list[str]]
    sections: tuple[str, ...]


# audit.md's parts, in the page's order (not audit.json's: the prompt means are read beside the
# shares, the transplants before the fixed reply); the sections are rmeval.stats.audit_sections's, and
# judge_diagnostics is the pipeline's (a generative judge's digit table)
MARKDOWN: Registry[MarkdownPart] = Registry("audit Markdown part")


def register_markdown(name: str, render: Callable[[dict[str, Any]], list[str]], *,
                      sections: Sequence[str] | None = None, replace: bool = False) -> MarkdownPart:
    """Show the audit section ``name`` (or ``sections``, the keys ``render`` reads; default
    ``name``) in audit.md, after the parts registered before it."""
    return MARKDOWN.register(name, MarkdownPart(render, tuple(sections or (name,))), replace=replace)


def render_markdown(audit: dict[str, Any], title: str = "matchrm audit") -> str:
    """The audit as Markdown: a title, the run's header, then each registered part whose sections
    are in the audit (``MARKDOWN``)."""
    lines = [f"# {title}", ""]
    lines += _header_markdown(audit)
    for part in MARKDOWN.values():
        if any(s in audit for s in part.sections):
            lines += part.render(audit)
    for name, section in AUDIT_SECTIONS.items():  # a plugin section's own part, after the built-in ones
        if section.markdown is not None and name in audit and name not in MARKDOWN:
            lines += section.markdown(audit)
    return "\n".join(lines).rstrip() + "\n"


def _header_markdown(audit: dict[str, Any]) -> list[str]:
    """The run's counts, conditions and bootstrap, a missing rated attribute, and the markers dropped."""
    meta = audit.get("meta", {})
    lines = [f"{meta.get('n_prompts', '?')} prompts, {meta.get('n_responses', '?')} responses; "
             f"conditions: {', '.join(meta.get('conditions', []))}; {meta.get('n_boot', '?')} "
             f"prompt-level bootstrap resamples (95% percentile intervals), seed {meta.get('seed', '?')}.", ""]
    if meta.get("max_length"):
        trained = meta.get("training_max_length")
        how = ("" if trained is None else " (the training length)" if trained == meta["max_length"]
               else f" (trained with {trained})")
        lines += [f"Each text scored at up to {meta['max_length']} tokens{how}; the prompt is cut from the left.", ""]
    if skipped_note(meta.get("skipped") or {}):  # on_bad: skip drops rows; never silently
        lines += [f"Skipped while reading the data: {skipped_note(meta['skipped'])}.", ""]
    if "attribute" in meta and meta["attribute"] is None:
        lines += ["No rated attribute (a preference set carries labels, not ratings): the human-referenced "
                  "figures are left out.", ""]
    if meta.get("drop_special"):
        dropped = audit.get("markers_dropped", {})
        lines += [f"Scored without the {' and '.join(meta['drop_special'])} marker(s): "
                  + ", ".join(f"{m} removed from {n} texts" for m, n in dropped.items()) + ".", ""]
    return lines


def _share_markdown(audit: dict[str, Any]) -> list[str]:
    """The between-prompt share (ICC(1)) of each score, and the reliability-corrected human share."""
    sh = audit["share"]
    if not sh:
        return []
    lines = ["## Between-prompt variance share (ICC(1))", "", SHARE_READING, ""]
    rows = [[n, num(sh[n]["estimate"]), interval(sh[n]), str(sh[n].get("n_prompts", "")),
             str(sh[n].get("n_dropped", ""))] for n in SHARE_NAMES if n in sh]
    lines += table(["share", "estimate", "95% CI", "prompts", "dropped (1 response)"], rows) + [""]
    if sh.get("human_corrected"):
        lines += ["Reliability-corrected human share (observed share / rater reliability, under an "
                  "independent additive-noise model): a sensitivity range, not a ceiling.", ""]
        lines += table(["reliability", "R", "corrected human share", "95% CI"],
                        [[k, num(r["reliability"]), num(r["estimate"]), interval(r)]
                         for k, r in sh["human_corrected"].items()]) + [""]
    return lines


def _share_vs_human_markdown(audit: dict[str, Any]) -> list[str]:
    """Each model share beside the human share of the same responses, with the paired difference."""
    vs = audit["share_vs_human"]
    if not vs:
        return []
    lines = ["## Model and human shares on the same responses", "",
             "Each model share beside the human share of the same responses under the same transform "
             "(single-turn with single-turn, ranks with ranks, log-length adjusted with log-length "
             "adjusted), with the paired difference on the same prompt resamples.", ""]
    rows = [[VS_LABELS.get(n, n), num(r["model"]["estimate"]), interval(r["model"]), num(r["human"]["estimate"]),
             interval(r["human"]), num(r["difference"]["estimate"]), interval(r["difference"]),
             str(r["model"].get("n_prompts", ""))] for n, r in vs.items()]
    return lines + table(["share", "model", "95% CI", "human", "95% CI", "model - human", "95% CI", "prompts"],
                         rows) + [""]


def _share_difference_markdown(audit: dict[str, Any]) -> list[str]:
    """The share under the original prompt minus the share under each other condition (paired)."""
    diff = audit["share_difference"]
    if not diff:
        return []
    lines = ["## Original minus other prompt conditions", "",
             "Share under the original prompt minus the share under another input, on the same responses "
             "and prompt resamples (paired).", ""]
    rows = [[n.replace("_", " "), num(r["difference"]["estimate"]), interval(r["difference"]),
             str(r["difference"].get("n_prompts", ""))] for n, r in diff.items()]
    return lines + table(["difference", "estimate", "95% CI", "prompts"], rows) + [""]


def _prompt_means_markdown(audit: dict[str, Any]) -> list[str]:
    """Correlations across prompts of model and human prompt means, on shared and disjoint responses."""
    pm = audit["prompt_means"]
    if not pm:
        return []
    lines = ["## Correlation of prompt means", "",
             "Pearson correlation across prompts of prompt means. When model and human means rest on the "
             "same few responses, the noise those responses share enters both; the disjoint-half version "
             "takes the two means on different responses of each prompt, and the humans' own halves show "
             "what the ratings allow.", ""]
    names = {"model_vs_human": "model vs human", "model_vs_human_disjoint": "model vs human, disjoint halves",
             "human_disjoint": "human vs human, disjoint halves", "generic_vs_original": "generic vs original prompt",
             "generic_vs_human": "generic-prompt model vs human",
             "generic_vs_human_disjoint": "generic-prompt model vs human, disjoint halves"}
    rows = [[names[n], num(pm[n]["estimate"]), interval(pm[n]), str(pm[n].get("n_prompts", ""))]
            for n in names if n in pm]
    return lines + table(["prompt means", "r", "95% CI", "prompts"], rows) + [""]


def _prompt_only_markdown(audit: dict[str, Any]) -> list[str]:
    """The correlation of a fixed generic reply's score with the prompt's mean original score."""
    if "prompt_only" not in audit:
        return []
    r = audit["prompt_only"]
    lines = ["## Prompt-only score", "",
             "Correlation across prompts of the score of a fixed generic reply with the prompt's mean "
             "original score.", ""]
    return lines + table(["estimate", "95% CI", "prompts"],
                         [[num(r["estimate"]), interval(r), str(r["n_prompts"])]]) + [""]


def _transplant_markdown(audit: dict[str, Any]) -> list[str]:
    """Own- against wrong-prompt margin, match accuracy and AUCs of each transplant kind."""
    if "transplant" not in audit:
        return []
    lines = ["## Prompt transplants", "",
             "Margin: own-prompt score minus mean wrong-prompt score, in original-score SDs. "
             "Accuracy: share of responses whose own-prompt score beats every wrong prompt. AUC (scale-free): "
             "the ROC AUC of the responses' own-prompt scores against their wrong-prompt scores, pooled over "
             "the set, ties half; paired AUC: the share of (response, wrong prompt) pairs in which the own "
             "prompt scores higher.", ""]
    rows = []
    for kind, r in audit["transplant"].items():
        sub = r.get("variants", {}).get("subtype")  # a related-task file's subtype
        rows.append([f"{kind} ({sub})" if sub else kind, estimate(r["margin_sd"]), estimate(r["accuracy"]),
                     estimate(r["auc"]) if "auc" in r else MISSING,
                     estimate(r["auc_paired"]) if "auc_paired" in r else MISSING, str(r.get("n_responses", ""))])
    return lines + table(["kind", "margin (SD) [95% CI]", "match accuracy", "AUC", "paired AUC", "responses"],
                         rows) + [""]


def _fixed_reply_markdown(audit: dict[str, Any]) -> list[str]:
    """The fixed generic reply under each prompt against the same reply under the prompt's donors."""
    if "fixed_reply" not in audit:
        return []
    lines = ["## A fixed reply under donor prompts", "",
             "The fixed generic reply scored under each prompt against the same reply under that prompt's "
             "donors: what the prompt alone decides. Margin in SDs of the original scores; the own prompt "
             "wins against every donor at chance (1 / (donors + 1)) when the prompt carries no match "
             "signal of its own.", ""]
    rows = [[kind, estimate(r["margin_sd"]), estimate(r["accuracy"]), num(r.get("chance_accuracy")),
             estimate(r["auc"]), estimate(r["auc_paired"]), str(r.get("n_prompts", ""))]
            for kind, r in audit["fixed_reply"].items()]
    return lines + table(["donors", "margin (SD) [95% CI]", "match accuracy", "chance", "AUC", "paired AUC", "prompts"],
                         rows) + [""]


def _shifts_markdown(audit: dict[str, Any]) -> list[str]:
    """Score shifts under a paraphrased and a last-turn-only prompt, and the paraphrases' validity."""
    shifts = [c for c in ("paraphrase", "last_turn") if c in audit]
    if not shifts:
        return []
    lines = ["## Prompt rewording shifts", "",
             "Score under a paraphrased / last-turn-only prompt minus the original score, in SDs.", ""]
    rows = []
    for c in shifts:
        r = audit[c]
        rows.append([c, num(r["abs_shift_sd"]["estimate"]), interval(r["abs_shift_sd"]),
                     num(r["signed_shift_sd"]["estimate"]), interval(r["signed_shift_sd"]), str(r.get("n_pairs", ""))])
    lines += table(["condition", "abs shift (SD)", "95% CI", "signed shift (SD)", "95% CI", "pairs"], rows) + [""]
    v = audit.get("paraphrase", {}).get("variants", {}).get("validity")
    if v:
        lines += [_paraphrase_validity_line(v), ""]
    return lines


def _paraphrase_validity_line(v: dict[str, Any]) -> str:
    """How many paraphrases the judge kept, and the prompts left without one against the kept prompts."""
    kept, dropped = v["kept_prompts"], v["dropped_prompts"]
    line = (f"Paraphrases judged to keep the original's meaning: {v['n_valid']} of {v['n_judged']} "
            f"({num(v['share_valid'])}); only those are scored. ")
    if v["n_prompts_without_valid"]:
        line += (f"{v['n_prompts_without_valid']} prompts had no valid paraphrase and are left out (median "
                 f"{num(dropped['median_words'], 0)} words, {num(dropped['share_multi_turn'])} multi-turn; "
                 f"the kept prompts: median {num(kept['median_words'], 0)} words, "
                 f"{num(kept['share_multi_turn'])} multi-turn).")
    else:
        line += "Every prompt kept at least one."
    return line


def _sibling_regression_markdown(audit: dict[str, Any]) -> list[str]:
    """The sibling-rating regression's coefficients, and the same regression under the control conditions."""
    if "sibling_regression" not in audit:
        return []
    r = audit["sibling_regression"]
    lines = ["## Sibling-rating regression", "",
             f"z-scored score ~ shown response's {r.get('attribute', 'rating')} + mean rating of the other "
             "responses to the same prompt (OLS).", ""]
    rows = [[n, num(r[n]["estimate"]), interval(r[n])] for n in
            ("shown", "sibling", "between_slope", "within_slope") if n in r]
    lines += table(["coefficient", "estimate", "95% CI"], rows) + [""]
    by_c = audit.get("sibling_regression_by_condition", {})
    if len(by_c) > 1:
        lines += ["The same regression with the score under the generic prompt and under random wrong prompts "
                  "(a response's mean over its donors). A sibling coefficient can also come from rating noise "
                  "and sequential annotation, so it is read beside these controls.", ""]
        coefs = ("shown", "sibling", "between_slope", "within_slope")
        rows = [[c] + [estimate(rr[n]) if n in rr else MISSING for n in coefs]
                for c, rr in by_c.items()]
        lines += table(["score under", *coefs], rows) + [""]
    return lines


def _selection_markdown(audit: dict[str, Any]) -> list[str]:
    """Mean rating of the top fraction kept by raw and by sibling-centred score, and the Spearman correlations."""
    if "selection" not in audit:
        return []
    r = audit["selection"]
    lines = ["## Global top-fraction selection", "",
             f"Mean {r.get('attribute', 'rating')} of the top {num(100 * r.get('top_fraction', 0.3), 0)}% of "
             "all responses kept by raw score and by sibling-centred score.", ""]
    rows = [[n, num(r[n]["estimate"]), interval(r[n])] for n in r
            if isinstance(r[n], dict) and "estimate" in r[n]]
    lines += table(["selection", "mean rating", "95% CI"], rows) + [""]
    sp = r.get("spearman", {})
    return lines + table(["Spearman (score vs rating)", "rho"], [[k, num(v)] for k, v in sp.items()]) + [""]


def _centering_markdown(audit: dict[str, Any]) -> list[str]:
    """Each centring variant's top-fraction mean and Spearman correlations, and their changes from the raw score."""
    if "centering" not in audit:
        return []
    c = audit["centering"]
    pct = num(100 * c.get("top_fraction", 0.3), 0)
    lines = ["## Centring variants for global selection", "",
             f"Each variant subtracts an estimate of the prompt mean before pooling: the mean of 1, 2 or 3 "
             f"siblings, of all siblings, an empirical-Bayes shrunk sibling mean, and (when given) an "
             f"independent reference pool. Δ = variant minus raw score on the same prompt resamples: the "
             f"change in mean {c.get('attribute', 'rating')} of the top {pct}% kept, and in pooled Spearman "
             f"correlation with the raw and the prompt-centred rating. Which variant to use depends on the "
             f"selection target; against the centred rating centring helps by construction.", ""]
    raw = c["raw"]
    rows = [["raw", num(raw["top_mean"]["estimate"]), interval(raw["top_mean"]), "", "",
             num(raw["spearman_raw_rating"]["estimate"]), "", "",
             num(raw["spearman_centered_rating"]["estimate"]), "", ""]]
    for n, v in c["variants"].items():
        rows.append([n, num(v["top_mean"]["estimate"]), interval(v["top_mean"]), num(v["top_mean_delta"]["estimate"]),
                     interval(v["top_mean_delta"]), num(v["spearman_raw_rating"]["estimate"]),
                     num(v["spearman_raw_rating_delta"]["estimate"]), interval(v["spearman_raw_rating_delta"]),
                     num(v["spearman_centered_rating"]["estimate"]),
                     num(v["spearman_centered_rating_delta"]["estimate"]),
                     interval(v["spearman_centered_rating_delta"])])
    return lines + table(["centring", f"top {pct}% mean", "95% CI", "Δ", "95% CI", "ρ raw rating", "Δρ", "95% CI",
                          "ρ centred rating", "Δρ", "95% CI"], rows) + [""]


def _pairwise_markdown(audit: dict[str, Any]) -> list[str]:
    """Pairwise preference accuracy over all pairs, by section and by subset, and the RM-Bench matrix."""
    if "pairwise" not in audit:
        return []
    p = audit["pairwise"]
    lines = ["## Pairwise preference accuracy", ""]
    rows = [["all", num(p["accuracy"]["estimate"]), interval(p["accuracy"]), str(p["accuracy"].get("n_pairs", ""))]]
    for key in ("by_section", "by_subset"):
        for name, r in p.get(key, {}).items():
            rows.append([f"{key[3:]}: {name}", num(r["estimate"]), interval(r), str(r.get("n_pairs", ""))])
    lines += table(["set", "accuracy", "95% CI", "pairs"], rows) + [""]
    if "rmbench" in p:
        lines += _rmbench_markdown(p["rmbench"])
    return lines


def _rmbench_markdown(rb: dict[str, Any]) -> list[str]:
    """The RM-Bench chosen-by-rejected style accuracy matrix and its hard, normal, easy and average accuracies."""
    lines = ["RM-Bench style matrix (rows: chosen style, columns: rejected style; 0 concise, "
             "1 detailed, 2 markdown). Hard = chosen less styled than rejected (upper right).", ""]
    lines += table(["chosen \\ rejected", "0", "1", "2"],
                    [[str(i)] + [num(v) for v in row] for i, row in enumerate(rb["matrix"])]) + [""]
    return lines + table(["RM-Bench", "accuracy", "95% CI"],
                         [[n, num(rb[n]["estimate"]), interval(rb[n])]
                          for n in ("hard", "normal", "easy", "average")]) + [""]


def _judge_diagnostics_markdown(audit: dict[str, Any]) -> list[str]:
    """The generative judge's digit mass, top-digit distribution and shares (rmeval.stats.judge_diagnostics)."""
    d = audit["judge_diagnostics"]
    thr = num(d.get("threshold", 0.9), 2)
    lines = ["## Generative judge diagnostics", "",
             f"Digit mass: the probability of the rating digits in the judge's whole next-token distribution "
             f"(the expected digit renormalises over the digits). Rows under {thr}: the share of rows whose "
             f"mass is below {thr}, with a prompt-bootstrap interval.", ""]
    rows = [[c, str(m["n_rows"]), num(m["mean"]), num(m["median"]), num(m["min"]), num(m["share_below"]["estimate"]),
             interval(m["share_below"])] for c, m in d.get("digit_mass", {}).items()]
    lines += table(["condition", "rows", "mean mass", "median", "min", f"rows under {thr}", "95% CI"], rows) + [""]
    if "top_digit" in d:
        t = d["top_digit"]
        lines += [f"Most likely digit on the {t['n_rows']} original-condition rows (a judge that puts most rows at 5 "
                  "compresses the expected digit at the top of the scale):", ""]
        lines += table(["top digit", *t["shares"]], [["share of rows", *(num(v) for v in t["shares"].values())]]) + [""]
    if "share" in d:
        sh = d["share"]
        lines += ["Between-prompt share of the expected digit, of the logit of p(5) (free of the ceiling) and of "
                  "the pooled ranks of the expected digit, on the same responses; the difference is paired.", ""]
        rows = [[label, num(sh[k]["estimate"]), interval(sh[k])] for k, label in
                (("expected_digit", "expected digit"), ("logit_top_digit", "logit p(5)"),
                 ("difference", "logit p(5) − expected digit"), ("ranks", "ranks of the expected digit")) if k in sh]
        lines += table(["score", "share", "95% CI"], rows) + [""]
    return lines


SPLIT_LABELS = {"all": "all prompts", "single_turn": "single-turn prompts", "generic": "generic prompt, all prompts",
                "generic_single_turn": "generic prompt, single-turn prompts"}


def _splits_markdown(audit: dict[str, Any]) -> list[str]:
    sp = audit["prompt_splits"]
    if not sp:
        return []
    lines = ["## Prompt splits", "",
             "Half A minus half B of the prompts: longer vs shorter (word count above the median prompt's) and "
             f"two balanced topic splits (halves of a {sp.get('n_topic_clusters', 20)}-cluster TF-IDF k-means of "
             "the first user turns). Mean score difference in SDs of the subset's scores, the humans' difference "
             "on the same responses and model minus human (paired); the share and the random-transplant margin "
             "on each half and their difference.", ""]
    rows = []
    for split, res in sp.items():
        if not isinstance(res, dict):
            continue
        a, b = res.get("halves", ["A", "B"])
        for subset, c in res.items():
            if not isinstance(c, dict):
                continue
            rows.append([f"{split}: {a} − {b}", SPLIT_LABELS.get(subset, subset),
                         f"{c['n_prompts_a']}/{c['n_prompts_b']}",
                         estimate(c["score_difference"]),
                         estimate(c["human_difference"]) if "human_difference" in c else MISSING,
                         estimate(c["model_minus_human"]) if "model_minus_human" in c else MISSING,
                         f"{num(c['share_a']['estimate'])} / {num(c['share_b']['estimate'])}",
                         estimate(c["share_difference"]),
                         estimate(c["margin_difference"]) if "margin_difference" in c else MISSING])
    return lines + table(["split", "prompts", "A/B", "score Δ (SD)", "human Δ (SD)", "model − human",
                          "share A / B", "share Δ", "margin Δ (SD)"], rows) + [""]


REMOVAL_HEAD = ["share", "share change", "between removed", "within removed"]


def _removal(r: dict[str, Any]) -> list[str]:
    return [estimate(r["share" if "share" in r else "residual_share"]), estimate(r["share_change"]),
            estimate(r["between_removed"]), estimate(r["within_removed"])]


def _explained_markdown(audit: dict[str, Any]) -> list[str]:
    ve = audit["variance_explained"]
    if not ve:
        return []
    lines = ["## What explains the prompt-level variance", "",
             "Adjustments of the score and the variance they take away: 'between removed' is 1 - the "
             "between-prompt variance component after / before, 'within removed' the same within prompts, so an "
             "adjustment can raise the share while removing part of the prompt level. Probes are cross-fitted over "
             f"five folds grouped by {ve.get('fold_grouping', 'prompt')}, the penalty chosen inside each fold; "
             "intervals hold the fitted probes fixed and resample prompts.", ""]
    c = ve.get("calibrated")
    if c:
        lines += [f"Calibrated to {c['attribute']} (rating units; cross-fitted linear calibration): between-prompt "
                  "variance of the calibrated score beside the rating's on the same responses.", ""]
        lines += table(["calibrated score", "human rating", "difference", "calibrated share", "human share",
                        "R² of the calibration"],
                       [[estimate(c["between_variance"]), estimate(c["human_between_variance"]),
                         estimate(c["difference"]), estimate(c["share"]), estimate(c["human_share"]),
                         estimate(c["r2"])]]) + [""]
    rows = [[f"ratings: {', '.join(r['covariates'])}" if n != "log_length" else "log response length", MISSING,
             *_removal(r)] for n, r in ve.get("rating_residuals", {}).items()]
    rp = ve.get("response_probes", {})
    rows += [[f"response probe: {n.replace('_', ' ')}", estimate(r["r2"]), *_removal(r)]
             for n, r in rp.items() if isinstance(r, dict)]
    if rows:
        lines += ["Residualised score (OLS on the shown response's ratings; response probes from "
                  f"{rp.get('n_embedding', 0)} sentence-embedding and {rp.get('n_text_features', 0)} text features, "
                  "cross-validated by prompt).", ""]
        lines += table(["adjustment", "R² (cv)", *REMOVAL_HEAD], rows) + [""]
    pp = ve.get("prompt_probe", {})
    prow = [[n.replace("_", " "), estimate(r["r2"]), estimate(r["r2_in_sample"]), *_removal(r), r["n_features"]]
            for n, r in pp.items() if isinstance(r, dict)]
    if prow:
        lines += ["Prompt probe: ridge from a prompt-level feature block to the prompt's mean score, cross-fitted "
                  "by prompt and in sample; the residual is each score minus its prompt's cross-fitted prediction.",
                  ""]
        lines += table(["features", "R² (cross-fitted)", "R² (in sample)", *REMOVAL_HEAD, "dimensions"], prow) + [""]
    cr = ve.get("crossed")
    if cr:
        lines += ["Crossed decomposition of the transplant scores (own, donor"
                  + (" and generic" if cr.get("generic") else "") + " prompts): score = response effect + prompt "
                  "effect + match × [own prompt], OLS, refitted in every resample; in SDs of the original scores.",
                  ""]
        names = {"match": "match (own prompt)", "sd_response": "SD of response effects",
                 "sd_donor": "SD of donor-prompt effects", "generic_minus_donor": "generic minus mean donor prompt",
                 "match_over_response": "match / response SD", "donor_over_response": "donor SD / response SD"}
        lines += table(["term", "estimate", "95% CI"],
                       [[label, num(cr[n]["estimate"]), interval(cr[n])]
                        for n, label in names.items() if n in cr]) + [""]
    return lines


def _variants_markdown(audit: dict[str, Any]) -> list[str]:
    sv = audit["scoring_variants"]
    if not sv:
        return []
    lines = ["## The same texts scored another way", "",
             "Shares and transplant figures of the audited scores (reference) and of another scoring of the same "
             "texts (variant, e.g. without the end-of-sequence marker), with variant minus reference on the same "
             "prompt resamples.", ""]
    rows = []
    for name, r in sv.items():
        for cond in ("original", "generic"):
            if f"share_{cond}" in r:
                x = r[f"share_{cond}"]
                rows.append([name, f"share ({cond})", estimate(x["reference"]), estimate(x["variant"]),
                             estimate(x["difference"])])
        for kind, t in r.get("transplant", {}).items():
            for fig in ("margin_sd", "accuracy", "auc"):
                rows.append([name, f"{kind}: {fig.replace('_sd', ' (SD)')}", estimate(t["reference"][fig]),
                             estimate(t["variant"][fig]), estimate(t["difference"][fig])])
    return lines + table(["variant", "figure", "reference", "variant", "variant − reference"], rows) + [""]


for _name, _render, _sections in (
        ("share", _share_markdown, None), ("share_vs_human", _share_vs_human_markdown, None),
        ("share_difference", _share_difference_markdown, None), ("prompt_means", _prompt_means_markdown, None),
        ("prompt_only", _prompt_only_markdown, None), ("transplant", _transplant_markdown, None),
        ("fixed_reply", _fixed_reply_markdown, None), ("shifts", _shifts_markdown, ("paraphrase", "last_turn")),
        ("sibling_regression", _sibling_regression_markdown, ("sibling_regression", "sibling_regression_by_condition")),
        ("selection", _selection_markdown, None), ("centering", _centering_markdown, None),
        ("prompt_splits", _splits_markdown, None), ("variance_explained", _explained_markdown, None),
        ("scoring_variants", _variants_markdown, None), ("pairwise", _pairwise_markdown, None),
        ("judge_diagnostics", _judge_diagnostics_markdown, None)):
    register_markdown(_name, _render, sections=_sections)


# The interval figures (shares, transplant, variance explained) draw one row per label, the labels
# on the y axis: a long or numerous label set grows the figure downwards and leaves its width, and
# so its text size on a page, as it is (labels along x grew a 12-label figure to 16 x 3.8 inches).
# Constrained layout keeps every label, the title and the legend inside the canvas.
INTERVAL_WIDTH = 6.0  # inches, before the labels' room
INTERVAL_DPI = 130
INTERVAL_PAD = 0.1  # inches of clear canvas around the drawn content (13 px at INTERVAL_DPI)


def _interval_axes(labels: list[str], title: str, xlabel: str, rows_per_label: int = 1) -> tuple[Any, Any, Any]:
    """(figure, axes, y of each label, top to bottom) of an interval figure sized to its labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    longest = max((len(label) for label in labels), default=1)
    width = INTERVAL_WIDTH + min(0.075 * longest, 4.0)  # 9-point text: about 0.075 inches a character
    height = max(2.8, 1.5 + 0.32 * len(labels) * (1 + 0.5 * (rows_per_label - 1)))
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    fig.get_layout_engine().set(w_pad=INTERVAL_PAD, h_pad=INTERVAL_PAD)
    y = np.arange(len(labels))[::-1].astype(float)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", color="0.9", lw=0.6)
    return fig, ax, y


def _intervals(rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """(estimates, 2 x n error lengths below and above) of interval rows {estimate, ci95}."""
    import numpy as np

    est = np.array([float(r["estimate"]) for r in rows])
    lo = np.array([float(r["ci95"][0]) for r in rows])
    hi = np.array([float(r["ci95"][1]) for r in rows])
    return est, np.nan_to_num(np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)]))


def _errorbar_plot(path: Path, labels: list[str], rows: list[dict[str, Any]], value_label: str, title: str,
                   band: dict[str, Any] | None = None, zero_line: bool = True) -> Path:
    """One estimate with its 95% interval per label; ``band``: the human figure and its interval."""
    fig, ax, y = _interval_axes(labels, title, value_label)
    if band is not None:
        ax.axvspan(band["ci95"][0], band["ci95"][1], color="tab:green", alpha=0.2, label="human 95% CI")
        ax.axvline(band["estimate"], color="tab:green", lw=1.5, label="human rating")
    if zero_line:
        ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    est, err = _intervals(rows)
    ax.errorbar(est, y, xerr=err, fmt="o", color="tab:blue", capsize=4)
    if band is not None:
        fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return atomic_save_figure(fig, path, dpi=INTERVAL_DPI)


def _paired_plot(path: Path, labels: list[str], model: list[dict[str, Any]], human: list[dict[str, Any]]) -> Path:
    """Model share and human share of the same responses and transform, side by side per row."""
    fig, ax, y = _interval_axes(labels, "Between-prompt share: model vs human on the same responses",
                                "between-prompt share (ICC1)", rows_per_label=2)
    for rows, dy, color, name in ((model, 0.15, "tab:blue", "model"), (human, -0.15, "tab:green",
                                                                       "human, same responses")):
        est, err = _intervals(rows)
        ax.errorbar(est, y + dy, xerr=err, fmt="o", color=color, capsize=4, label=name)
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return atomic_save_figure(fig, path, dpi=INTERVAL_DPI)


def write_report(audit: dict[str, Any], out_dir: str | os.PathLike, title: str = "matchrm audit", *,
                 started: float | None = None) -> dict[str, Path]:
    """OUT/audit.json, OUT/audit.md, OUT/shares.png, OUT/transplant.png, OUT/variance_explained.png
    (plots where data exist). audit.json is written last, so that its ``meta.seconds`` (with
    ``started``, a ``time.perf_counter()`` reading: the seconds from then) covers the report too, and
    a folder with audit.json holds the whole report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"markdown": atomic_write_text(out / "audit.md", render_markdown(audit, title))}
    paths.update(_plots(audit, out))
    if started is not None:
        audit.setdefault("meta", {})["seconds"] = round(time.perf_counter() - started, 3)
    paths["json"] = atomic_write_json(out / "audit.json", audit)
    return paths


def _plots(audit: dict[str, Any], out: Path) -> dict[str, Path]:
    """The report's figures, where their sections have data."""
    paths: dict[str, Path] = {}
    sh = audit.get("share", {})
    names = [n for n in SHARE_NAMES if n in sh and n != "human"]
    vs = audit.get("share_vs_human", {})
    if vs:
        paths["shares"] = _paired_plot(out / "shares.png", list(vs), [vs[n]["model"] for n in vs],
                                       [vs[n]["human"] for n in vs])
    elif names:
        paths["shares"] = _errorbar_plot(out / "shares.png", names, [sh[n] for n in names],
                                         "between-prompt share (ICC1)", "Between-prompt variance share",
                                         band=sh.get("human"))
    if audit.get("transplant"):
        kinds = list(audit["transplant"])
        paths["transplant"] = _errorbar_plot(out / "transplant.png", kinds,
                                             [audit["transplant"][k]["margin_sd"] for k in kinds],
                                             "margin (original-score SDs)", "Own vs wrong prompt margin")
    removed = _removed_rows(audit.get("variance_explained", {}))
    if removed:
        paths["variance_explained"] = _errorbar_plot(
            out / "variance_explained.png", [n for n, _ in removed], [r for _, r in removed],
            "between-prompt variance removed", "Between-prompt variance taken away by each adjustment")
    return paths


def _removed_rows(ve: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, between_removed) of every adjustment in the variance_explained section."""
    out = [("log length" if n == "log_length" else "ratings: " + ("all" if n == "all_ratings" else n.replace("_", "+")),
            r["between_removed"]) for n, r in ve.get("rating_residuals", {}).items()]
    out += [(f"probe: {n.replace('_', ' ')}", r["between_removed"]) for n, r in ve.get("response_probes", {}).items()
            if isinstance(r, dict)]
    out += [(f"prompt: {n.replace('_', ' ')}", r["between_removed"]) for n, r in ve.get("prompt_probe", {}).items()
            if isinstance(r, dict)]
    return out


def wandb_scalars(audit: dict[str, Any], prefix: str = "audit") -> dict[str, float]:
    """Every number of the audit under its flattened key (``audit/share/original/estimate``; an
    interval's ends as ``.../ci95/lo`` and ``.../hi``): what W&B gets of every section."""
    return {k: v for k, v in flatten(audit, prefix).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def log_audit(tracker: Tracker, audit: dict[str, Any], paths: dict[str, Path] | None = None,
              step: int | None = None, prefix: str = "audit") -> None:
    """Flattened scalars (``wandb_scalars``), a table of shares, and the plots."""
    if not tracker.enabled:
        return
    tracker.log(wandb_scalars(audit, prefix), step=step)
    sh = audit.get("share", {})
    rows = [[n, sh[n]["estimate"], sh[n]["ci95"][0], sh[n]["ci95"][1], sh[n].get("n_prompts")]
            for n in SHARE_NAMES if n in sh]
    if rows:
        tracker.log_table(f"{prefix}/share_table", ["share", "estimate", "lo", "hi", "n_prompts"], rows, step=step)
    for key in ("shares", "transplant", "variance_explained"):
        if paths and key in paths:
            tracker.log_image(f"{prefix}/{key}", paths[key], step=step)
