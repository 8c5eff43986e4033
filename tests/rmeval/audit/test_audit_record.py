"""What an audit's record and its printed lines say about the run: ``meta.seconds`` is the whole run
(the scoring included, not the statistics alone), and each command's line is titled by the run's
arm and seed, as its report is."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from rmcore.data.simulated import simulate_rating_set
from rmeval.audit.pairwise import pairwise_line
from rmeval.audit.pipeline import audit, audit_line
from rmeval.audit.settings import AuditSettings
from rmeval.scoring.base import Scorer
from rmeval.stats.settings import StatsSettings
from rmeval.suitability.checkpoints import suitability_line

SLEEP = 0.2  # seconds per scoring call: a floor under the run's time, whatever the machine


class SleepyScorer(Scorer):
    kind = "sleepy"
    tokenizer = None

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @property
    def fingerprint(self) -> str:
        return "sleepy:1"

    def score(self, items):
        self.calls += 1
        time.sleep(SLEEP)
        self._record_flags(np.zeros((len(items), 2), dtype=bool))
        return np.array([len(r) % 7 + 0.1 * i for i, (_, r) in enumerate(items)], dtype=float)


def test_meta_seconds_covers_the_scoring(tmp_path):
    rs = simulate_rating_set(n_prompts=8, responses_per_prompt=3, seed=0)
    scorer = SleepyScorer()
    settings = AuditSettings(conditions=["original", "generic"], stats=StatsSettings(n_boot=20, n_boot_regression=20),
                             progress=False)
    res = audit(scorer, rs, settings, tmp_path)
    meta = res["meta"]
    assert scorer.calls == 2  # one chunk per condition
    assert meta["seconds_scoring"] >= scorer.calls * SLEEP
    assert meta["seconds"] >= meta["seconds_scoring"] + meta["seconds_statistics"]
    assert json.loads((tmp_path / "audit.json").read_text())["meta"]["seconds"] == meta["seconds"]


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "outputs" / "seed3"
    run.mkdir(parents=True)
    (run / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 3}))
    return run


def test_every_summary_line_is_titled_by_arm_and_seed(tmp_path):
    run = _run_dir(tmp_path)
    total = {"n": 180, "n_resumed": 0, "prompt_truncated": 2, "response_truncated": 10}
    rec = {"truncation": {"total": total, "by_condition": {}}, "meta": {"checkpoint": str(run)}}
    assert audit_line("seed3", rec, "OUT") == \
        "bt_margin seed 3: 180 scores (2 of 180 texts had their prompt cut; 10 responses cut) -> OUT"
    suit = {"perturbations": {"EF": {"p_value": 0.01, "cohens_d": 0.5, "stars": "*", "unsuitable": False}},
            "meta": {"n_items": 40, "checkpoint": str(run)}}
    assert suitability_line("seed3", suit, "OUT").startswith("bt_margin seed 3: suitability on 40 items: EF d=0.50*")
    # an intermediate checkpoint of the run is named with its step, as display_name names it
    step = run / "checkpoint-20"
    step.mkdir()
    assert audit_line("checkpoint-20", {**rec, "meta": {"checkpoint": str(step)}}, "OUT").startswith(
        "bt_margin seed 3 checkpoint-20: 180 scores")
    # a model that rmtrain did not train keeps its name
    assert audit_line("m", {**rec, "meta": {"checkpoint": str(tmp_path)}}, "OUT").startswith("m: 180 scores")
    assert suitability_line("m", {**suit, "meta": {"n_items": 40}}, "OUT").startswith("m: suitability")
    pw = {"accuracy": {"estimate": 0.5}, "truncation": total}
    assert pairwise_line("bt_margin seed 3", pw, 90, "OUT").startswith("bt_margin seed 3: pairwise accuracy 0.500")
