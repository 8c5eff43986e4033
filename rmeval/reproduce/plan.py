"""The dry run: what a recipe would load, score and cost, without downloading anything.

Per model: its loader and head, the parameter count (from the safetensors headers of a checkpoint
on disk, else the recipe's ``params_b``), the GPU memory its weights need in its dtype (weights x
``compute.overhead`` + 1 GB) and so the GPUs (one model per task; more than one GPU needs
``device_map: auto``), the number of texts it scores on each data set and their tokens, and the GPU
hours at ``compute.gpu_tflops`` effective (2 x parameters FLOPs per token; a DPO model with a
reference twice that). A served judge (``endpoint``) takes no GPU in its task: the server holds it.

Text counts come from the data when it is on disk (the simulated set, local files; never a Hub
download) and otherwise from the sizes the recipe transcribes from the paper (``data.KEY.size``):
per audit condition (``rmeval.conditions``): original and generic R texts, prompt_only P,
transplants R x n_donors, related and paraphrase R x n variants, last_turn the responses of
multi-turn prompts, fixed_reply_* P x donors or variants, plus a reference pool's responses; a
pairwise run R; a suitability suite about 2 + 2 x (perturbations) texts per item; a judge 2 x
(attributes + 1) questions per item."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from rmcore.data.registry import parse_data_spec
from rmcore.markdown import table
from rmeval.reproduce.context import Context
from rmeval.reproduce.recipe import DTYPE_BYTES
from rmeval.reproduce.settings import analysis_settings

DEFAULT_TOKENS = 512  # tokens per text when neither the data nor the recipe says
N_ATTRIBUTES = 87
CORE_ATTRIBUTES = 20


def is_local(spec: Any) -> bool:
    """Whether a data SPEC reads only local files (so counting it downloads nothing)."""
    s = parse_data_spec(spec) if isinstance(spec, str) else dict(spec)
    if s.get("name") == "simulated":
        return True
    path = s.get("path")
    return bool(path) and Path(os.path.expanduser(str(path))).exists()


def data_sizes(ctx: Any, key: str) -> dict[str, Any]:
    """{prompts, responses, multi_turn, items, mean_tokens, source}: counted when local, else declared."""
    spec = ctx.spec(key)
    if is_local(spec):
        rs = ctx.rating_set(key)
        words = [len((" ".join(m["content"] for m in p.messages) + " " + r.text).split())
                 for p in rs.prompts for r in p.responses]
        rm_bench = str(rs.name).startswith("rm_bench")
        return {"prompts": len(rs.prompts), "responses": sum(len(p.responses) for p in rs.prompts),
                "multi_turn": sum(not p.single_turn for p in rs.prompts),
                "items": len(rs.prompts) if rm_bench else len(rs.preferences),
                "mean_tokens": int(1.3 * sum(words) / max(len(words), 1)), "source": "counted from the data on disk"}
    size = ctx.entry(key).size
    if size is None:
        return {"source": "not on disk and no size in the recipe"}
    return {"prompts": size.prompts, "responses": size.responses, "multi_turn": size.multi_turn_prompts,
            "items": size.items if size.items is not None else size.prompts, "mean_tokens": size.mean_tokens,
            "source": "assumed (the data is not on disk): " + (size.source or "the recipe (the paper's counts)")}


def condition_texts(cond: str, n: dict[str, Any], *, n_donors: int, n_related: int, n_paraphrase: int) -> int | None:
    P, R, M = n.get("prompts"), n.get("responses"), n.get("multi_turn")
    per = {"original": R, "generic": R, "prompt_only": P, "last_turn": None if M is None or R is None or not P
           else round(R * M / P)}
    if cond in per:
        return per[cond]
    if cond in ("random", "overlap", "embedding", "length"):
        return None if R is None else R * n_donors
    if cond in ("related", "paraphrase"):
        return None if R is None else R * (n_related if cond == "related" else n_paraphrase)
    if cond == "fixed_reply_random":
        return None if P is None else P * n_donors
    if cond == "fixed_reply_related":
        return None if P is None else P * n_related
    return None


def _texts(ctx: Any, key: str, n: dict[str, Any]) -> int | None:
    """Texts one model scores on data set ``key``."""
    analysis = ctx.recipe.reproduce.analysis
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    e = ctx.entry(key)
    if analysis == "audit":
        counts = [condition_texts(c, n, n_donors=s.n_donors, n_related=e.related.n if e.related else 3,
                                  n_paraphrase=e.paraphrase.n if e.paraphrase else 3) for c in e.conditions]
        if any(c is None for c in counts):
            return None
        pool = e.reference_pool
        extra = 0 if pool is None else (n.get("prompts") or 0) * (pool.n * max(len(pool.policies), 1) if pool.policies
                                                                    else 12)
        return sum(counts) + extra
    if analysis == "pairwise":
        return n.get("responses")
    items = n.get("items")
    if items is None:
        return None
    if analysis in ("suitability", "policy"):
        k = len(s.perturbations) if s.perturbations else 10
        if s.max_items:
            items = min(items, s.max_items)
        return items * (2 + 2 * k)
    names = list(s.attributes)
    n_attr = N_ATTRIBUTES if not names else sum(CORE_ATTRIBUTES if a == "core" else 1 for a in names)
    if s.max_items_per_source:
        items = min(items, s.max_items_per_source)
    return items * 2 * (n_attr + 1)


def local_params(path: str) -> float | None:
    """Billions of parameters of a checkpoint on disk, from its safetensors headers (no model built)."""
    p = Path(os.path.expanduser(path))
    files = sorted(p.glob("*.safetensors")) if p.is_dir() else []
    if not files:
        return None
    from safetensors import safe_open

    total = 0
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            for k in sf.keys():  # noqa: SIM118 -- safe_open has no __iter__
                total += math.prod(sf.get_slice(k).get_shape())
    return total / 1e9


def not_reproducible_plan(m: Any) -> dict[str, Any]:
    """A row kept for the paper's layout that nothing runs: no GPU, no text, the reason."""
    return {"row": m.name, "model": m.hub_id or "no public Hub id", "kind": m.kind, "loader": m.loader or "-",
            "head": m.head if m.head is not None else "-", "dtype": m.dtype, "params_b": m.params_b, "gpus": 0,
            "texts": {}, "texts_total": 0, "tokens_m": 0.0, "gpu_hours": 0.0,
            "slurm": {"gpus": 0, "mem_gb": 0, "timeout_min": 0}, "note": f"NOT REPRODUCIBLE: {m.not_reproducible}"}


