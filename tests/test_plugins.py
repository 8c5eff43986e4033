"""Plugins from the installed commands: a distribution on the path (a .dist-info with its
entry_points.txt, what pip installs) registers an arm, a scorer, a backend, a prompt and a
response perturbation and an audit section through the entry-point groups, and ``rmtrain`` / ``rmeval`` run them in a
subprocess. Nothing here touches a registry of this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

ENTRY_POINTS = """\
[matchrm.arms]
example_gap_hinge = example_plugin:GapHinge

[matchrm.scorers]
example_word_count = example_plugin:WordCountScorer

[matchrm.backends]
example_echo = example_plugin:ECHO

[matchrm.prompt_perturbations]
PL = example_plugin:COURTESY

[matchrm.response_perturbations]
SHOUT = example_plugin:SHOUT

[matchrm.audit_sections]
example_mean_score = example_plugin:MEAN_SCORE
"""

PLUGIN = '''\
import numpy as np
import torch

from rmeval.backends.generators import Generator
from rmeval.backends.spec import Backend
from rmeval.perturbations.controlled import PromptPerturbation, ResponsePerturbation
from rmeval.scoring import Scorer
from rmeval.stats.sections import AuditSection, Figure
from rmtrain.arms import Arm


class GapHinge(Arm):
    name = "example_gap_hinge"
    pointwise = False

    def targets(self, pairs, seed):
        return {"gap": pairs.gap}

    def loss(self, r_chosen, r_rejected, targets):
        return torch.relu(targets["gap"] - (r_chosen - r_rejected)).mean()


class WordCountScorer(Scorer):
    """Words of the response plus capital letters of the prompt's last turn: both plugin
    perturbations move it by a known amount."""

    kind = "example_word_count"

    def __init__(self, **_):
        super().__init__()

    @property
    def fingerprint(self):
        return "example_word_count-v1"

    def score(self, items):
        return np.array([len(r.split()) + sum(c.isupper() for c in m[-1]["content"]) for m, r in items], dtype=float)


class Echo(Generator):
    kind = "example_echo"

    def __init__(self, word):
        self.word = word

    def generate(self, prompts, task, n=4, subtype=None):
        return {p.prompt_id: [f"{self.word} {p.last_user_text}"] * n for p in prompts}


ECHO = Backend("echoes the prompt after a word", value="WORD", makes={"variants": lambda spec, **_: Echo(spec.value)})
COURTESY = PromptPerturbation(lambda text, rng: "PLEASE, " + text)
SHOUT = ResponsePerturbation("Rewrite in capitals.", "shouting", rule=lambda text, rng: text.upper())
MEAN_SCORE = AuditSection(
    "example_mean_score", lambda inputs: {"estimate": float(inputs.orig["score"].mean())}, needs=("original",),
    figures={"example_mean_score": Figure(("estimate",), "mean original score")},
    markdown=lambda audit: ["## Mean original score", "", f"{audit['example_mean_score']['estimate']:.2f}", ""])
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    info = root / "example_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: example-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (root / "example_plugin.py").write_text(PLUGIN)
    return root


def _cli(command: str, *args: str, path: Path | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run([str(BIN / command), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def test_an_arm_from_an_entry_point_is_listed_and_trained_by_rmtrain(plugin, tmp_path):
    assert "example_gap_hinge" not in _cli("rmtrain", "train", "--help", path=None).stdout
    assert "example_gap_hinge" in _cli("rmtrain", "train", "--help", path=plugin).stdout
    res = _cli("rmtrain", "train", "--config", "recipes/demo.yaml", "--arm", "example_gap_hinge",
               "--set", "training.max_steps=1", "--set", "data.n_prompts=12", "--out", str(tmp_path / "run"),
               path=plugin)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "train_summary.json").read_text())["arm"] == "example_gap_hinge"


def test_a_scorer_and_both_perturbations_from_entry_points_run_in_rmeval_suitability(plugin, tmp_path):
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")  # the word counter reads no model
    args = ["suitability", "--checkpoint", str(ckpt), "--scorer", "example_word_count", "--data",
            "simulated:n_prompts=20,seed=0", "--perturbations", "PL", "SHOUT@rule", "--n-permutations", "200",
            "--no-progress", "--out", str(tmp_path / "s")]
    bad = _cli("rmeval", *args, path=None)
    assert bad.returncode == 2 and "invalid choice: 'example_word_count'" in bad.stderr
    res = _cli("rmeval", *args, path=plugin)
    assert res.returncode == 0, res.stderr[-2000:]
    per = json.loads((tmp_path / "s" / "suitability.json").read_text())["perturbations"]
    assert (per["PL"]["group"], per["SHOUT@rule"]["group"]) == ("controlled", "stylized")
    assert per["PL"]["n_changed"] == per["PL"]["n"] > 0 and per["SHOUT@rule"]["n_changed"] == per["SHOUT@rule"]["n"]
    # PLEASE adds six capitals to both sides of a pair: its margin does not move
    assert per["PL"]["mean_delta"] == 0.0


def test_a_backend_from_an_entry_point_writes_variants_through_rmeval(plugin, tmp_path):
    out = tmp_path / "v.jsonl"
    args = ["variants", "--data", "simulated:n_prompts=3,seed=0", "--task", "paraphrase", "--n", "1",
            "--generator", "example_echo:Hey", "--out", str(out)]
    bad = _cli("rmeval", *args, path=None)
    assert bad.returncode == 2 and "unknown backend 'example_echo'" in bad.stderr and not out.exists()
    res = _cli("rmeval", *args, path=plugin)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(r["text"].startswith("Hey ") for r in rows)


def test_an_audit_section_from_an_entry_point_is_computed_and_shown_by_rmeval_stats(plugin, tmp_path):
    import pandas as pd

    ids = pd.DataFrame({"prompt_id": [f"q{i // 2}" for i in range(12)], "response_id": [f"r{i}" for i in range(12)]})
    ids.assign(condition="original", score=[float(i) for i in range(12)]).to_parquet(tmp_path / "scores.parquet")
    ids.assign(helpfulness=[1.0, 3.0] * 6).to_json(tmp_path / "ratings.jsonl", orient="records", lines=True)

    def stats(out: Path, path: Path | None) -> dict:
        res = _cli("rmeval", "stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings",
                   str(tmp_path / "ratings.jsonl"), "--n-boot", "50", "--out", str(out), path=path)
        assert res.returncode == 0, res.stderr[-2000:]
        return json.loads((out / "audit.json").read_text())

    assert "example_mean_score" not in stats(tmp_path / "without", None)
    audit = stats(tmp_path / "with", plugin)
    assert audit["example_mean_score"]["estimate"] == 5.5  # the mean of 0, 1, ..., 11
    assert list(audit)[-2:] == ["example_mean_score", "meta"]  # after the built-in sections
    assert "## Mean original score\n\n5.50\n" in (tmp_path / "with" / "audit.md").read_text()
