"""A leaderboard under unequal prompt coverage (the study's Table 22): do mean reward scores rank
policies the same way when each is scored on a different mix of prompts, raw and centred, and how
do those rankings compare with a judge's?

Protocol (``recipes/leaderboard_helpsteer2_study.yaml``): every policy answers every prompt
greedily (``rmeval.experiments.responses``; the study: five policies, at most 2,048 new tokens, the 356
single-turn HelpSteer2 validation prompts). Each reward model scores every response under its own
prompt (``rmeval.experiments.pool.score_pool``: the audit's scoring run, cached). The four prompt mixes are the
prompts above and at or below the median word count, and the two halves of a k-means clustering
(20 clusters) of TF-IDF vectors of the first turns, the clusters split into two halves of nearly
equal prompt counts (largest cluster first, each to the half with fewer prompts). Each of the
assignments gives every policy one mix drawn uniformly; an assignment putting every policy on the
same mix is drawn again. The centred score subtracts, per prompt, the anchor policy's score (the
anchor answers every prompt), or with ``centre_on: policies`` the mean over policies.

The judge (``rmeval.experiments.comparisons``) compares every policy's response with the anchor's on every
prompt in both orders ("Which response is more helpful to the user? Answer with the letter A or B
only.", the probability of A renormalised over the two letters, averaged over the orders); a
policy's judge value is its mean probability of beating the anchor (the anchor's is 1/2). The
judge's ranking is the full-coverage reference. With labelled pairs in the rating set (released
preferences, or ratings that differ), the judge is first checked against the human order on a
seeded sample of them. With a second judge: the two judges' rankings (Kendall's tau) and their
agreement on the judged pairs.

The statistics (``rmeval.stats.ranking.coverage_leaderboard``): per reward model and judge, the
mean over assignments of Kendall's tau between the raw (centred) ranking and the judge's, their
difference, tau with the full-coverage ranking, the number of assignments whose ranking is not the
full-coverage one; 95% percentile intervals over prompt resamples.

Outputs in OUT/: ``leaderboard.json``, ``leaderboard.md``, ``leaderboard.png``, ``responses.parquet``,
``scores.parquet`` (prompt_id, policy, reward_model, score), ``judgments.parquet`` (prompt_id,
policy, judge, p_policy_first, p_anchor_first, p_better), ``mixes.parquet`` (prompt_id, words,
length mix, topic cluster, topic mix).
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
from rmcore.data.pairs import build_pairs
from rmcore.data.schema import PromptRecord, RatingSet, pick_attribute
from rmcore.errors import ConfigError
from rmcore.io.files import atomic_save_figure, atomic_write_json, atomic_write_text
from rmcore.io.markdown import estimate, interval, num, table
from rmcore.io.tables import atomic_write_table
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, flatten
from rmeval.experiments.comparisons import HelpfulnessJudge
from rmeval.experiments.pool import load_reward_scorer, score_pool
from rmeval.experiments.responses import corpus, generate_responses, resolve_model
from rmeval.experiments.settings import TOY_NOTICE, LeaderboardConfig, check_reward_models
from rmeval.stats.ranking import (
    coverage_leaderboard,
    draw_assignments,
    head_to_head,
    kendall_tau_b,
    pair_agreement,
)
from rmeval.tracking import evaluation_tracker

MIX_NAMES = ("long", "short", "topic_a", "topic_b")


def _first_turn(p: PromptRecord) -> str:
    return next((m["content"] for m in p.messages if m["role"] == "user"), "")


def balanced_halves(sizes: np.ndarray) -> np.ndarray:
    """0/1 half of each cluster: the largest first, each to the half with fewer prompts so far
    (ties: the first half)."""
    half = np.zeros(len(sizes), dtype=int)
    counts = [0, 0]
    for c in sorted(range(len(sizes)), key=lambda c: (-sizes[c], c)):
        h = int(counts[1] < counts[0])
        half[c] = h
        counts[h] += int(sizes[c])
    return half


def prompt_mixes(prompts: list[PromptRecord], *, n_clusters: int = 20,
                 seed: int = 0) -> tuple[np.ndarray, pd.DataFrame]:
    """(4, N) masks of the four mixes (``MIX_NAMES``) and a per-prompt table (prompt_id, words,
    length mix, cluster, topic mix); see the module doc."""
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(prompts) < 4:
        raise ConfigError(f"leaderboard: four prompt mixes need at least 4 prompts, got {len(prompts)}")
    words = np.array([sum(len(m["content"].split()) for m in p.messages if m["role"] == "user") for p in prompts])
    long = words > np.median(words)
    texts = [_first_turn(p) for p in prompts]
    x = TfidfVectorizer().fit_transform(texts)
    k = min(n_clusters, len({t for t in texts}), len(prompts) // 2)
    if k < 2:
        raise ConfigError("leaderboard: the topic mixes need at least two distinct first turns")
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x)
    topic_a = balanced_halves(np.bincount(labels, minlength=k))[labels] == 0
    masks = np.stack([long, ~long, topic_a, ~topic_a])
    table = pd.DataFrame({"prompt_id": [p.prompt_id for p in prompts], "words": words,
                          "length_mix": np.where(long, "long", "short"), "cluster": labels,
                          "topic_mix": np.where(topic_a, "topic_a", "topic_b")})
    table.attrs["n_clusters"] = int(k)
    return masks, table


def leaderboard_prompts(rs: RatingSet, *, single_turn_only: bool, max_prompts: int | None, seed: int) -> RatingSet:
    """The prompts the policies answer: single-turn ones when asked, then a seeded sample."""
    if single_turn_only:
        rs = rs.subset([p.prompt_id for p in rs.prompts if p.single_turn])
    if not len(rs):
        raise ConfigError("leaderboard: no prompts left (single_turn_only keeps only single-turn prompts)")
    return rs.sample(max_prompts, seed)


def judge_against_humans(judge: Any, rs: RatingSet, n_pairs: int | None, *, seed: int, n_boot: int) -> dict[str, Any]:
    """The judge on labelled pairs of the rating set (released preferences, or rating-ordered
    pairs with ties dropped), both orders: its agreement with the human order."""
    if n_pairs == 0 or (not rs.preferences and not rs.attributes):
        return {}
    pairs = build_pairs(rs, attribute=pick_attribute(rs.attributes)).pairs
    if not pairs:
        return {}
    if n_pairs is not None and len(pairs) > n_pairs:
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), n_pairs, replace=False))
        pairs = [pairs[i] for i in keep]
    by_id = rs.by_id()
    text = {(p.prompt_id, r.response_id): r.text for p in rs.prompts for r in p.responses}
    msgs = [by_id[q.prompt_id].messages for q in pairs]
    chosen = [text[(q.prompt_id, q.chosen_id)] for q in pairs]
    rejected = [text[(q.prompt_id, q.rejected_id)] for q in pairs]
    p_cr, p_rc = judge.both_orders(msgs, chosen, rejected)
    res = pair_agreement((p_cr + 1 - p_rc) / 2, [q.prompt_id for q in pairs], n_boot=n_boot, rng=seed)
    res["label_source"] = "released preferences" if rs.preferences else "ratings"
    return res


def run_leaderboard(cfg: LeaderboardConfig, *, out: str | os.PathLike | None = None,
                    wandb_project: str = DEFAULT_PROJECT, wandb_mode: str | None = None) -> dict[str, Any]:
    """The leaderboard experiment of ``cfg`` into ``out`` (default cfg.output_dir)."""
    t0 = time.perf_counter()
    cfg.validate()
    out = Path(out or cfg.output_dir)
    full = load_data(cfg.data)
    rs = leaderboard_prompts(full, single_turn_only=cfg.single_turn_only, max_prompts=cfg.max_prompts, seed=cfg.seed)
    check_reward_models(cfg.reward_model_settings())
    texts = corpus(rs.prompts)
    build = out / "models"
    policies = cfg.policy_specs()
    names = [p.name for p in policies]
    anchor = names.index(cfg.anchor)
    pids = [p.prompt_id for p in rs.prompts]
    masks, mix_table = prompt_mixes(rs.prompts, n_clusters=cfg.mixes.n_clusters, seed=cfg.mixes.seed)
    atomic_write_table(out / "mixes.parquet", mix_table)

    # -- responses, scores, judgments ------------------------------------------------------------
    responses = pd.concat([generate_responses(rs.prompts, pol, cfg.generation, cache=out / "responses.sqlite",
                                              build_dir=build, texts=texts, progress=cfg.progress)
                           for pol in policies], ignore_index=True)
    responses["response_id"] = responses["policy"]
    atomic_write_table(out / "responses.parquet", responses)
    text = {(r.policy, r.prompt_id): r.response for r in responses.itertuples(index=False)}
    matrices = _reward_matrices(cfg, rs, responses, names, pids, out, texts=texts, build=build)
    judge_values, judges_meta, checks = _judge_matrices(cfg, rs, text, names, pids, out, texts=texts, build=build)

    # -- statistics --------------------------------------------------------------------------------
    assignments = draw_assignments(len(names), len(MIX_NAMES), cfg.n_assignments, cfg.assignment_seed)
    centre = anchor if cfg.centre_on == "anchor" else None
    by_rm: dict[str, Any] = {}
    for rm, m in matrices.items():
        by_rm[rm] = {j: coverage_leaderboard(m, jm, masks, assignments, anchor=centre, n_boot=cfg.n_boot, rng=cfg.seed)
                     for j, jm in judge_values.items()}
    result: dict[str, Any] = {
        "policies": names, "anchor": cfg.anchor, "centre_on": cfg.centre_on, "mixes": list(MIX_NAMES),
        "mix_sizes": {n: int(mk.sum()) for n, mk in zip(MIX_NAMES, masks)},
        "assignments": [[MIX_NAMES[i] for i in row] for row in assignments],
        "judges": judges_meta, "judge_vs_human": checks, "judge_vs_judge": _judge_vs_judge(judge_values, anchor),
        "reward_models": by_rm,
        "meta": {"data": cfg.data if isinstance(cfg.data, str) else dict(cfg.data), "rating_set": full.name,
                 "n_prompts": len(pids), "single_turn_only": cfg.single_turn_only,
                 "skipped_rows": dict(full.skipped), "n_clusters": mix_table.attrs["n_clusters"],
                 "generation": cfg.generation.__dict__, "n_boot": cfg.n_boot, "seed": cfg.seed,
                 "n_capped_responses": int(responses["capped"].sum()), "toy": cfg.toy,
                 "seconds": round(time.perf_counter() - t0, 1)}}
    if cfg.toy:
        result["notice"] = TOY_NOTICE
    atomic_write_json(out / "leaderboard.json", result)
    atomic_write_text(out / "leaderboard.md", leaderboard_markdown(result))
    leaderboard_plot(result, out / "leaderboard.png")
    _log(result, out, cfg, wandb_project, wandb_mode)
    return result


def _reward_matrices(cfg: LeaderboardConfig, rs: RatingSet, responses: pd.DataFrame, names: list[str],
                     pids: list[str], out: Path, *, texts: Any, build: Path) -> dict[str, np.ndarray]:
    """Each reward model's (policy x prompt) score matrix of the policies' responses; writes scores.parquet."""
    score_rows = []
    matrices: dict[str, np.ndarray] = {}
    for rm, settings in cfg.reward_model_settings().items():
        settings = replace(settings, model=resolve_model(settings.model, texts=texts, build_dir=build))
        scorer = load_reward_scorer(settings, seed=cfg.seed)
        try:
            sc = score_pool(scorer, rs, responses, cache_path=out / "score_cache.sqlite", progress=cfg.progress,
                            label=rm)
        finally:
            scorer.close()
        m = sc.pivot(index="policy", columns="prompt_id", values="score").loc[names, pids].to_numpy(float)
        matrices[rm] = m
        score_rows.append(sc.assign(reward_model=rm)[["prompt_id", "policy", "reward_model", "score"]])
    atomic_write_table(out / "scores.parquet", pd.concat(score_rows, ignore_index=True))
    return matrices


def _judge_matrices(cfg: LeaderboardConfig, rs: RatingSet, text: dict[tuple[str, str], str], names: list[str],
                    pids: list[str], out: Path, *, texts: Any,
                    build: Path) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """Each judge's (policy x prompt) P(policy better than the anchor), both orders averaged (0.5 on the
    anchor's row), its meta with the head-to-heads against the anchor, and its check against the humans;
    writes judgments.parquet."""
    anchor = names.index(cfg.anchor)
    messages = [p.messages for p in rs.prompts]
    judge_values: dict[str, np.ndarray] = {}
    judge_rows, judges_meta = [], {}
    checks: dict[str, Any] = {}
    for jname, spec in cfg.judge_settings().items():
        judge = HelpfulnessJudge(spec, cache=out / "judgments.sqlite", texts=texts, build_dir=build)
        try:
            checks[jname] = judge_against_humans(judge, rs, cfg.judge_human_pairs, seed=cfg.seed, n_boot=cfg.n_boot)
            jm = np.full((len(names), len(pids)), 0.5)
            per_policy = {}
            for i, pol in enumerate(names):
                if i == anchor:
                    continue
                p_xy, p_yx = judge.both_orders(messages, [text[(pol, p)] for p in pids],
                                               [text[(cfg.anchor, p)] for p in pids])
                jm[i] = (p_xy + 1 - p_yx) / 2
                per_policy[pol] = head_to_head(p_xy, p_yx, n_boot=cfg.n_boot, rng=cfg.seed)
                judge_rows.append(pd.DataFrame({"prompt_id": pids, "policy": pol, "judge": jname,
                                                "p_policy_first": p_xy, "p_anchor_first": p_yx, "p_better": jm[i]}))
            judge_values[jname] = jm
            judges_meta[jname] = {"model": spec.model, "backend": spec.backend, "n_asked": judge.n_asked,
                                  "n_cached": judge.n_cached, "n_truncated": judge.n_truncated,
                                  "against_anchor": per_policy}
        finally:
            judge.close()
    atomic_write_table(out / "judgments.parquet", pd.concat(judge_rows, ignore_index=True))
    return judge_values, judges_meta, checks


def _judge_vs_judge(judge_values: dict[str, np.ndarray], anchor: int) -> dict[str, Any]:
    """Agreement of every two judges: Kendall's tau of their policy means and the share of (policy, prompt)
    cells, anchor and ties at 0.5 left out, where they pick the same side."""
    jnames = list(judge_values)
    between: dict[str, Any] = {}
    for a in range(len(jnames)):
        for b in range(a + 1, len(jnames)):
            ja, jb = judge_values[jnames[a]], judge_values[jnames[b]]
            rows = [i for i in range(len(ja)) if i != anchor]
            x, y = ja[rows].ravel(), jb[rows].ravel()
            ok = np.isfinite(x) & np.isfinite(y) & (x != 0.5) & (y != 0.5)
            between[f"{jnames[a]} vs {jnames[b]}"] = {
                "kendall_tau": float(kendall_tau_b(np.nanmean(ja, axis=1), np.nanmean(jb, axis=1))),
                "pairwise_agreement": float(((x[ok] > 0.5) == (y[ok] > 0.5)).mean()) if ok.any() else None,
                "n_pairs": int(ok.sum())}
    return between


def _log(result: dict[str, Any], out: Path, cfg: LeaderboardConfig, project: str, mode: str | None) -> None:
    tracker = evaluation_tracker("leaderboard", out, {"data": str(cfg.data), "policies": result["policies"],
                                                      "anchor": cfg.anchor, "n_assignments": cfg.n_assignments},
                                 project=project, mode=mode, job_type="leaderboard")
    try:
        flat = flatten({k: result[k] for k in ("reward_models", "judge_vs_human", "judge_vs_judge")})
        tracker.log({f"leaderboard/{k}": v for k, v in flat.items() if isinstance(v, (int, float))})
        tracker.log_image("leaderboard/plot", out / "leaderboard.png")
    finally:
        tracker.finish()


def leaderboard_markdown(result: dict[str, Any]) -> str:
    m = result["meta"]
    lines = ["# Leaderboard under unequal prompt coverage", ""]
    if result.get("notice"):
        lines += [f"**{result['notice']}**", ""]
    centre = "the anchor's score" if result["centre_on"] == "anchor" else "the mean over policies"
    lines += [f"{len(result['policies'])} policies answer {m['n_prompts']} "
              f"{'single-turn ' if m['single_turn_only'] else ''}prompts of {m['rating_set']} "
              f"(greedy, at most {m['generation']['max_new_tokens']} new tokens; {m['n_capped_responses']} responses "
              f"stopped at the cap). Mixes: long and short prompts (median word count), and two halves of "
              f"{m['n_clusters']} TF-IDF k-means clusters of the first turns ("
              + ", ".join(f"{k} {v}" for k, v in result["mix_sizes"].items()) + f" prompts). Each of "
              f"{len(result['assignments'])} assignments scores every policy on one mix; the centred score "
              f"subtracts {centre} on the same prompt. The judge compares each policy with the anchor "
              f"({result['anchor']}) in both orders. Intervals: 95% over {m['n_boot']} prompt resamples.", ""]
    jn = list(result["judges"])
    rows = []
    for i, pol in enumerate(result["policies"]):
        row = [pol + (" (anchor)" if pol == result["anchor"] else "")]
        for by_j in result["reward_models"].values():
            r = next(iter(by_j.values()))
            row += [num(r["full_coverage"]["raw"][i]), num(r["full_coverage"]["centred"][i])]
        row += [num(next(iter(result["reward_models"].values()))[j]["judge_value"][i]) for j in jn]
        rows.append(row)
    head = ["policy"]
    for rm in result["reward_models"]:
        head += [f"{rm} raw mean", f"{rm} centred mean"]
    head += [f"{j}: P(beats anchor)" for j in jn]
    lines += ["## Full coverage", ""] + table(head, rows) + [""]
    lines += ["## Unequal coverage", "",
              "Mean over assignments of Kendall's tau between each ranking and the judge's (full coverage), the "
              "centred-minus-raw difference, tau with the full-coverage ranking of the same score, and the number "
              "of assignments whose ranking differs from full coverage.", ""]
    rows = []
    for rm, by_j in result["reward_models"].items():
        for j, r in by_j.items():
            rows.append([rm, j, estimate(r["full_coverage"]["tau_raw_vs_judge"]),
                         estimate(r["raw"]["mean_tau_vs_judge"]), estimate(r["centred"]["mean_tau_vs_judge"]),
                         num(r["centred_minus_raw_tau_vs_judge"]["estimate"]),
                         interval(r["centred_minus_raw_tau_vs_judge"]),
                         num(r["raw"]["mean_tau_vs_full_coverage"]["estimate"]),
                         num(r["centred"]["mean_tau_vs_full_coverage"]["estimate"]),
                         f"{r['raw']['n_assignments_differing_from_full_coverage']} / "
                         f"{r['centred']['n_assignments_differing_from_full_coverage']}"])
    lines += table(["reward model", "judge", "τ full coverage", "τ raw", "τ centred", "Δτ", "95% CI",
                    "τ raw vs full", "τ centred vs full", "differing (raw / centred)"], rows) + [""]
    checks = {j: c for j, c in result["judge_vs_human"].items() if c}
    if checks:
        lines += ["## The judge against the human order", ""]
        lines += table(["judge", "agreement", "95% CI", "pairs", "labels"],
                       [[j, num(c["estimate"]), interval(c), c["n_pairs"], c["label_source"]]
                        for j, c in checks.items()]) + [""]
    lines += ["## Judges against the anchor", ""]
    rows = []
    for j, meta in result["judges"].items():
        for pol, h in meta["against_anchor"].items():
            if "win_rate" in h:
                rows.append([j, pol, estimate(h["win_rate"]), num(h["self_agreement"]["estimate"]),
                             num(h["same_position_both_orders"]), h["n_missing"]])
    lines += table(["judge", "policy", "P(beats anchor)", "self-agreement across orders", "same letter both orders",
                    "missing"], rows) + [""]
    if result["judge_vs_judge"]:
        lines += ["## Judge against judge", ""]
        lines += table(["judges", "Kendall's tau", "pairwise agreement", "pairs"],
                       [[k, num(v["kendall_tau"]), num(v["pairwise_agreement"]), v["n_pairs"]]
                        for k, v in result["judge_vs_judge"].items()]) + [""]
    return "\n".join(lines)


def leaderboard_plot(result: dict[str, Any], path: str | os.PathLike) -> Path:
    """Per reward model (and the primary judge): Kendall's tau with the judge's ranking under each
    assignment, raw against centred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rms = list(result["reward_models"])
    fig, axes = plt.subplots(1, len(rms), figsize=(4.2 * len(rms), 3.8), squeeze=False)
    for ax, rm in zip(axes[0], rms):
        j, r = next(iter(result["reward_models"][rm].items()))
        raw, cen = r["raw"]["tau_vs_judge_by_assignment"], r["centred"]["tau_vs_judge_by_assignment"]
        x = np.arange(len(raw))
        ax.scatter(x - 0.12, raw, s=18, label=f"raw (mean {np.nanmean(raw):.2f})")
        ax.scatter(x + 0.12, cen, s=18, marker="s", label=f"centred (mean {np.nanmean(cen):.2f})")
        ax.axhline(r["full_coverage"]["tau_raw_vs_judge"]["estimate"], color="grey", lw=1, ls="--",
                   label="full coverage")
        ax.set_ylim(-1.05, 1.05)
        ax.set_xlabel("assignment")
        ax.set_ylabel(f"Kendall's tau with {j}")
        ax.set_title(rm)
        ax.legend(fontsize=7, loc="lower left")
    if result.get("notice"):
        fig.suptitle("TOY RUN: these figures mean nothing", color="firebrick", fontsize=9)
    fig.tight_layout()
    return atomic_save_figure(fig, path, dpi=110)
