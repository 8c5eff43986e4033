"""An evaluation of a checkpoint trained by rmtrain sits beside its training run, through the real
``rmeval`` main: its W&B run (read back from the offline folder, ``tests.support.read_run``) is in
the training run's project and group with its arm and seed tags and the metrics
docs/weights-and-biases.md names, unless ``--wandb-project`` says otherwise; the texts are scored at
the length the run was trained with, recorded in every output, and a length the user gives that
differs from it is said on stderr. ``rmeval stats`` keeps the scored run's provenance.

Material: a tiny word-level Llama classifier (``tests.support.save_tiny_classifier``) saved as an
rmtrain run (``matchrm_config.json``: arm, seed, model, ``training.max_length`` 16, W&B project and
group; ``train_summary.json``). Its 512 positions would hold every simulated text whole: only the
training length cuts them."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path

import pytest

from rmeval.cli import main
from tests.support import logged_media, read_run, save_tiny_classifier

DATA = "simulated:n_prompts=6,responses_per_prompt=2,seed=1"
TRAINED_LENGTH = 16
WANDB = {"project": "matchrm-demo", "group": "demo", "tags": [], "entity": None, "mode": None}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("runs") / "bt_margin" / "seed3"
    save_tiny_classifier(d)
    (d / "matchrm_config.json").write_text(json.dumps({
        "arm": "bt_margin", "seed": 3, "model": {"name_or_path": "tiny-llama"},
        "training": {"max_length": TRAINED_LENGTH}, "wandb": WANDB}))
    (d / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 3, "model": "tiny-llama"}))
    return d


def logged_keys(run: dict) -> set[str]:
    return {k for row in run["history"] for k in row}


@pytest.fixture(scope="module")
def audited(run: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``rmeval audit`` of the run, logged offline: (its output folder, its stdout)."""
    out = tmp_path_factory.mktemp("audited") / "audit"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["audit", "--checkpoint", str(run), "--data", DATA, "--out", str(out), "--conditions", "original",
                     "--n-boot", "20", "--wandb-mode", "offline", "--no-progress"]) == 0
    return out, printed.getvalue()


def test_audit_scores_at_the_training_length_and_records_it(audited: tuple[Path, str]) -> None:
    out, printed = audited
    audit = json.loads((out / "audit.json").read_text())
    # the model alone would read 512 tokens and cut no simulated text
    assert audit["meta"]["max_length"] == audit["meta"]["training_max_length"] == TRAINED_LENGTH
    assert audit["truncation"]["total"]["prompt_truncated"] > 0
    assert f"at up to {TRAINED_LENGTH} tokens (the training length)" in (out / "audit.md").read_text()
    assert f"scores of at most {TRAINED_LENGTH} tokens" in printed


def test_audit_logs_beside_the_training_run(audited: tuple[Path, str]) -> None:
    w = read_run(audited[0] / "wandb")
    assert (w["project"], w["group"], w["name"], w["job_type"]) == ("matchrm-demo", "demo", "audit-seed3", "audit")
    assert set(w["tags"]) == {"arm:bt_margin", "seed:3"} and w["config"]["model"] == "tiny-llama"
    # docs/weights-and-biases.md: every scalar under audit/..., the share table, the plots
    assert "audit/share/original/estimate" in logged_keys(w)
    assert {"audit/share_table": "table-file", "audit/shares": "image-file"}.items() <= logged_media(w).items()


def test_stats_keeps_the_scored_runs_provenance_and_logs_beside_it(audited: tuple[Path, str],
                                                                    tmp_path: Path) -> None:
    out = audited[0]
    tables = ["--scores", str(out / "scores.parquet"), "--ratings", str(out / "ratings.parquet"), "--n-boot", "20",
              "--wandb-mode", "offline"]
    assert main(["stats", *tables, "--out", str(tmp_path / "stats")]) == 0
    rec = json.loads((tmp_path / "stats" / "audit.json").read_text())
    assert {k: rec["meta"].get(k) for k in ("arm", "run_seed", "model", "group", "max_length")} == {
        "arm": "bt_margin", "run_seed": 3, "model": "tiny-llama", "group": "demo", "max_length": TRAINED_LENGTH}
    w = read_run(tmp_path / "stats" / "wandb")
    assert (w["project"], w["group"], w["name"]) == ("matchrm-demo", "demo", "stats-bt_margin-seed3")
    assert set(w["tags"]) == {"arm:bt_margin", "seed:3"} and "audit/share/original/estimate" in logged_keys(w)
    # a project the user names wins; the run stays in its group
    assert main(["stats", *tables, "--out", str(tmp_path / "elsewhere"), "--wandb-project", "scratch"]) == 0
    w = read_run(tmp_path / "elsewhere" / "wandb")
    assert (w["project"], w["group"]) == ("scratch", "demo")
    # and a group the user names: in the training run's project
    assert main(["stats", *tables, "--out", str(tmp_path / "regrouped"), "--wandb-group", "rerun"]) == 0
    w = read_run(tmp_path / "regrouped" / "wandb")
    assert (w["project"], w["group"]) == ("matchrm-demo", "rerun")


def test_suitability_logs_beside_the_training_run_and_says_a_length_other_than_the_trained_one(
        run: Path, tmp_path: Path, caplog) -> None:
    out = tmp_path / "suit"
    with caplog.at_level(logging.WARNING):
        assert main(["suitability", "--checkpoint", str(run), "--data", DATA, "--out", str(out), "--perturbations",
                     "EF", "IU", "--n-permutations", "200", "--no-robustness", "--max-length", "12",
                     "--wandb-mode", "offline", "--no-progress", "--wandb-group", "suit-rerun"]) == 0
    w = read_run(out / "wandb")
    # --wandb-group names the group; the project stays the training run's
    assert (w["project"], w["group"], w["name"]) == ("matchrm-demo", "suit-rerun", "suitability-seed3")
    assert set(w["tags"]) == {"arm:bt_margin", "seed:3"}
    # docs/weights-and-biases.md: a scalar per perturbation and field (suitability/<code>/...), the table
    assert any(k.startswith("suitability/EF/") for k in logged_keys(w))
    assert logged_media(w).get("suitability/table") == "table-file"
    said = [r.getMessage() for r in caplog.records if "trained with max_length" in r.getMessage()]
    assert said == [f"max_length 12: {run} was trained with max_length {TRAINED_LENGTH}; scoring at 12 tokens"]
    meta = json.loads((out / "suitability.json").read_text())["meta"]
    assert (meta["max_length"], meta["training_max_length"]) == (12, TRAINED_LENGTH)
    assert f"up to 12 tokens (trained with {TRAINED_LENGTH})" in (out / "suitability.md").read_text()
