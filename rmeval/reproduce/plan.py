"""The dry run: what a recipe would load, score and cost, without downloading anything.

Per model: its loader and head, the parameter count (from the safetensors headers of a checkpoint
on disk, else the recipe's ``params_b``; ``active_params_b`` for a mixture of experts), its
placement (GPUs in its task, a vLLM server the task starts, or an external endpoint:
``rmeval.reproduce.cluster``, whose docstring has the memory and tensor-parallel formulas), the
number of texts it scores on each data set, their prompt and generated tokens
(``rmeval.reproduce.costing``), and the time and GPU hours of its task: download W x 1000 /
``download_mb_s``, load W / ``load_gb_s`` (+ the server's start-up), compute 2 N_active x (prompt
tokens / ``gpu_tflops`` + generated tokens / ``decode_tflops``) over the GPUs that compute in
parallel; GPU hours = GPUs x (download + load + compute). A row served by an external endpoint is
costed as its server's compute. Then the work beyond the rows (the recipe's ``costs``), the models
that need a licence and a token, the unpinned and the guessed Hub ids, and what must exist first.

Text counts come from the data when it is on disk (the simulated set, local files; never a Hub
download) and otherwise from the sizes the recipe transcribes from the paper (``data.KEY.size``):
per audit condition (``rmeval.conditions``, ``costing.condition_texts``): original and generic R
texts, prompt_only P, transplants R x n_donors, related and paraphrase R x n variants, last_turn the
responses of multi-turn prompts, fixed_reply_* P x donors or variants, plus a reference pool's
responses, all again for each scoring variant (without a sequence marker); a pairwise run R; a suitability
suite 2 + 2 x (perturbations) texts per item; a judge 2 x (attributes + 1) questions per item."""

from __future__ import annotations

import json
import math
import os
import shlex
from pathlib import Path
from typing import Any

from rmcore.data.loading import parse_data_spec
from rmcore.io.markdown import table
from rmeval.judges.settings import BaselineSettings
from rmeval.reproduce.cluster import placement, ray_server_lines, task_memory_gb, task_minutes, vllm_command
from rmeval.reproduce.context import Context
from rmeval.reproduce.costing import (
    baselines_cost,
    condition_texts,
    extra_cost,
    gpu_seconds,
    judge_calls,
    no_reuse_tokens,
    reply_tokens,
    row_tokens,
)
from rmeval.reproduce.hub import gated_models, pinning
from rmeval.reproduce.recipe import weights_gb
from rmeval.reproduce.settings import analysis_settings

DEFAULT_TOKENS = 512  # tokens per text when neither the data nor the recipe says


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
        return (sum(counts) + extra) * (1 + len(e.scoring_variants))  # each scoring variant: the texts again
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
    if s.max_items_per_source:
        items = min(items, s.max_items_per_source)
    return judge_calls(items, s)


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


# what a generative judge is read as, per analysis: a rating digit (the audit's scorer), the pairwise
# verdict (a suitability table), the answer letter of each attribute question (JudgeProfile)
JUDGE_HEADS = {"audit": "expected digit 1-5", "suitability": "verdict letter A/B", "judges": "answer letters"}


def _head(m: Any, analysis: str) -> Any:
    if m.head is not None:
        return f"{m.head} ({m.head_name})" if m.head_name else m.head
    if m.kind == "generative_judge":
        return JUDGE_HEADS.get(analysis, "expected digit 1-5")
    return {"seq_classifier": "its one output"}.get(m.kind, "implicit reward")


