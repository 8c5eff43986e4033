"""What computes each kind of table, row by row, then over the panel, on the existing pipelines:

- ``audit`` (the study's audit tables): every model scored on each of its data sets under the data
  set's prompt conditions by ``rmeval.audit.pipeline`` (audit.json); human reference rows by
  ``rmeval.audit.human.human_audit`` (human.json).
- ``pairwise`` (RewardBench / RewardBench 2 scoring validation): ``rmeval.audit.pairwise``.
- ``suitability`` (Reward Auditor's Table 1 and the per-subset radar): each model's perturbation
  suite scored and inferred alone (``rmeval.suitability.run_suitability``); the panel step sets the
  margins by the panel rule over every model present (``finalize``), per data set, and adds the
  radar (share of models significant and sum of d per perturbation, ``subset_summary``), and by
  perturbation code the p-value methods' agreement across models (B.1, Figures 5-6) and the
  accuracy change against suitability (B.4, Tables 3-4).
- ``policy`` (Reward Auditor's PPO table): the suitability panel, each reward model's win rate of
  the perturbed-environment policy against the clean one (``rmtrain policy-eval``'s winrate.json;
  in a stand-in run, two untrained tiny policies judged by the tiny judge through
  ``rmeval.experiments.winrate``), and the Spearman table (``spearman_table``).
- ``judges`` (JudgeProfile): each judge elicited on the items (``rmeval.judges.pipeline.run_elicit``);
  the panel step reweights every judge toward the reference labels (``reweight_judgments``) and
  analyses agreement (``analyze_judgments``: the hidden consensus).
- ``leaderboard`` (What Pairwise Evaluation Misses' Table 22): no model rows; the panel step reads
  ``rmeval leaderboard``'s leaderboard.json (a stand-in run runs that experiment on tiny models),
  ``rmeval.reproduce.leaderboard``.

Each row function returns {data key: result document path}; the panel functions return the
panel document by data key and may replace rows' documents (the suitability margins)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmcore.io.files import atomic_write_json
from rmeval.audit.human import human_audit
from rmeval.audit.pairwise import pairwise_checkpoint
from rmeval.audit.pipeline import audit, audit_checkpoint
from rmeval.audit.settings import HumanSettings
from rmeval.reproduce.judges import elicit_judge, judges_table
from rmeval.reproduce.leaderboard import leaderboard_panel
from rmeval.reproduce.policy import policy_table
from rmeval.reproduce.settings import analysis_settings, strict_settings
from rmeval.scoring import load_scorer
from rmeval.stats.confidence_drop_structure import subset_summary
from rmeval.suitability import finalize, write_suitability
from rmeval.suitability import run_suitability as run_suite

RowDocs = dict[str, dict[str, Any]]  # row -> data key -> document


# -- rows ---------------------------------------------------------------------------------------------

def run_human(ctx: Any, row: Any) -> dict[str, str]:
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    entry = ctx.entry(row.data)
    hs = strict_settings(HumanSettings, {"max_prompts": entry.max_prompts, "n_boot": s.stats.n_boot,
                                      "seed": s.stats.seed,
                                      "attribute": row.attribute or getattr(s, "attribute", None),
                                      "annotations": ctx.annotations(row), "raters_per_rating": row.raters_per_rating,
                                      "reliabilities": dict(row.reliabilities)}, f"{ctx.recipe.path}: human {row.name}")
    out = ctx.row_dir(row.name) / row.data
    human_audit(ctx.spec(row.data), hs, out)
    return {row.data: str(out / "human.json")}


def run_audit(ctx: Any, m: Any) -> dict[str, str]:
    docs = {}
    for key in ctx.model_data(m):
        entry, out = ctx.entry(key), ctx.row_dir(m.name) / key
        inputs = ctx.condition_inputs(key)
        s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in, conditions=list(entry.conditions), progress=False,
                              **inputs)
        rs = ctx.rating_set(key)
        if ctx.endpoint(m):  # a served judge: its server holds the model
            audit(ctx.endpoint_scorer(m), rs, s, out, label=m.name, title=f"Audit of {m.name}", data=str(entry.spec))
        else:
            scorer = ctx.scorer_settings(m)
            audit_checkpoint(scorer.model, rs, scorer, s, out, name=m.name, data=json.dumps(ctx.spec(key)),
                             **ctx.wandb)
            if entry.scoring_variants:
                scoring_variants(ctx, m, rs, scorer, s, out, entry.scoring_variants, json.dumps(ctx.spec(key)))
        docs[key] = str(out / "audit.json")
    return docs


def scoring_variants(ctx: Any, m: Any, rs: Any, scorer: Any, s: Any, out: Path, variants: dict[str, list[str]],
                     data: str) -> None:
    """The same texts audited again without the markers each variant names (``drop_special``:
    ``rmeval audit --drop-special-tokens``), then set beside the audit's own scores
    (``rmeval stats --compare-scores``): audit.json gains ``scoring_variants`` (shares and transplant
    figures of both scorings with paired differences) and each variant's ``markers_dropped``."""
    from dataclasses import replace

    from rmeval.audit.pipeline import audit_tables

    files, dropped = {}, {}
    for name, markers in variants.items():
        vout = out / "variants" / name
        vs = replace(scorer, drop_special=tuple(markers))
        res = audit_checkpoint(vs.model, rs, vs, s, vout, name=f"{m.name}-{name}", data=data, **ctx.wandb)
        files[name] = str(vout / "scores.parquet")
        dropped[name] = (res or {}).get("markers_dropped", {})
    res, _ = audit_tables(out / "scores.parquet", out / "ratings.parquet", s, out / "variants" / "compared",
                          compare=files, **ctx.wandb)
    doc = json.loads((out / "audit.json").read_text())
    doc["scoring_variants"] = {n: {**v, "markers_dropped": dropped[n]}
                               for n, v in res.get("scoring_variants", {}).items()}
    atomic_write_json(out / "audit.json", doc)


