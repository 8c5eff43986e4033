"""The sweep's audits beyond each run's final audit, all with ``sweep.audit``'s settings:

- ``sweep.extra_audit_data`` (label -> data spec): every run's final checkpoint is also audited on
  another rating set (the study's second set, HelpSteer, has independent ratings), into
  ``<run>/final_audit.<label>/``; its figures enter the ledger as ``<label>:<figure>``.
- ``sweep.selection_rules`` (``final`` and ``best_pair_accuracy``, the study's Table 26): with
  ``training.selection: best_pair_accuracy`` a run directory holds the best checkpoint and its
  last ``checkpoint-N`` (the Trainer always keeps the newest one) is the final-step model; the
  final-step checkpoint is audited into ``<run>/final_audit.final/``, and each rule's figures enter
  the ledger as ``<rule>:<figure>`` (the same audit twice when the best step is the last one).
  The learning rate is chosen once, by the recipe's rule; both rules read the same runs.
- ``sweep.released_scorers`` (label -> Hub id or path): released scorers audited on the same
  prompts as the runs (and on every extra rating set) once the seed stage is done, into
  ``OUT/released/<label>/[<data label>/]``: in the driver's process with the local executor, as
  one job of its own (``python -m rmtrain.sweep.worker OUT --released``, the runs' SLURM settings)
  with submitit; ``rmtrain.sweep.report`` draws them on the share-versus-margin plot.

Figures per audit: every one of ``rmeval.stats.audit_sections.sweep_figures``, ``pair_accuracy`` (the
audit's pairwise accuracy on its prompts' preference pairs, the same prompts for both rules)
included.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json
from rmcore.runtime.checkpoints import SUMMARY_FILE
from rmcore.settings.recipes import recipe_dict
from rmeval.audit.pipeline import audit_checkpoint
from rmeval.scoring import ScorerSettings
from rmeval.stats.audit_sections import figure_interval, figure_values
from rmtrain.config import Sweep, SweepSettings, TrainConfig

log = logging.getLogger(__name__)

RELEASED_DIR = "released"


def audit_dir(run_dir: str | Path, label: str | None = None) -> Path:
    """Where a run's audit lands: ``final_audit/`` (the run's own rule, its data) or
    ``final_audit.<label>/`` (an extra rating set, or the other selection rule)."""
    return Path(run_dir) / ("final_audit" if label is None else f"final_audit.{label}")


def read_figures(audit_path: str | Path) -> dict[str, Any]:
    """The sweep's figures of an audit directory's audit.json (``rmeval.stats.audit_sections.figure_values``:
    every role, ``pair_accuracy`` included; None where the audit has none)."""
    return dict(figure_values(json.loads((Path(audit_path) / "audit.json").read_text())))


def rule_checkpoints(run_dir: str | Path) -> dict[str, Path]:
    """{rule: checkpoint directory} of a finished run trained with ``best_pair_accuracy``: the run
    directory (the best checkpoint, loaded at the end) and ``checkpoint-<last step>``."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    if summary.get("selection") != "best_pair_accuracy":
        raise ConfigError(f"{run_dir}: trained with selection '{summary.get('selection')}'; both rules need "
                          "training.selection: best_pair_accuracy")
    step = int(summary["global_step"])
    best = summary.get("best_checkpoint")
    final = run_dir / f"checkpoint-{step}"
    if best and Path(best).name == final.name:
        final = run_dir  # the best step is the last one: one model
    elif not (final / "config.json").is_file():
        raise ConfigError(f"{run_dir}: no {final.name}/ (the final-step checkpoint) to audit beside the best one")
    return {"best_pair_accuracy": run_dir, "final": final}


def run_extra_audits(cfg: TrainConfig, settings: SweepSettings, primary: str | Path) -> dict[str, Any]:
    """The extra audits of one finished run (module doc); ``primary``: its final audit's directory.
    Returns ledger figures ``<label>:<figure>``."""
    # transformers: this module loads without it
    from rmtrain.runs import final_audit

    figures: dict[str, Any] = {}
    for label, spec in settings.extra_audit_data.items():
        out = audit_dir(cfg.output_dir, label)
        counts = final_audit(cfg, dataclasses.replace(settings.audit, data=dict(spec)), out)
        figures.update({f"{label}:{k}": v for k, v in {**counts, **read_figures(out)}.items()})
    if len(set(settings.selection_rules)) > 1:
        own = read_figures(primary)
        for rule, ckpt in rule_checkpoints(cfg.output_dir).items():
            if Path(ckpt) == Path(cfg.output_dir):
                figs = own
            else:
                out = audit_dir(cfg.output_dir, rule)
                final_audit(dataclasses.replace(cfg, output_dir=str(ckpt)), settings.audit, out)
                figs = read_figures(out)
            figures.update({f"{rule}:{k}": v for k, v in figs.items()})
            figures[f"{rule}:checkpoint"] = Path(ckpt).name if Path(ckpt) != Path(cfg.output_dir) else "."
    return figures