def model_plan(ctx: Any, m: Any, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One model's row of the dry run: placement, texts, tokens, task minutes and GPU hours."""
    if m.not_reproducible:
        return not_reproducible_plan(m)
    c = ctx.recipe.compute
    where = os.path.expanduser(m.hub_id)
    counted = local_params(where) if (m.local or Path(where).exists()) else None
    params = counted if counted is not None else m.params_b
    active = m.active_params_b if m.active_params_b is not None and counted is None else params
    weights = weights_gb(m, params)
    endpoint = m.name in ctx.endpoints or bool(m.endpoint)
    place = placement(m, weights, c, (ctx.endpoints.get(m.name) or m.endpoint) if endpoint else None)
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    texts = {k: _texts(ctx, k, sizes[k]) for k in ctx.model_data(m)}
    prompt_tok = gen_tok = 0.0
    for k, t in texts.items():
        if t:
            p, g = row_tokens(ctx, m, k, t, sizes[k], s, served=place["mode"] != "in-task")
            prompt_tok, gen_tok = prompt_tok + p, gen_tok + g
    twice = 2 if m.kind == "dpo_implicit" and str(m.reference).lower() != "none" else 1  # and its reference
    gpu_s = twice * gpu_seconds(prompt_tok, gen_tok, active, c)
    gpus = place["gpus"]
    parallel = max(1, place.get("tp", 1) * place.get("pp", 1)) if place["mode"] != "in-task" else 1
    minutes = task_minutes(weights_gb=weights if place["mode"] != "external" else 0.0,
                           download=not m.local and place["mode"] != "external", served=place["mode"] == "served",
                           gpu_seconds=gpu_s, parallel=parallel, c=c)
    held = minutes["download_min"] + minutes["load_min"] + minutes["compute_min"]
    hours = gpus * held / 60 if gpus else gpu_s / 3600  # an external server: its compute
    notes = [m.note] if m.note else []
    if m.reasoning is not None and place["mode"] != "in-task" and gen_tok:
        per = reply_tokens(m, True)
        notes.append(f"{gen_tok / 1e6:.0f}M generated tokens: {per} per call (" + (
            "reasoning.mean_tokens" if m.reasoning.mean_tokens else "its reply budget reasoning.max_tokens, an upper "
            "bound: set reasoning.mean_tokens to elicit_stats.json's generated_tokens / n_made of a sample") + ")")
    if ctx.recipe.reproduce.analysis == "judges" and prompt_tok:
        full = sum(no_reuse_tokens(ctx, k, t, sizes[k], s) for k, t in texts.items() if t)
        notes.append(f"{prompt_tok / 1e6:.1f}M prompt tokens with the item's prefix reused ({full / 1e6:.0f}M without)")
    row = {"row": m.name, "model": m.hub_id + (f"@{m.revision}" if m.revision else ""), "kind": m.kind,
           "loader": m.loader or ("from the checkpoint" if m.kind == "seq_classifier" else "-"),
           "head": _head(m, ctx.recipe.reproduce.analysis),
           "head_name": m.head_name, "dtype": m.dtype, "params_b": round(params, 4), "active_params_b": active,
           "params_source": "safetensors on disk" if counted is not None else "recipe (params_b)",
           "weights_gb": round(weights, 2), "gpu_memory_gb": place.get("memory_gb", "-"), "gpus": gpus,
           "placement": place, "device_map": m.device_map, "endpoint": m.endpoint, "texts": texts,
           "texts_total": sum(t for t in texts.values() if t) if all(texts.values()) else None,
           "tokens_m": round(prompt_tok / 1e6, 3), "generated_m": round(gen_tok / 1e6, 3), "minutes": minutes,
           "gpu_hours": round(hours, 3),
           "slurm": {"gpus": gpus, "mem_gb": task_memory_gb(weights) if gpus else 16,
                     "timeout_min": minutes["timeout_min"]}, "note": "; ".join(notes)}
    if place["mode"] == "served":
        row["server"] = {"model": m.hub_id, "tp": place["tp"], "command": vllm_command(m, place["tp"], place["pp"]),
                         "startup_min": (m.serve.startup_timeout_min
                                         or 2 * (minutes["download_min"] + minutes["load_min"]) + 10)}
    return row


def plan_recipe(recipe: Any, out: str | os.PathLike | None = None, *, stand_in: bool = False,
                ctx: Any = None) -> dict[str, Any]:
    """The plan: per data set its sizes, per row its resources and texts, the costs beyond the rows,
    the licences, pins and guesses, and the totals."""
    import tempfile

    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="reproduce-plan-"))
    ctx = ctx or Context(recipe, out, stand_in=stand_in)
    sizes = {k: data_sizes(ctx, k) for k in ctx.data_keys()}
    rows = [{"row": h.name, "model": f"human ratings ({h.data})", "kind": "human", "texts": {h.data: 0},
             "texts_total": 0, "gpus": 0, "gpu_hours": 0.0, "slurm": {"gpus": 0, "mem_gb": 16, "timeout_min": 60}}
            for h in recipe.human]
    rows += [model_plan(ctx, m, sizes) for m in recipe.models]
    for r in rows:
        r["status"] = ("done" if ctx.done_path(r["row"]).is_file() else
                       "not reproducible" if r.get("note", "").startswith("NOT REPRODUCIBLE") else "to run")
    costs = [] if stand_in else [extra_cost(ctx, e, sizes) for e in recipe.costs]
    if recipe.baselines is not None and not stand_in:
        from rmeval.reproduce.settings import strict_settings

        bs = strict_settings(BaselineSettings, {**recipe.baselines.settings, "model": "-", "judge": "-"},
                             f"{recipe.path}: baselines")
        costs.append(baselines_cost(ctx, sizes, analysis_settings(recipe), bs))
    rows_hours = sum(r["gpu_hours"] for r in rows)
    policy = None
    if recipe.policy is not None and not stand_in:
        from rmeval.reproduce.policy import launch_plan

        policy = launch_plan(recipe, out)
    external = {m.name for m in recipe.models if ctx.external(m) or m.name in ctx.endpoints}
    downloads = sorted({m.hub_id for m in recipe.models
                        if not m.local and m.name not in external and not m.not_reproducible})
    if recipe.reproduce.analysis == "leaderboard" and not stand_in:  # what its experiment loads
        from rmeval.reproduce.leaderboard import experiment_models

        downloads = experiment_models(analysis_settings(recipe))
    return {"recipe": recipe.path, "table": recipe.reproduce.table, "runs_of": recipe.runs_of, "stand_in": stand_in,
            "data": sizes,
            "rows": rows, "rows_gpu_hours": round(rows_hours, 2), "costs": costs,
            "gpu_hours": round(rows_hours + sum(x["gpu_hours"] for x in costs), 2), "compute": vars(recipe.compute),
            "policy": policy,
            "downloads": downloads,
            "gated": {} if stand_in else gated_models(recipe.models, external=external),
            "pinning": pinning(recipe.models), "external": sorted(external), "servers": external_servers(ctx),
            "steps": [] if stand_in else preparation_steps(ctx)}


