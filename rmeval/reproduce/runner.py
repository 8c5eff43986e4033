"""Run a reproduction recipe: its rows (human references and models) one after another on this
machine, or as submitit job arrays on SLURM (one row per task, each task a script running ``python -m
rmeval.reproduce.worker``, its GPUs, memory and time limit from the dry run's plan; one array per
resource shape), then the panel step and the table. A judge the recipe serves (``serve:``) runs
through its task script here too: the script starts its vLLM server and stops it.

Before anything is written (``preflight``): every local data path exists (else one line naming what
to fetch), every gated model to download has a token, every external endpoint's variable is set.

Resumable at two levels: a finished row (``rows/<row>/done.json``) is never scored again, and a row
interrupted mid-way resumes from its score cache. A row that fails is reported and the others go
on; its cells are listed as missing in the table, as are those of models matchrm cannot score
(``not_reproducible``: "not reproducible: why" beside the published figures) and of rows not run
yet (``--only``)."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json
from rmcore.runtime.wandb_log import DEFAULT_PROJECT
from rmeval.reproduce.analyses import ANALYSIS_STEPS, read_docs, run_human
from rmeval.reproduce.array import run_array, run_served_locally
from rmeval.reproduce.context import Context, check_run_kind
from rmeval.reproduce.hub import check_access
from rmeval.reproduce.sources import check_data
from rmeval.reproduce.table import build_cells, console_text, write_table

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    table: dict[str, Path] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # published cells without our figure
    console: str = ""  # the table as the command prints it
    seconds: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0


def run_row(ctx: Any, row: str) -> dict[str, Any]:
    """Compute one row (a human reference or a model) unless it is done; its done record."""
    path = ctx.done_path(row)
    if path.is_file():
        return {**json.loads(path.read_text()), "cached": True}
    t0 = time.perf_counter()
    human = {h.name: h for h in ctx.recipe.human}
    if row in human:
        docs = run_human(ctx, human[row])
        how = "ratings only (rmeval human)"
    else:
        m = ctx.recipe.model(row)
        if m.not_reproducible:
            raise ConfigError(f"{row}: not reproducible: {m.not_reproducible}")
        docs = ANALYSIS_STEPS[ctx.recipe.reproduce.analysis][0](ctx, m)
        how = ctx.stand_in_info(m)["what"] if ctx.stand_in else _how(m, ctx.endpoint(m))
    record = {"row": row,
              "documents": {k: str(Path(v).resolve().relative_to(ctx.out.resolve())) for k, v in docs.items()},
              "seconds": round(time.perf_counter() - t0, 2), "stand_in": ctx.stand_in, "how": how,
              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_json(path, record)
    return record


def _how(m: Any, endpoint: str | None) -> str:
    parts = [m.kind, f"loader {m.loader}" if m.loader else "", f"head {m.head}" if m.head is not None else "",
             m.dtype, f"endpoint {endpoint}" if endpoint else "", "device_map auto" if m.device_map else ""]
    return ", ".join(p for p in parts if p)


def rows_to_run(recipe: Any, only: list[str] | None, data_keys: list[str] | None = None) -> list[str]:
    """The rows a run computes (``only`` some); ``data_keys``: the data sets at hand (a stand-in
    run's), a human row on another is left out (``left_out``)."""
    rows = [h.name for h in recipe.human if data_keys is None or h.data in data_keys]
    rows += [m.name for m in recipe.models if not m.not_reproducible]
    if only:
        unknown = sorted(set(only) - set(recipe.row_names()))
        if unknown:
            raise ConfigError(f"--only {unknown}: not rows of {recipe.path} (rows: {', '.join(recipe.row_names())})")
        rows = [r for r in rows if r in only]
    return rows


def run_local(ctx: Any, rows: list[str], outcome: Outcome, plan_rows: dict[str, dict[str, Any]]) -> None:
    for row in rows:
        served = (bool(plan_rows[row].get("server")) and not ctx.stand_in and row not in ctx.endpoints
                  and not ctx.done_path(row).is_file())
        try:
            if served:  # its task script: the judge's vLLM server, the worker, the server stopped
                run_served_locally(ctx, row, plan_rows[row])
            rec = run_row(ctx, row)
        except Exception as e:  # one row's failure leaves the others, and the table says which failed
            if isinstance(e, KeyboardInterrupt):
                raise
            outcome.failed[row] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            log.error("row %s failed:\n%s", row, traceback.format_exc())
            continue
        (outcome.cached if rec.get("cached") and not served else outcome.ran).append(row)
        outcome.seconds[row] = rec["seconds"]


def collect(ctx: Any, outcome: Outcome) -> dict[str, Any]:
    """Every finished row's documents, the panel step over them, and the table."""
    recipe = ctx.recipe
    docs: dict[str, Any] = {}
    info: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    for m in recipe.models:
        if m.not_reproducible:
            reasons[m.name] = f"not reproducible: {m.not_reproducible}"
    for h in recipe.human:
        if h.data not in ctx.data_keys():
            reasons[h.name] = f"left out of this stand-in run: no local data for {h.data} (see the stand-in note)"
    for row, why in outcome.failed.items():
        reasons[row] = f"failed: {why}"
    for row in [h.name for h in recipe.human] + [m.name for m in recipe.models]:
        path = ctx.done_path(row)
        model = next(((m.hub_id or "no public Hub id") + (f"@{m.revision}" if m.revision else "")
                      for m in recipe.models if m.name == row), "")
        if path.is_file():
            rec = json.loads(path.read_text())
            docs[row] = read_docs(rec["documents"], ctx.out)
            info[row] = {"model": model, "how": rec["how"], "status": "done", "seconds": rec["seconds"]}
        else:
            reasons.setdefault(row, f"not yet computed (rmeval reproduce {recipe.path} --only {row})")
            info[row] = {"model": model, "how": "", "status": reasons[row], "seconds": ""}
    panel_step = ANALYSIS_STEPS[recipe.reproduce.analysis][1]
    only_panel = not (recipe.models or recipe.human)  # a table of panel rows alone (the leaderboard)
    panel = panel_step(ctx, docs) if panel_step is not None and (docs or only_panel) else None
    if panel is not None:
        atomic_write_json(ctx.out / "panel" / "panel.json", panel)
        for row, col, why in panel.get("cell_reasons", []):  # a panel step's word on one cell (row|column)
            reasons[f"{row}|{col}"] = why
    cells, statements = build_cells(recipe, docs, panel, reasons, stand_in=ctx.stand_in)
    outcome.table = write_table(recipe, cells, statements, ctx.out, stand_in=ctx.stand_in, rows_info=info)
    outcome.console = console_text(recipe, cells, statements, stand_in=ctx.stand_in)
    outcome.missing = [f"{c.row} × {c.column}" for c in cells.values() if c.ours is None and c.published is not None]
    return {"cells": cells, "statements": statements, "panel": panel}


def preflight(ctx: Any, rows: list[str]) -> None:
    """What a run checks before it writes anything (module docstring): one-line ConfigErrors."""
    models = [m for m in ctx.recipe.models if m.name in rows]
    used = {k for m in models for k in ctx.model_data(m)} | {h.data for h in ctx.recipe.human if h.name in rows}
    keys = [k for k in ctx.data_keys() if k in used]  # the recipe's order
    check_data(ctx, keys)
    for m in models:
        ctx.endpoint(m)  # an unset ${VARIABLE} is one line now, not a failed task later
    if not ctx.stand_in:
        check_access(models, external={m.name for m in models if ctx.external(m)})


def run_recipe(recipe: Any, out: str | Path, *, stand_in: bool = False, only: list[str] | None = None,
               executor: str = "local", wandb_mode: str | None = None, wandb_project: str = DEFAULT_PROJECT,
               overrides: dict[str, Any] | None = None, endpoints: dict[str, str] | None = None) -> Outcome:
    """Run ``recipe`` into ``out`` (see the module docstring); returns what ran and the table's paths.
    ``overrides``: the dotted recipe keys the command set (each task re-reads the recipe with them);
    ``endpoints``: row -> the URL of a server already holding its judge."""
    from rmeval.reproduce.plan import plan_recipe

    if executor not in ("local", "slurm", "submitit-local"):
        raise ConfigError(f"--executor must be local, slurm or submitit-local, got {executor!r}")
    out = Path(out)
    ctx = Context(recipe, out, stand_in=stand_in, wandb_mode=wandb_mode, wandb_project=wandb_project,
                  overrides=dict(overrides or {}), endpoints=dict(endpoints or {}))
    rows = rows_to_run(recipe, only, ctx.data_keys())
    preflight(ctx, rows)
    out.mkdir(parents=True, exist_ok=True)
    check_run_kind(out, recipe, stand_in)
    outcome = Outcome()
    t0 = time.perf_counter()
    plan_rows = {r["row"]: r for r in plan_recipe(recipe, out, stand_in=stand_in, ctx=ctx)["rows"]}
    with one_thread(stand_in):
        if executor == "local":
            run_local(ctx, rows, outcome, plan_rows)
        else:
            run_array(ctx, rows, outcome, plan_rows, cluster="local" if executor == "submitit-local" else None)
        collect(ctx, outcome)
    outcome.total_seconds = round(time.perf_counter() - t0, 2)
    return outcome


@contextmanager
def one_thread(on: bool) -> Iterator[None]:
    """A stand-in run's torch on one thread: tiny models gain nothing from more, and on a shared
    machine several threads per process cost several times the time."""
    import torch

    if not on:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