def model_plan(ctx: Any, m: Any, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if m.not_reproducible:
        return not_reproducible_plan(m)
    c = ctx.recipe.compute
    where = os.path.expanduser(m.hub_id)
    counted = local_params(where) if (m.local or Path(where).exists()) else None
    params = counted if counted is not None else m.params_b
    weights = params * DTYPE_BYTES[m.dtype] * (2 if m.kind == "dpo_implicit" and str(m.reference).lower() != "none"
                                                else 1)
    mem = weights * c.overhead + 1.0
    gpus = 0 if m.endpoint else max(1, math.ceil(mem / c.gpu_memory_gb))
    texts = {k: _texts(ctx, k, sizes[k]) for k in ctx.model_data(m)}
    tokens = sum(t * (sizes[k].get("mean_tokens") or DEFAULT_TOKENS) for k, t in texts.items() if t)
    flops = 2 * params * 1e9 * tokens * (2 if m.kind == "dpo_implicit" and str(m.reference).lower() != "none" else 1)
    hours = flops / (c.gpu_tflops * 1e12) / 3600
    notes = [m.note] if m.note else []
    if gpus > 1 and m.device_map != "auto":
        notes.append(f"needs {gpus} GPUs: set device_map: auto")
    return {"row": m.name, "model": m.hub_id + (f"@{m.revision}" if m.revision else ""), "kind": m.kind,
            "loader": m.loader or ("from the checkpoint" if m.kind == "seq_classifier" else "-"),
            "head": (f"{m.head} ({m.head_name})" if m.head_name else m.head) if m.head is not None else ("its one output" if m.kind == "seq_classifier" else
                                                       "expected digit 1-5" if m.kind == "generative_judge" else
                                                       "implicit reward"),
            "head_name": m.head_name, "dtype": m.dtype, "params_b": round(params, 4),
            "params_source": "safetensors on disk" if counted is not None else "recipe (params_b)",
            "weights_gb": round(weights, 2), "gpu_memory_gb": round(mem, 1), "gpus": gpus,
            "device_map": m.device_map, "endpoint": m.endpoint, "texts": texts,
            "texts_total": sum(t for t in texts.values() if t) if all(texts.values()) else None,
            "tokens_m": round(tokens / 1e6, 3), "gpu_hours": round(hours * max(gpus, 1), 3),
            "slurm": {"gpus": gpus, "mem_gb": int(max(16, math.ceil(weights * 1.5))),
                      "timeout_min": int(max(60, math.ceil(hours * 60 * 3) + 30))},
            "note": "; ".join(notes)}


def plan_recipe(recipe: Any, out: str | os.PathLike | None = None, *, stand_in: bool = False) -> dict[str, Any]:
    """The plan: per data set its sizes, per row its resources and texts, and the totals."""
    import tempfile

    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="reproduce-plan-"))
    ctx = Context(recipe, out, stand_in=stand_in)
    sizes = {k: data_sizes(ctx, k) for k in ctx.data_keys()}
    rows = [{"row": h.name, "model": f"human ratings ({h.data})", "kind": "human", "texts": {h.data: 0},
             "texts_total": 0, "gpus": 0, "gpu_hours": 0.0, "slurm": {"gpus": 0, "mem_gb": 16, "timeout_min": 60}}
            for h in recipe.human]
    rows += [model_plan(ctx, m, sizes) for m in recipe.models]
    for r in rows:
        r["status"] = ("done" if ctx.done_path(r["row"]).is_file() else
                       "not reproducible" if r.get("note", "").startswith("NOT REPRODUCIBLE") else "to run")
    hours = sum(r["gpu_hours"] for r in rows)
    policy = None
    if recipe.policy is not None and not stand_in:
        from rmeval.reproduce.policy import launch_plan

        policy = launch_plan(recipe, out)
    return {"recipe": recipe.path, "table": recipe.reproduce.table, "stand_in": stand_in, "data": sizes,
            "rows": rows, "gpu_hours": round(hours, 2), "compute": vars(recipe.compute), "policy": policy,
            "downloads": sorted({m.hub_id for m in recipe.models
                                 if not m.local and not m.endpoint and not m.not_reproducible}),
            "steps": [] if stand_in else preparation_steps(ctx)}


