"""The sweep driver: expand the matrix, save and print it, run the search stage, select per arm,
run the seed stage, run the final audits (jobs of their own: ``executors``), read their audit.json
back into the ledger, then write the summary and report. Rerunning the same command skips finished
runs and audits, resumes interrupted runs from their last checkpoint, and retries failed ones.

A run that diverged or collapsed (``rmtrain.train``; ``ledger.usable``) is finished but left out of
everything that reads a model: the selection among an arm's search runs (an arm whose every setting
did is blocked), the final audits, and the summary's figures and tests (``report``). The sweep goes
on; ``unusable_final`` names the final runs it cost, which decide the command's exit code."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.runtime.wandb_log import DEFAULT_PROJECT
from rmcore.settings.recipes import recipe_dict
from rmeval.conditions import CONDITIONS, NEEDS
from rmtrain.config import Sweep
from rmtrain.sweep.executors import LocalExecutor, SubmititExecutor
from rmtrain.sweep.extra_audits import audit_released
from rmtrain.sweep.ledger import Ledger, is_alive, now, usable
from rmtrain.sweep.matrix import (
    Matrix,
    expand,
    fingerprint,
    render_matrix,
    run_config,
    search_id,
    search_seed,
    select_setting,
)
from rmtrain.sweep.report import log_to_wandb, summary_frame, write_outputs
from rmtrain.sweep.worker import (
    EXTRA_FIGURES,
    MATRIX_FILE,
    RECIPE_FILE,
    STATE_FILE,
    audit_dir,
    terminate_on_sigterm,
)

log = logging.getLogger(__name__)

EXECUTORS = ("local", "slurm", "submitit-local")
NO_USABLE = "no usable search run for this arm"  # a blocked seed run's error when every setting diverged


def sweep_group(sweep: Sweep) -> str:
    """The W&B group every run of the sweep logs to."""
    wb = sweep.base.get("wandb") or {}
    return sweep.settings.name or wb.get("group") or sweep.root.name


def sweep_executor(kind: str, sweep: Sweep, out: Path, *, max_parallel: int | None = None, force: bool = False) -> Any:
    """The sweep's executor for ``--executor``: ``local`` (subprocesses of this machine, at most
    ``max_parallel`` at once), ``slurm`` (a SLURM job array) or ``submitit-local`` (the same jobs
    through submitit's local executor: ``rmcore.runtime.jobs.submitit_executor``)."""
    n_audit = sweep.settings.audit.num_processes
    if kind == "local":
        return LocalExecutor(out, max_parallel=max_parallel or sweep.settings.max_parallel, force=force,
                             audit_processes=n_audit)
    if kind in ("slurm", "submitit-local"):
        return SubmititExecutor(out, sweep.settings.slurm, cluster="slurm" if kind == "slurm" else "local", force=force,
                                audit_processes=n_audit)
    raise ConfigError(f"unknown executor '{kind}'; choose one of {', '.join(EXECUTORS)}")


def save_plan(sweep: Sweep, matrix: Matrix, out: Path) -> None:
    """Recipe copy, overrides and matrix in OUT: the workers rebuild every run from these."""
    # the sweep section as in effect (recipe + --set sweep.* overrides), so workers see the same
    raw = {**sweep.base, "sweep": recipe_dict(sweep.settings)}
    atomic_write_text(out / RECIPE_FILE, yaml.safe_dump(raw, sort_keys=False))
    atomic_write_json(out / STATE_FILE, {"recipe": sweep.where, "overrides": sweep.overrides, "saved_at": now()})
    atomic_write_json(out / MATRIX_FILE, {"runs": [r.to_dict() for r in matrix.runs]})
    atomic_write_text(out / "matrix.md", render_matrix(sweep, matrix))


def _check_audit(sweep: Sweep) -> None:
    a = sweep.settings.audit
    if a.enabled:
        try:
            a.placement()  # malformed device keys fail before anything trains
        except ConfigError as e:
            raise ConfigError(f"{sweep.where}: sweep.audit: {e}") from None
    for c in a.base.conditions if a.enabled else []:
        if c not in CONDITIONS:
            raise ConfigError(f"{sweep.where}: sweep.audit.conditions: {CONDITIONS.unknown(c)}")
        if c in NEEDS and not getattr(a.base, NEEDS[c], None):
            raise ConfigError(f"{sweep.where}: sweep.audit.conditions has '{c}' but no sweep.audit.{c}_file")


def _check_same_sweep(sweep: Sweep, matrix: Matrix, ledger: Ledger) -> None:
    """A rerun must be the same sweep: each run the ledger knows must still be trained the same way."""
    for spec in matrix.runs:
        row = ledger.get(spec.run_id)
        if row and row.get("fingerprint") and spec.setting is not None and spec.output_dir is not None:
            if row["fingerprint"] != fingerprint(run_config(sweep, spec)):
                raise ConfigError(f"{ledger.root.parent} holds a sweep whose run {spec.run_id} was trained with "
                                  "another config; use another --out")


def run_sweep(sweep: Sweep, *, executor: str = "local", max_parallel: int | None = None, dry_run: bool = False,
              force: bool = False, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole matched workflow from one call (see module doc). Returns the output paths and rows."""
    out = sweep.root
    sweep.overrides.setdefault("wandb.group", sweep_group(sweep))  # every run of the sweep in one W&B group
    matrix = expand(sweep)
    ex = sweep_executor(executor, sweep, out, max_parallel=max_parallel, force=force)
    ledger = Ledger(out / "ledger")
    for spec in matrix.search + [r for r in matrix.seeds if r.setting is not None]:
        run_config(sweep, spec)  # every run's config is valid before anything runs
    _check_audit(sweep)
    echo(render_matrix(sweep, matrix))
    atomic_write_text(out / "matrix.md", render_matrix(sweep, matrix))  # saved before anything runs
    if dry_run:
        first = matrix.search or matrix.seeds
        how = ex.array_summary(len(first)) if hasattr(ex, "array_summary") else "runs"
        echo(f"{executor} executor; the first stage's {len(first)} runs would be launched as {how}:")
        for cmd in ex.describe([r.run_id for r in first]):
            echo(f"  {cmd}")
        if matrix.search:
            echo(f"then, once every search run has finished, the seed stage's "
                 f"{sum(r.reuses is None for r in matrix.seeds)} runs the same way (no person in between).")
        if sweep.settings.audit.enabled:
            echo("then each trained run's final audit as a job of its own, e.g.:")
            for cmd in ex.describe_audits([r.run_id for r in first][:1]):
                echo(f"  {cmd}")
        return {"matrix": matrix, "rows": []}

    if isinstance(ex, SubmititExecutor):
        ex.executor("rmtrain-sweep")  # no SLURM here, no submitit: say so before anything is written
    # a killed driver records its in-process run as interrupted and stops its workers
    previous = terminate_on_sigterm()
    try:
        return _run(sweep, matrix, ex, ledger, out, force, echo)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(sweep: Sweep, matrix: Matrix, ex: Any, ledger: Ledger, out: Path, force: bool,
         echo: Callable[[str], None]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    _check_same_sweep(sweep, matrix, ledger)
    save_plan(sweep, matrix, out)
    for spec in matrix.runs:
        row = ledger.ensure(spec.to_dict())
        if is_alive(row):
            raise ConfigError(f"run {spec.run_id} is still running (pid {row.get('pid')} on {row.get('host')}, "
                              f"job {row.get('job_id')}); wait for it or stop it before rerunning the sweep")
        if force and row["state"] != "planned":
            ledger.update(spec.run_id, state="planned")

    def progress(rid: str) -> None:
        row = ledger.get(rid) or {}
        acc = (row.get("figures") or {}).get("heldout_pair_accuracy")
        msg = (f"held-out pair accuracy {acc:.3f}" if row.get("state") == "done" and acc is not None
               else row.get("error"))
        if row.get("state") == "done" and not usable(row):
            msg = f"{row.get('status')}: {row.get('status_reason')}"
        echo(f"[sweep] {rid}: {row.get('state')} ({msg})")
        ledger.write_table(out / "ledger.csv")

    todo = [r.run_id for r in matrix.search if force or not ledger.is_done(r.run_id)]
    if todo:
        echo(f"[sweep] search stage: {len(todo)} runs ({len(matrix.search) - len(todo)} already done)")
        ex.run(todo, progress)
    selected = _select(sweep, matrix, ledger, out)
    todo = _seed_stage_plan(sweep, matrix, ledger, selected, force)
    save_plan(sweep, matrix, out)  # now with the seed runs' settings
    if todo:
        echo(f"[sweep] seed stage: {len(todo)} runs")
        ex.run(todo, progress)
    _audit_stage(sweep, matrix, ledger, ex, force, echo)
    ledger.write_table(out / "ledger.csv")

    released = audit_released(sweep, out, echo=echo, executor=ex)  # sweep.released_scorers, the runs' prompts
    return finish(sweep, matrix, ledger, out, selected, echo=echo, released=released)


def _audit_stage(sweep: Sweep, matrix: Matrix, ledger: Ledger, ex: Any, force: bool,
                 echo: Callable[[str], None]) -> None:
    """Every trained run's final audit, as jobs of their own (a run reused by the seed stage is the
    search run, audited once); then each run's audit.json read back into its ledger row. A run
    whose audit.json is there and newer than its training is not audited again (unless forced);
    one whose audit left none keeps its training figures and says where to look."""
    import json

    # transformers: this module loads without it
    from rmtrain.runs import audit_record_figures

    if not sweep.settings.audit.enabled:
        return
    rows = [ledger.get(r.run_id) or {} for r in matrix.runs]
    # a diverged run has no model, a collapsed one a constant one: neither is audited
    trained = [r for r in rows if usable(r) and not r.get("reused_from") and r.get("output_dir")]

    def stale(row: dict[str, Any]) -> bool:
        report = audit_dir(row["output_dir"]) / "audit.json"
        summary = Path(row["output_dir"]) / "train_summary.json"
        return not report.is_file() or (summary.is_file() and summary.stat().st_mtime > report.stat().st_mtime)

    todo = [r["run_id"] for r in trained if force or stale(r)]
    if todo:
        echo(f"[sweep] final audits: {len(todo)} runs ({len(trained) - len(todo)} already audited)")
        ex.audit(todo, lambda rid: echo(f"[sweep] {rid}: final audit ended"))
    for row in rows:
        if not usable(row) or not row.get("output_dir"):
            continue
        where = audit_dir(row["output_dir"])
        if (where / "audit.json").is_file():
            record = json.loads((where / "audit.json").read_text())
            extra = where / EXTRA_FIGURES  # extra rating sets, the other selection rule
            extra_figures = json.loads(extra.read_text()) if extra.is_file() else {}
            ledger.update(row["run_id"], figures={**(row.get("figures") or {}), **audit_record_figures(record),
                                                  **extra_figures},
                          audit_dir=str(where), audit_error=None)
        else:
            why = where / "error.txt"
            ledger.update(row["run_id"], audit_dir=None,
                          audit_error=f"final audit wrote no audit.json (see {why if why.is_file() else 'its log'})")


def _select(sweep: Sweep, matrix: Matrix, ledger: Ledger, out: Path) -> dict[str, dict[str, Any]]:
    """Per (model, arm): the grid setting with the best selection-split accuracy, once every
    search run of that arm has finished (equal budgets: never chosen from part of the grid), among
    the runs that neither diverged nor collapsed (those are listed under ``excluded``)."""
    s = sweep.settings
    selected: dict[str, dict[str, Any]] = {}
    if not s.search:
        return selected
    for model in sweep.models:
        for arm in s.arms:
            rows = [ledger.get(search_id(model, arm, c)) for c in s.grid()]
            ok = [r for r in rows if usable(r)]
            if all(r and r["state"] == "done" for r in rows) and ok:
                setting = select_setting([(r["setting"], r["figures"]) for r in ok])
                selected[f"{model}/{arm}"] = {"setting": setting, "run_id": search_id(model, arm, setting),
                                              "selection_pair_accuracy": {r["run_id"]: r["figures"].get(
                                                  "selection_pair_accuracy") for r in ok},
                                              "excluded": {r["run_id"]: f"{r.get('status')}: {r.get('status_reason')}"
                                                           for r in rows if not usable(r)}}
    atomic_write_json(out / "selection.json", selected)
    return selected


def _seed_stage_plan(sweep: Sweep, matrix: Matrix, ledger: Ledger, selected: dict[str, Any], force: bool) -> list[str]:
    s = sweep.settings
    todo = []
    for spec in matrix.seeds:
        if s.search:
            choice = selected.get(f"{spec.model}/{spec.arm}")
            if choice is None:
                rows = {search_id(spec.model, spec.arm, c): ledger.get(search_id(spec.model, spec.arm, c)) or {}
                        for c in s.grid()}
                failed = [rid for rid, r in rows.items() if r.get("state") != "done"]
                why = (f"search stage unfinished for this arm: {', '.join(failed)}" if failed else
                       f"{NO_USABLE}: " + "; ".join(f"{rid} {r.get('status')}" for rid, r in rows.items()))
                ledger.update(spec.run_id, state="blocked", finished_at=now(), error=why)
                continue
            spec.setting = choice["setting"]
            if spec.seed == search_seed(sweep):
                # the search run with this seed and setting IS this run: reused, not retrained
                src = ledger.get(choice["run_id"])
                spec.output_dir, spec.reuses = src["output_dir"], choice["run_id"]
                ledger.update(spec.run_id, state="done", setting=spec.setting, output_dir=src["output_dir"],
                              status=src.get("status", "ok"), status_reason=src.get("status_reason"),
                              figures=src["figures"], audit_dir=src.get("audit_dir"), reused_from=src["run_id"],
                              fingerprint=src.get("fingerprint"), finished_at=src.get("finished_at"), error=None)
                continue
            spec.output_dir = sweep.seed_dir(spec.model, spec.arm, spec.seed)
            ledger.update(spec.run_id, setting=spec.setting, output_dir=spec.output_dir)
        if force or not ledger.is_done(spec.run_id):
            todo.append(spec.run_id)
    return todo


def finish(sweep: Sweep, matrix: Matrix, ledger: Ledger, out: Path, selected: dict[str, Any], *,
           echo: Callable[[str], None] = print, released: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = {r["run_id"]: r for r in ledger.rows()}
    final = [rows[r.run_id] for r in matrix.seeds]
    group = sweep_group(sweep)
    s = sweep.settings
    paths = write_outputs(out, final, [rows[r.run_id] for r in matrix.runs], s.arms,
                          title=f"Matched sweep {group}",
                          selected={k: v["setting"] for k, v in selected.items()},
                          extra_data=list(s.extra_audit_data),
                          rules=list(dict.fromkeys(s.selection_rules)) if len(set(s.selection_rules)) > 1 else [],
                          released=released, n_boot=s.audit.base.stats.n_boot, seed=s.audit.base.stats.seed)
    wb = sweep.base.get("wandb") or {}
    mode = sweep.overrides.get("wandb.mode", wb.get("mode"))
    log_to_wandb(paths, project=wb.get("project", DEFAULT_PROJECT), group=group, mode=mode, out=out,
                 entity=wb.get("entity"),
                 config={"arms": s.arms, "models": sweep.models, "seeds": s.seeds, "search": s.search})
    df = summary_frame(final)
    echo(df[["arm", "model", "seed", "heldout_pair_accuracy", "share_original", "transplant_random_margin_sd"]]
         .to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    n_bad = sum(r["state"] != "done" for r in rows.values())
    unusable = [r for r in rows.values() if r["state"] == "done" and not usable(r)]
    note = f" ({len(unusable)} diverged or collapsed, listed in report.md)" if unusable else ""
    echo(f"[sweep] {len(rows) - n_bad} of {len(rows)} runs done{note}; {out / 'summary.csv'}, {out / 'report.md'}")
    # the final runs without figures because a run diverged or collapsed (their own, or every search run's)
    lost = [r["run_id"] for r in final if (r["state"] == "done" and not usable(r))
            or (r["state"] == "blocked" and str(r.get("error") or "").startswith(NO_USABLE))]
    return {"matrix": matrix, "rows": list(rows.values()), "paths": paths, "summary": df, "unusable_final": lost}