def released_scorer_settings(spec: str | dict[str, Any], settings: SweepSettings, max_length: int) -> Any:
    """The ScorerSettings of a ``sweep.released_scorers`` entry (``max_length``: the runs' default)."""
    d = {"model": spec} if isinstance(spec, str) else dict(spec)
    return ScorerSettings(model=str(d["model"]), kind=d.get("kind", "seq_classifier"),
                          batch_size=int(d.get("batch_size", settings.audit.batch_size)),
                          max_length=d.get("max_length", settings.audit.max_length or max_length))


def audit_released(sweep: Sweep, out: str | Path, *, echo: Callable[[str], None] = print,
                   executor: Any = None) -> dict[str, Any]:
    """Audit every ``sweep.released_scorers`` entry on the runs' audit prompts and on every extra
    rating set; a finished audit with the same model and settings is read back, not redone. With a
    submitit ``executor`` (``rmtrain.sweep.executors.SubmititExecutor``) the audits run as one job
    and are read back here. Returns {label: {model, kind, audits: {data label ("" the runs'
    data): figures + CIs}}}."""
    # transformers: this module loads without it
    from rmtrain.runs import audit_rating_set

    s = sweep.settings
    if not s.released_scorers:
        return {}
    if executor is not None and hasattr(executor, "executor"):
        import os
        import sys

        from submitit.helpers import CommandFunction

        echo(f"[sweep] released scorers: one job ({len(s.released_scorers)} scorers)")
        job = executor.executor("rmtrain-released").submit(
            CommandFunction([sys.executable, "-m", "rmtrain.sweep.worker", str(out), "--released"], cwd=os.getcwd(),
                            verbose=True))
        try:
            job.result()
        except Exception as e:  # the scorers it did not finish are retried below, each failure recorded
            echo(f"[sweep] released scorers' job {job.job_id} failed: {str(e).strip().splitlines()[-1:]}")
    cfg = sweep.run_config(sweep.models[0], s.arms[0], s.seeds[0])  # the split is the same for every run
    data = {"": s.audit, **{lab: dataclasses.replace(s.audit, data=dict(spec))
                            for lab, spec in s.extra_audit_data.items()}}
    sets = {lab: audit_rating_set(cfg, a) for lab, a in data.items()}
    result: dict[str, Any] = {}
    for name, spec in s.released_scorers.items():
        scorer = released_scorer_settings(spec, s, cfg.training.max_length)
        entry: dict[str, Any] = {"model": scorer.model, "kind": scorer.kind, "audits": {}}
        result[name] = entry
        try:
            _audit_one(name, scorer, entry, data, sets, cfg, out, echo, audit_checkpoint)
        except Exception as e:  # recorded in the report; the sweep's outputs are still written
            entry["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
            echo(f"[sweep] released scorer {name} failed: {entry['error']}")
    return result


def _audit_one(name: str, scorer: Any, entry: dict[str, Any], data: dict[str, Any], sets: dict[str, Any],
               cfg: TrainConfig, out: str | Path, echo: Callable[[str], None], audit_checkpoint: Any) -> None:
    """One released scorer on every rating set of ``data`` (label -> FinalAuditSettings), into ``entry``."""
    for lab, a in data.items():
        where = Path(out) / RELEASED_DIR / name / lab if lab else Path(out) / RELEASED_DIR / name
        stamp = {"model": scorer.model, "scorer": dataclasses.asdict(scorer), "audit": recipe_dict(a)}
        done = where / "released.json"
        if not ((where / "audit.json").is_file() and done.is_file() and json.loads(done.read_text()) == stamp):
            rs, _ = sets[lab]
            desc = json.dumps(a.data) if a.data else f"held-out prompts of {json.dumps(cfg.data)}"
            echo(f"[sweep] released scorer {name} ({scorer.model}) on {lab or 'the runs audit data'}")
            audit_checkpoint(scorer.model, rs, scorer, a.audit_settings(cfg.attribute), where, name=name,
                             data=desc, wandb_project=cfg.wandb.project, wandb_mode=cfg.wandb.mode)
            atomic_write_json(done, stamp)
        audit = json.loads((where / "audit.json").read_text())
        figs = read_figures(where)
        for fig in ("share_original", "transplant_random_margin_sd"):  # the share-versus-margin plot's
            figs[f"{fig}_ci95"] = figure_interval(audit, fig)
        figs["audit_dir"] = str(where)
        entry["audits"][lab] = figs