def external_servers(ctx: Any) -> list[dict[str, Any]]:
    """How to start each external server a recipe describes (``serve:`` with an endpoint): one node's
    ``vllm serve``, or vLLM over a Ray cluster of several (``cluster.ray_server_lines``)."""
    out = []
    for m in ctx.recipe.models:
        if m.not_reproducible or not m.serve or not ctx.external(m):
            continue
        url = ctx.endpoints.get(m.name) or m.endpoint
        p = placement(m, weights_gb(m), ctx.recipe.compute, url)
        lines = ray_server_lines(m, p["tp"], p["pp"]) if p["pp"] > 1 else [
            shlex.join(vllm_command(m, p["tp"], 1, port="8000", host="0.0.0.0"))]
        out.append({"row": m.name, "model": m.hub_id, "endpoint": url, "tp": p["tp"], "pp": p["pp"], "nodes": p["pp"],
                    "lines": lines})
    return out


def preparation_steps(ctx: Any) -> list[str]:
    """What must exist before the rows run and is not written by this command: data to fetch, prompt
    variants, the reference pool, the study's own checkpoints, external servers, the PPO table's policies."""
    r, steps = ctx.recipe, []
    for key in ctx.data_keys():
        e = ctx.entry(key)
        if ctx.data_fetch(key):
            steps.append(ctx.data_fetch(key))
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
        if ctx.external(m) and not m.not_reproducible:
            steps.append(f"serve {m.hub_id} at {ctx.endpoints.get(m.name) or m.endpoint}"
                         + (" (how: 'Servers outside the job' below)" if m.serve else " (an OpenAI-compatible server)"))
    if r.reproduce.analysis == "leaderboard":  # the experiment behind the table, and its judges' servers
        from rmeval.reproduce.leaderboard import leaderboard_steps

        steps += leaderboard_steps(analysis_settings(r))
    if r.policy is not None:  # the PPO table's policies: rmtrain's launch plan (rmeval.reproduce.policy)
        from rmeval.reproduce.policy import launch_plan, policy_data_fetch

        if policy_data_fetch(r):
            steps.append(policy_data_fetch(r))
        lp = launch_plan(r, ctx.out, write=False)
        steps += [c for p in lp["models"] for c in p.get("commands", [])]
        steps.append(f"{lp['evaluate']}  (judge {r.policy.judge})")
    return steps


def plan_markdown(plan: dict[str, Any]) -> str:
    lines = [f"# Dry run: {plan['table']} ({plan['recipe']})", ""]
    if plan.get("runs_of"):
        lines += [f"The rows of {plan['runs_of']} (runs_of): this table is computed from that recipe's runs; give both "
                  "one --out and every row is computed once. The rows' GPU hours below are those runs', not more.", ""]
    lines += table(["data", "prompts", "responses", "items", "mean tokens", "source"],
                   [[k, v.get("prompts"), v.get("responses"), v.get("items"), v.get("mean_tokens"), v.get("source")]
                    for k, v in plan["data"].items()])
    lines += [""]
    lines += table(["row", "model", "kind", "loader", "head", "dtype", "params (B)", "placement", "GPUs", "texts",
                    "tokens (M)", "task min", "GPU h", "status", "note"],
                   [[r["row"], r["model"], r["kind"], r.get("loader", "-"), r.get("head", "-"), r.get("dtype", "-"),
                     _params(r), _where(r), r["gpus"], r["texts_total"] if r["texts_total"] is not None else "unknown",
                     r.get("tokens_m", "-"), r["slurm"]["timeout_min"], r["gpu_hours"], r["status"], r.get("note", "")]
                    for r in plan["rows"]])
    lines += ["", *gpu_hour_lines(plan), ""]
    lines += hub_lines(plan)
    if plan.get("steps"):
        lines += ["Before the rows run (not done by this command):", "", *[f"- `{s}`" for s in plan["steps"]], ""]
    for sv in plan.get("servers", []):
        lines += [f"## Servers outside the job: {sv['model']} ({sv['row']})", "",
                  f"{sv['nodes']} node(s) x {sv['tp']} GPUs (tensor parallel {sv['tp']}, "
                  f"pipeline parallel {sv['pp']}); the recipe reads it at {sv['endpoint']}.", "",
                  "```bash", *sv["lines"], "```", ""]
    lines += _policy_lines(plan.get("policy"))
    return "\n".join(lines)