def preparation_steps(ctx: Any) -> list[str]:
    """What must exist before the rows run and is not written by this command: prompt variants, the
    reference pool, the study's own checkpoints, served judges, the PPO table's policies."""
    r, steps = ctx.recipe, []
    for key in ctx.data_keys():
        e = ctx.entry(key)
        for task in ("related", "paraphrase"):
            v = getattr(e, task)
            if v is not None and task in e.conditions and v.file and not Path(v.file).is_file() and not v.generator:
                sub = f" --subtype {v.subtype}" if v.subtype else ""
                steps.append(f"rmeval variants --data '{json.dumps(e.spec)}' --task {task}{sub} --n {v.n} "
                             f"--generator hf:MODEL --out {v.file}")
        p = e.reference_pool
        if p is not None and p.file and not Path(p.file).is_file():
            steps.append(f"rmeval pool --config {p.config} --out {Path(p.file).parent}")
    for m in r.models:
        if m.local and not Path(os.path.expanduser(m.hub_id)).exists():
            steps.append(f"train {m.name} ({m.note or 'the study own checkpoint'}) -> {m.hub_id}")
        if m.endpoint:
            steps.append(f"serve {m.hub_id} at {m.endpoint} (e.g. vllm serve {m.hub_id} --tensor-parallel-size "
                         f"{max(1, math.ceil(m.params_b * 2 * 1.2 / r.compute.gpu_memory_gb))})")
    if r.policy is not None:  # the PPO table's policies: rmtrain's launch plan (rmeval.reproduce.policy)
        from rmeval.reproduce.policy import launch_plan

        lp = launch_plan(r, ctx.out, write=False)
        steps += [c for p in lp["models"] for c in p.get("commands", [])]
        steps.append(f"{lp['evaluate']}  (judge {r.policy.judge})")
    return steps


def plan_markdown(plan: dict[str, Any]) -> str:
    lines = [f"# Dry run: {plan['table']} ({plan['recipe']})", ""]
    lines += table(["data", "prompts", "responses", "items", "mean tokens", "source"],
                   [[k, v.get("prompts"), v.get("responses"), v.get("items"), v.get("mean_tokens"), v.get("source")]
                    for k, v in plan["data"].items()])
    lines += [""]
    lines += table(["row", "model", "kind", "loader", "head", "dtype", "params (B)", "GPU memory (GB)", "GPUs",
                    "texts", "tokens (M)", "GPU h", "status", "note"],
                   [[r["row"], r["model"], r["kind"], r.get("loader", "-"), r.get("head", "-"), r.get("dtype", "-"),
                     r.get("params_b", "-"), r.get("gpu_memory_gb", "-"), r["gpus"],
                     r["texts_total"] if r["texts_total"] is not None else "unknown", r.get("tokens_m", "-"),
                     r["gpu_hours"], r["status"], r.get("note", "")] for r in plan["rows"]])
    c = plan["compute"]
    lines += ["", f"GPU hours in all: {plan['gpu_hours']} (at {c['gpu_tflops']} TFLOP/s effective per GPU, "
              f"{c['gpu_memory_gb']} GB GPUs; loading and downloading not counted).",
              "Would download: " + (", ".join(plan["downloads"]) or "nothing"), ""]
    if plan.get("steps"):
        lines += ["Before the rows run (not done by this command):", "", *[f"- `{s}`" for s in plan["steps"]], ""]
    lines += _policy_lines(plan.get("policy"))
    return "\n".join(lines)


def _policy_lines(lp: dict[str, Any] | None) -> list[str]:
    """The PPO launch plan: one line per reward model (its commands, or why it has none)."""
    from rmcore.markdown import table

    if not lp:
        return []
    rows = [[p["reward_model"], p["hub_id"] or "-", "yes" if p["servable"] else "no",
             "<br>".join(f"`{c}`" for c in p.get("commands", [])) or p.get("not_reproducible", ""), p["winrate"]]
            for p in lp["models"]]
    return ["## PPO launch plan", "",
            f"Policy recipe `{lp['policy_recipe']}` (from `{lp['base_recipe']}`); {lp['note']}.", "",
            *table(["reward model", "Hub id", "served by rmeval serve-reward", "commands (or why not)", "win rate read from"],
                   rows), "", f"Then `{lp['evaluate']}` (judge {lp['judge']}). PPO GPU hours are not estimated "
            "here (the rows' GPU hours above are the suitability audit's).", ""]

