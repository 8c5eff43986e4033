"""Cost curves of the other pipelines at their published sizes, in the style of
``bench_judges_scale.py`` (wall time, CPU time and peak RSS of each size in a process of its own,
and the growth exponent b of wall time ~ size^b from the sizes given; simulated inputs, nothing
scored):

- ``audit``: the audit's statistics (``rmeval.stats.audit_sections.compute_audit``, default resamples,
  every section including ``variance_explained`` with its four response probes and the prompt
  probe) on a synthetic audit of N prompts x 2 responses: the scores of ``bench_audit_stats``
  (every condition, or the original condition only) with the helpfulness ratings (human share),
  384-dimensional response and prompt embeddings plus nine text features (the demo's 393), and a
  prompt table. Sizes ``N:all`` or ``N:original`` (``:ridge+mlp+...`` after it: only these
  response-probe learners; ``:none``: no feature tables, so neither the response probes nor the
  prompt probe's embedding block -- the statistics alone); HelpSteer2's validation split is
  519:all, its training split 10160:original.
- ``probe``: one outer fold of one response probe of the audit (``rmeval.stats.probes``: the
  inner grouped grid search, the refit on the training fold's 4/5 of the 2N responses, the
  prediction) on the audit's response-probe inputs; sizes ``N:LEARNER`` (ridge, kernel_ridge,
  boosted_trees, mlp), one exponent per learner. A probe is five such folds.
- ``suitability``: a suitability panel from a pairs table (``rmeval suitability-stats``:
  ``rmeval.suitability.checkpoints.suitability_from_pairs``, 10,000 permutations, robustness
  analyses, the five RM-Bench subsets each its own family): M models x 1,327 RM-Bench prompts
  (chat 129, math 529, code 228, safety-refuse 284, safety-response 157) x the ten perturbations,
  simulated confidences. Reward Auditor's panel is M = 26.
- ``sweep``: the sweep report (``rmtrain.sweep.report.write_outputs``: summary, per-arm table,
  exact permutation tests, plots, the pooled sibling coefficient with its prompt bootstrap) over 6
  arms x 2 models x S seeds of ledger rows with simulated figures and simulated audits of 519
  prompts (scores and ratings); the study's matched recipe is S = 5.

    python scripts/bench_cost_curves.py audit --sizes 519:all,2540:original,10160:original
    python scripts/bench_cost_curves.py probe --sizes 1270:mlp,2540:mlp,5080:mlp,10160:mlp
    python scripts/bench_cost_curves.py suitability --sizes 6,13,26
    python scripts/bench_cost_curves.py sweep --sizes 1,2,5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_judges_scale import fit_exponent, measure  # noqa: E402

ARMS = ("regression", "bradley_terry", "bt_margin", "gap_only", "shuffled_mean", "binarized")
RM_BENCH = {"chat": 129, "math": 529, "code": 228, "safety-refuse": 284, "safety-response": 157}


# -- audit statistics --------------------------------------------------------------------------------

def audit_tables(n_prompts: int, conditions: str, d: Path, seed: int = 0) -> None:
    """scores, ratings, prompts, features and prompt_features tables of a synthetic audit in ``d``."""
    from bench_audit_stats import synthetic

    scores, ratings = synthetic(n_prompts=n_prompts, seed=seed)
    if conditions == "original":
        scores = scores[scores["condition"] == "original"]
    rng = np.random.default_rng([seed, 1])
    pids = ratings["prompt_id"].drop_duplicates().to_numpy()

    def emb(n: int) -> np.ndarray:
        x = rng.normal(size=(n, 384)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    e = emb(len(ratings))
    feats = pd.DataFrame(e, columns=[f"emb_0_{j}" for j in range(384)])
    for k, name in enumerate(("log_words", "log_chars", "lines", "list_items", "headers", "code_blocks",
                              "sentences", "questions", "mean_word_length")):
        feats[f"txt_{name}"] = np.abs(rng.normal(3 + k, 1, len(ratings)))
    feats.insert(0, "response_id", ratings["response_id"].to_numpy())
    feats.insert(0, "prompt_id", ratings["prompt_id"].to_numpy())
    pf = pd.DataFrame(emb(len(pids)), columns=[f"pemb_0_{j}" for j in range(384)])
    pf.insert(0, "prompt_id", pids)
    single = ratings.groupby("prompt_id", sort=False)["single_turn"].first().reindex(pids).to_numpy(bool)
    prompts = pd.DataFrame({"prompt_id": pids, "prompt_words": rng.integers(5, 300, len(pids)),
                            "turns": np.where(single, 1, 2), "single_turn": single,
                            "first_turn_group": np.arange(len(pids)), "topic": rng.integers(0, 20, len(pids))})
    for name, t in (("scores", scores), ("ratings", ratings), ("features", feats), ("prompt_features", pf),
                    ("prompts", prompts)):
        t.to_parquet(d / f"{name}.parquet", index=False)


def run_audit(d: Path) -> None:
    from rmeval.stats.audit_sections import compute_audit
    from rmeval.stats.settings import StatsSettings

    t = {n: pd.read_parquet(d / f"{n}.parquet") for n in ("scores", "ratings", "features", "prompt_features",
                                                          "prompts")}
    learners = (d / "learners.txt").read_text().split(",") if (d / "learners.txt").is_file() else None
    off = learners == ["none"]  # the statistics without the feature probes: no feature tables
    res = compute_audit(t["scores"], t["ratings"], StatsSettings(probe_learners=None if off else learners),
                        prompts=t["prompts"], features=None if off else t["features"],
                        prompt_features=None if off else t["prompt_features"])
    (d / "audit.json").write_text(json.dumps(res, default=str))


def probe_inputs(size: str, d: Path, seed: int = 0) -> None:
    """``N:LEARNER``: the response-probe inputs of ``audit_tables`` (N prompts x 2 responses, 384
    unit-norm embedding dimensions and 9 text features; a score with a prompt effect) and the learner."""
    n, name = size.split(":")
    rng = np.random.default_rng(seed)
    k = int(n)
    e = rng.normal(size=(2 * k, 384)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    x = np.column_stack([e.astype(float)] + [np.abs(rng.normal(3 + j, 1, 2 * k)) for j in range(9)])
    groups = np.repeat(np.arange(k), 2)
    y = rng.normal(size=k)[groups] + rng.normal(size=2 * k)
    np.savez(d / "probe.npz", x=x, y=y, groups=groups)
    (d / "learner.txt").write_text(name)


def run_probe_fold(d: Path) -> None:
    """One outer fold of one response probe (the first of ``GroupKFold(5)``): its inner grouped grid
    search, refit and prediction, as ``crossfit_predictions`` runs it."""
    from sklearn.model_selection import GroupKFold

    from rmeval.stats.probes import N_FOLDS, _fold_predict

    z = np.load(d / "probe.npz")
    x, y, groups = z["x"], z["y"], z["groups"]
    train, test = next(GroupKFold(N_FOLDS).split(x, y, groups))
    _fold_predict((d / "learner.txt").read_text(), x, y, groups, train, test, 0)


# -- suitability panel --------------------------------------------------------------------------------

def suitability_pairs(n_models: int, d: Path, seed: int = 0) -> None:
    """A pairs table: every model x RM-Bench prompt x perturbation, simulated confidences."""
    from rmeval.perturbations.suite import GROUPS

    rng = np.random.default_rng(seed)
    items = [(f"{s}:{i}", s) for s, n in RM_BENCH.items() for i in range(n)]
    frames = []
    for m in range(n_models):
        base = rng.uniform(0.55, 0.95, len(items))
        for k, code in enumerate(GROUPS):
            drop = rng.normal(0.004 * k * (m % 3), 0.05, len(items))
            frames.append(pd.DataFrame({"model": f"rm{m:02d}", "item_id": [i for i, _ in items],
                                        "subset": [s for _, s in items], "perturbation": code,
                                        "m_original": base, "m_perturbed": np.clip(base - drop, 1e-3, 1 - 1e-3)}))
    pd.concat(frames, ignore_index=True).to_parquet(d / "pairs.parquet", index=False)


def run_suitability(d: Path) -> None:
    from rmeval.suitability import SuitabilitySettings
    from rmeval.suitability.checkpoints import suitability_from_pairs

    suitability_from_pairs(d / "pairs.parquet", SuitabilitySettings(), d / "out", wandb_mode="disabled")


# -- sweep report ---------------------------------------------------------------------------------------

def sweep_rows(n_seeds: int, d: Path, n_prompts: int = 519, seed: int = 0) -> None:
    """Ledger rows of 6 arms x 2 models x ``n_seeds`` final runs, each with simulated figures and a
    simulated audit directory (scores of the original condition, ratings, audit.json's meta)."""
    from bench_audit_stats import synthetic

    rng = np.random.default_rng(seed)
    _, ratings = synthetic(n_prompts=n_prompts, seed=seed)
    rows = []
    for model in ("qwen3-0.6b", "qwen3-1.7b"):
        for a, arm in enumerate(ARMS):
            for s in range(1, n_seeds + 1):
                run = d / model / arm / f"seed{s}"
                audit = run / "final_audit"
                audit.mkdir(parents=True, exist_ok=True)
                sc = ratings[["prompt_id", "response_id"]].assign(
                    condition="original", variant=0, donor_prompt_id=None,
                    score=ratings["helpfulness"].to_numpy() * (0.2 + 0.1 * a) + rng.normal(0, 1, len(ratings)))
                sc.to_parquet(audit / "scores.parquet", index=False)
                ratings.to_parquet(audit / "ratings.parquet", index=False)
                (audit / "audit.json").write_text(json.dumps({"meta": {"attribute": "helpfulness"}}))
                figures = {"heldout_pair_accuracy": 0.7 + 0.01 * a + rng.normal(0, 0.01),
                           "share_original": 0.1 * a + rng.normal(0, 0.02), "share_generic": rng.uniform(0, 0.2),
                           "transplant_random_margin_sd": rng.normal(0.5, 0.1),
                           "transplant_random_accuracy": rng.uniform(0.6, 0.9),
                           "sibling_coefficient": rng.normal(0.1 * a, 0.05), "share_human": 0.3}
                rows.append({"run_id": f"{model}/{arm}/seed{s}", "arm": arm, "model": model, "seed": s,
                             "state": "done", "figures": figures, "output_dir": str(run), "audit_dir": str(audit)})
    (d / "rows.json").write_text(json.dumps(rows))


def run_sweep_report(d: Path) -> None:
    from rmtrain.sweep.report import write_outputs

    rows = json.loads((d / "rows.json").read_text())
    (d / "report").mkdir(exist_ok=True)
    write_outputs(d / "report", rows, rows, list(ARMS), title="matched sweep (simulated)", selected={})


# -- driver -------------------------------------------------------------------------------------------

def make_audit(size: str, d: Path) -> None:
    """``N:all`` or ``N:original``, optionally ``:LEARNER+LEARNER`` (the response probes' learners) or
    ``:none`` (no feature probes)."""
    n, conditions, *learners = size.split(":")
    audit_tables(int(n), conditions, d)
    if learners:
        (d / "learners.txt").write_text(learners[0].replace("+", ","))


SECTIONS = {"audit": (make_audit, run_audit),
            "probe": (probe_inputs, run_probe_fold),
            "suitability": (lambda size, d: suitability_pairs(int(size), d), run_suitability),
            "sweep": (lambda size, d: sweep_rows(int(size), d), run_sweep_report)}


def size_of(section: str, size: str) -> float:
    """The size the exponent is fitted on: prompts, models or seeds."""
    return float(size.split(":")[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("section", choices=list(SECTIONS))
    ap.add_argument("--sizes", required=True,
                    help="comma-separated: audit N:all|N:original, probe N:LEARNER, suitability M, sweep S")
    ap.add_argument("--keep", default=None, help="keep the inputs and outputs under this directory")
    ap.add_argument("--json", default=None, help="write the figures here as well")
    ap.add_argument("--timeout", type=float, default=None, help="stop a size after this many seconds (then '>')")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    make, run = SECTIONS[args.section]
    if args.step == "make":
        make(args.sizes, Path(args.dir))
        return
    if args.step == "run":
        run(Path(args.dir))
        return
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix=f"bench_{args.section}."))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    rows: list[dict[str, Any]] = []
    for size in args.sizes.split(","):
        d = base / size.replace(":", "_")
        d.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, __file__, args.section, "--sizes", size, "--dir", str(d)]
        measure(cmd + ["--step", "make"])
        m = measure(cmd + ["--step", "run"], timeout=args.timeout)
        rows.append({"size": size, **m, "load": os.getloadavg()[0]})
        more = ">" if m["timed_out"] else " "
        print(f"{args.section} {size:>16}: wall {more}{m['wall']:8.1f} s  CPU {more}{m['cpu']:8.1f} s  peak RSS "
              f"{m['rss_gb']:5.2f} GB  (load {rows[-1]['load']:.2f})", flush=True)
    groups: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["timed_out"]:
            continue
        groups.setdefault(r["size"].partition(":")[2], []).append((size_of(args.section, r["size"]), r["wall"]))
    exps = {}
    for kind, pts in groups.items():
        if len(pts) >= 2:
            exps[kind or args.section] = fit_exponent(*zip(*sorted(pts)))
            print(f"growth exponent of wall time ({kind or args.section}, {len(pts)} sizes): "
                  f"{exps[kind or args.section]:.2f}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "exponents": exps}, indent=1))


if __name__ == "__main__":
    main()