def run_pairwise(ctx: Any, m: Any) -> dict[str, str]:
    docs = {}
    for key in ctx.model_data(m):
        out = ctx.row_dir(m.name) / key
        s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in, progress=False)
        scorer = ctx.scorer_settings(m)
        pairwise_checkpoint(scorer.model, ctx.rating_set(key), scorer, s, out, name=m.name,
                            data=json.dumps(ctx.spec(key)), **ctx.wandb)
        docs[key] = str(out / "pairwise.json")
    return docs


def run_suitability(ctx: Any, m: Any) -> dict[str, str]:
    """One model's suites scored and inferred (no margin yet): suitability_model.json per data set."""
    docs = {}
    seed = ctx.recipe.seed
    for key in ctx.model_data(m):
        out = ctx.row_dir(m.name) / key
        s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
        rs = ctx.rating_set(key)
        scorer = load_scorer(ctx.scorer_settings(m))
        try:
            res = run_suite(scorer, rs, s.specs(rs), settings=s.inference(seed), rewriters=s.rewriters(out, seed),
                            cache_path=out / "score_cache.sqlite", pairs_path=out / "suitability_pairs.parquet",
                            max_items=s.max_items, base_level=s.base_level, attribute=None,
                            judge_style=s.judge_style, judge_explain_tokens=s.judge_explain_tokens)
            res["meta"]["placement"] = scorer.describe()
        finally:
            scorer.close()
        docs[key] = str(atomic_write_json(out / "suitability_model.json", res))
    return docs


def run_judge(ctx: Any, m: Any) -> dict[str, str]:
    return elicit_judge(ctx, m)


# -- panels -------------------------------------------------------------------------------------------

def suitability_panel(ctx: Any, docs: RowDocs) -> dict[str, Any]:
    """Per data set: the margins by the panel rule over the models present, their unsuitable flags
    and risks (each row's document replaced by its finalized record), the radar and the joint report."""
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    panel: dict[str, Any] = {}
    for key in ctx.recipe.data:
        results = {row: d[key] for row, d in docs.items() if key in d and "perturbations" in d[key]}
        if not results:
            continue
        record = finalize(results, s.inference(ctx.recipe.seed))
        write_suitability(results, ctx.out / "panel" / key, title=f"Suitability panel ({key}, {len(results)} models)")
        record = dict(record)
        _fails(results)
        for r in results.values():
            r["by_code"] = by_code(r["perturbations"])
        radar = subset_summary({key: {n: r["perturbations"] for n, r in results.items()}}, s.alpha)[key]
        record["radar"] = by_code(radar)
        for k, to in (("accuracy_agreement", "accuracy_by_code"), ("method_agreement_by_perturbation",
                                                                   "method_agreement_by_code")):
            if k in record:  # by code, as the tables' columns
                record[to] = by_code(record[k])
        record["n_models"] = len(results)
        panel[key] = record
    return panel


SOURCE_ORDER = ("auditor", "rmbench", "file", "lm", "")  # which version of a code a table shows first


def by_code(per_spec: dict[str, Any]) -> dict[str, Any]:
    """Records keyed by perturbation code (EF, ..., SLC) whatever their source (``SP@rmbench``,
    ``ST@auditor``): the paper's columns; where a code has several, Reward Auditor's released files
    first, then RM-Bench's style levels, a rewrite file, a model rewriter, the rule."""
    out: dict[str, Any] = {}
    for spec in sorted(per_spec, key=lambda s: SOURCE_ORDER.index(s.partition("@")[2])
                       if s.partition("@")[2] in SOURCE_ORDER else len(SOURCE_ORDER)):
        out.setdefault(spec.partition("@")[0], per_spec[spec])
    return out


def _fails(results: dict[str, Any]) -> None:
    """Each model's ``fails``: whether some controlled and some stylized perturbation is unsuitable
    (Reward Auditor: 21 of 26 models fail on both kinds)."""
    for r in results.values():
        by = {g: any(v.get("unsuitable") for v in r["perturbations"].values() if v.get("group") == g)
              for g in ("controlled", "stylized")}
        r["fails"] = {**{g: int(v) for g, v in by.items()}, "both": int(all(by.values())),
                      "n_unsuitable": sum(bool(v.get("unsuitable")) for v in r["perturbations"].values())}


def policy_panel(ctx: Any, docs: RowDocs) -> dict[str, Any]:
    return policy_table(ctx, docs, suitability_panel(ctx, docs))


def judges_panel(ctx: Any, docs: RowDocs) -> dict[str, Any]:
    return judges_table(ctx, docs)


Runner = Callable[[Any, Any], dict[str, str]]
ANALYSIS_STEPS: dict[str, tuple[Runner | None, Callable[[Any, RowDocs], dict[str, Any]] | None]] = {
    "audit": (run_audit, None),
    "pairwise": (run_pairwise, None),
    "suitability": (run_suitability, suitability_panel),
    "policy": (run_suitability, policy_panel),
    "judges": (run_judge, judges_panel),
    "leaderboard": (None, leaderboard_panel),  # no model rows: the experiment scores its own reward models
}


def read_docs(paths: dict[str, str], base: str | os.PathLike) -> dict[str, Any]:
    """{data key: document} of a finished row (paths relative to OUT or absolute)."""
    out = {}
    for key, p in paths.items():
        path = Path(p) if Path(p).is_absolute() else Path(base) / p
        out[key] = json.loads(path.read_text())
    return out
