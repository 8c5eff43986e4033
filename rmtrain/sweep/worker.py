"""One run of a sweep, as a process of its own: `python -m rmtrain.sweep.worker OUT RUN_ID`
(under `accelerate launch -m rmtrain.sweep.worker ...` on a cluster). Trains the run (resuming
from its last checkpoint) and records the outcome in the ledger; only the main process (RANK 0)
writes the ledger.

`python -m rmtrain.sweep.worker OUT RUN_ID --audit` is the run's final audit, a job of its own
(one GPU, or N processes under `accelerate launch` sharing the scoring): it writes
`<run>/final_audit/audit.json`, which the driver reads back into the ledger, and the run's extra
audits (``rmtrain.sweep.extra_audits``: other rating sets, the other selection rule's checkpoint)
with their figures in `<run>/final_audit/extra_figures.json`. `... OUT --released` audits the
sweep's released scorers instead (one job). The flags are the fields of :class:`SweepWorkerCommand`
(``rmcore.settings.fields``), as every command's are."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.console.quiet import quiet_libraries
from rmcore.io.files import atomic_write_json
from rmcore.settings.fields import Parser, add_options, from_args, option
from rmeval.scoring.run import Shard
from rmtrain.config import Sweep, load_sweep
from rmtrain.sweep.extra_audits import audit_released, run_extra_audits
from rmtrain.sweep.ledger import Ledger, now
from rmtrain.sweep.matrix import RunSpec, fingerprint, run_config

log = logging.getLogger(__name__)

RECIPE_FILE, STATE_FILE, MATRIX_FILE = "recipe.yaml", "sweep.json", "matrix.json"
AUDIT_DIR = "final_audit"
EXTRA_FIGURES = "extra_figures.json"  # the extra audits' ledger figures, beside audit.json
# Training figures a sweep keeps per run (from train_summary.json).
TRAIN_FIGURES = ("heldout_pair_accuracy", "selection_pair_accuracy", "heldout_rmse", "heldout_pearson",
                 "score_sd", "n_train_pairs", "global_step", "train_seconds")


def terminate_on_sigterm() -> Any:
    """SIGTERM (kill, SLURM preemption) unwinds like Ctrl-C, so the ledger records `interrupted`.
    Returns the previous handler (None where signals cannot be set: not the main thread)."""
    import threading

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def load_context(out: Path) -> tuple[Sweep, dict[str, RunSpec]]:
    """The sweep as the driver saved it in OUT (recipe copy, overrides, matrix)."""
    state = json.loads((out / STATE_FILE).read_text())
    sweep = load_sweep(out / RECIPE_FILE, state["overrides"])
    runs = {r["run_id"]: RunSpec(**r) for r in json.loads((out / MATRIX_FILE).read_text())["runs"]}
    return sweep, runs


def run_one(out: str | os.PathLike, run_id: str, *, force: bool = False) -> bool:
    """Train and audit one run; True when it finished. A failure is recorded, not raised."""
    # transformers: this module loads without it
    from rmtrain.runs import train_run

    out = Path(out)
    sweep, runs = load_context(out)
    spec = runs[run_id]
    main = int(os.environ.get("RANK", "0")) == 0
    ledger = Ledger(out / "ledger")
    if main:
        ledger.start(run_id)
    t0 = time.time()
    try:
        cfg = run_config(sweep, spec)
        summary = train_run(cfg, force=force)
        figures: dict[str, Any] = {k: summary.get(k) for k in TRAIN_FIGURES}
        if main:
            # a diverged or collapsed run is done (a result, not retried) and not usable (ledger doc)
            ledger.update(run_id, state="done", status=summary.get("status", "ok"),
                          status_reason=summary.get("status_reason"), figures=figures, audit_dir=None,
                          finished_at=now(),
                          seconds=round(time.time() - t0, 1), fingerprint=fingerprint(cfg), output_dir=cfg.output_dir)
        return True
    except Exception as e:  # recorded; the other runs go on
        if main:
            run_dir = Path(spec.output_dir or out)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "error.txt").write_text(traceback.format_exc())
            ledger.update(run_id, state="failed", error=f"{type(e).__name__}: {e}".splitlines()[0][:500],
                          error_file=str(run_dir / "error.txt"), finished_at=now(),
                          seconds=round(time.time() - t0, 1))
        log.error("run %s failed: %s", run_id, e)
        return False
    except BaseException:
        # killed (SIGTERM/SIGINT): resumable from its last checkpoint on the next `rmtrain sweep`
        if main:
            ledger.update(run_id, state="interrupted", finished_at=now())
        raise


def audit_dir(output_dir: str | os.PathLike) -> Path:
    """Where a run's final audit goes."""
    return Path(output_dir) / AUDIT_DIR


def audit_one(out: str | os.PathLike, run_id: str) -> bool:
    """The final audit of one trained run into <run>/final_audit (this process's share of it when
    several processes share the scoring). True when it finished; a failure is logged and left to
    the driver, which finds no audit.json."""
    # transformers: this module loads without it
    from rmtrain.runs import final_audit

    sweep, runs = load_context(Path(out))
    cfg = run_config(sweep, runs[run_id])
    try:
        where = audit_dir(cfg.output_dir)
        if final_audit(cfg, sweep.settings.audit, where, shard=Shard.from_env()) is not None:
            # the main process: extra rating sets and the other selection rule's checkpoint
            extra = run_extra_audits(cfg, sweep.settings, where)
            if extra:
                atomic_write_json(where / EXTRA_FIGURES, extra)
        return True
    except Exception as e:
        (audit_dir(cfg.output_dir)).mkdir(parents=True, exist_ok=True)
        (audit_dir(cfg.output_dir) / "error.txt").write_text(traceback.format_exc())
        log.error("final audit of %s failed: %s", run_id, e)
        return False


@dataclass
class SweepWorkerCommand:
    """One job's command line (``rmtrain.sweep.executors.worker_command`` writes it)."""

    sweep_dir: str = option(positional=True, help="the sweep's folder (its recipe copy, matrix and ledger)")
    run_id: str | None = option(None, positional=True, nargs="?", help="the run to train, or to audit with --audit")
    force: bool = option(False, help="retrain even if the run's train_summary.json exists")
    audit: bool = option(False, help="the run's final audit (the run is trained)")
    released: bool = option(False, help="instead of a run: audit the sweep's released scorers "
                                        "(rmtrain.sweep.extra_audits)")


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m rmtrain.sweep.worker", description=__doc__.split("\n\n")[0])
    add_options(ap, SweepWorkerCommand)
    args = from_args(SweepWorkerCommand, ap.parse_args(argv))
    if (args.run_id is None) != args.released:
        ap.error("give a RUN_ID or --released")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    quiet_libraries()
    terminate_on_sigterm()
    if args.released:
        sweep, _ = load_context(Path(args.sweep_dir))
        audit_released(sweep, args.sweep_dir, echo=lambda m: print(m, file=sys.stderr))
        return 0
    if args.audit:
        return 0 if audit_one(args.sweep_dir, args.run_id) else 1
    return 0 if run_one(args.sweep_dir, args.run_id, force=args.force) else 1


if __name__ == "__main__":
    sys.exit(main())