def _params(r: dict[str, Any]) -> Any:
    p, a = r.get("params_b", "-"), r.get("active_params_b")
    return f"{p} ({a:g} active)" if isinstance(a, float) and isinstance(p, float) and a < p else p


def _where(r: dict[str, Any]) -> str:
    p = r.get("placement") or {}
    if p.get("mode") == "served":
        return f"vLLM in the task (TP {p['tp']})"
    if p.get("mode") == "external":
        return f"external server {r.get('endpoint') or ''}".strip()
    if p.get("mode") == "in-task":
        return f"in the task ({r.get('gpu_memory_gb')} GB{', device_map auto' if r.get('device_map') else ''})"
    return "-"


def gpu_hour_lines(plan: dict[str, Any]) -> list[str]:
    """The GPU hours in all, with their formula (module docstring) and each cost beyond the rows."""
    c = plan["compute"]
    lines = ["## GPU hours", "",
             f"Rows: {plan['rows_gpu_hours']} GPU h. Per row: GPUs x (download + load + compute) / 60, download = W x "
             f"1000 / {c['download_mb_s']:g} MB/s, load = W / {c['load_gb_s']:g} GB/s (+ {c['server_start_min']:g} min "
             f"for a vLLM server), compute = 2 x N_active x (prompt tokens / {c['gpu_tflops']:g} TFLOP/s + generated "
             f"tokens / {c['decode_tflops']:g} TFLOP/s) over the GPUs computing in parallel (W: weights in GB, "
             "N_active: parameters a token passes through; an external server: its compute only). Task time limit: "
             f"download + load + {c['time_slack']:g} x compute + 30 min, at least 60.", ""]
    for x in plan.get("costs", []):
        lines += [f"- {x['name']} ({x['kind']}): {x['gpu_hours']} GPU h"
                  + (f" ({x['source']})" if x.get("source") else "")]
        lines += [f"  - {f}" for f in x["formula"]]
    if plan.get("costs"):
        lines.append("")
    shared = (f"; of them {plan['rows_gpu_hours']}, the rows, are the runs of {plan['runs_of']}: counted there, not in "
              "addition" if plan.get("runs_of") else "")
    lines.append(f"GPU hours in all: {plan['gpu_hours']} ({c['gpu_memory_gb']:g} GB GPUs, {c['gpus_per_node']} per "
                 f"node){shared}.")
    return lines


def hub_lines(plan: dict[str, Any]) -> list[str]:
    """Downloads, gated models (licence and HF_TOKEN), unpinned and guessed Hub ids."""
    lines = ["Would download: " + (", ".join(plan["downloads"]) or "nothing"), ""]
    g = plan.get("gated") or {}
    if g:
        lines += ["Gated (accept the licence on the model's Hub page; the run needs HF_TOKEN or `hf auth login`):", "",
                  *[f"- {k}: {v}" for k, v in g.items()], ""]
    pin = plan.get("pinning") or {}
    if pin.get("guessed"):
        lines += ["Guessed Hub ids (the paper names the model, not its repository):", "",
                  *[f"- {x}" for x in pin["guessed"]], ""]
    if pin.get("unpinned"):
        lines += ["Unpinned (no revision: the current one loads; the papers name none): "
                  + ", ".join(pin["unpinned"]), ""]
    return lines


def _policy_lines(lp: dict[str, Any] | None) -> list[str]:
    """The PPO launch plan: one line per reward model (its commands, or why it has none)."""
    from rmcore.io.markdown import table

    if not lp:
        return []
    rows = [[p["reward_model"], p["hub_id"] or "-", "yes" if p["servable"] else "no",
             "<br>".join(f"`{c}`" for c in p.get("commands", [])) or p.get("not_reproducible", ""), p["winrate"]]
            for p in lp["models"]]
    return ["## PPO launch plan", "",
            f"Policy recipe `{lp['policy_recipe']}` (from `{lp['base_recipe']}`); {lp['note']}.", "",
            *table(["reward model", "Hub id", "served by rmeval serve-reward", "commands (or why not)",
                    "win rate read from"],
                   rows), "", f"Then `{lp['evaluate']}` (judge {lp['judge']}). The PPO trainings' GPU hours are "
            "under 'GPU hours' (the recipe's costs); the rows' are the suitability audit's.", ""]

