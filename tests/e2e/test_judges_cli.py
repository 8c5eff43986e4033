"""`rmeval judges analyze|reweight|elicit` on files: documented keys, plots, W&B, bad input."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rmeval.cli import main
from rmeval.judges.simulate import simulate_panel
from tests.support import read_run


@pytest.fixture
def panel_files(tmp_path):
    rng = np.random.default_rng(0)
    w = {f"judge{j}": rng.normal(0, 1.5, 8) for j in range(3)}
    items, judg, _ = simulate_panel(240, w, target=rng.normal(0, 1.5, 8), sources=("hh", "chat", "safety"), seed=0)
    items.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    judg.to_parquet(tmp_path / "judgments.parquet", index=False)
    return tmp_path, w


def test_analyze_and_reweight_commands(panel_files):
    tmp, w = panel_files
    out = tmp / "an"
    assert main(["judges", "analyze", "--judgments", str(tmp / "judgments.parquet"), "--out", str(out),
                 "--n-splits", "4", "--wandb-mode", "offline"]) == 0
    res = json.loads((out / "analysis.json").read_text())
    for j in w:
        assert set(res["judges"][j]["weights"]) == {f"attr_{k:02d}" for k in range(8)}
        assert 0.5 < res["judges"][j]["cv_accuracy"] <= 1
    assert 0 < res["agreement"]["overall"] < res["agreement"]["attribute"] <= 1
    assert (out / "agreement_heatmap.png").stat().st_size > 0 and (out / "weight_profiles.png").is_file()
    assert "| attribute |" in (out / "analysis.md").read_text()
    for _ in range(50):  # the offline run file is completed by the W&B service shortly after finish()
        logged = {k: v for h in read_run(out / "wandb")["history"] for k, v in h.items()}
        if "judges/agreement/attribute" in logged:
            break
        time.sleep(0.2)
    assert logged["judges/agreement/attribute"] == pytest.approx(res["agreement"]["attribute"])

    out = tmp / "rw"
    assert main(["judges", "reweight", "--judgments", str(tmp / "judgments.parquet"), "--items",
                 str(tmp / "items.jsonl"), "--out", str(out), "--n-repeats", "2", "--wandb-mode", "disabled"]) == 0
    rw = json.loads((out / "reweight.json").read_text())
    for j in w:
        for s in ("hh", "chat", "safety"):
            r = rw["judges"][j]["sources"][s]
            assert r["n_test"] == 20 and {"base_accuracy", "reweighted_accuracy"} <= set(r)
    assert (out / "reweight_weights.png").is_file() and "reweighted" in (out / "reweight.md").read_text()


def test_bad_input_is_one_line_error(panel_files, capsys):
    tmp, _ = panel_files
    bad = tmp / "bad.jsonl"
    bad.write_text('{"item_id": "i", "judge": "j", "attribute": "x", "order": "AB", "direction": 1}\n'
                   '{"item_id": "i", "judge": "j", "attribute": "x", "order": "CD", "direction": 1}\n')
    assert main(["judges", "analyze", "--judgments", str(bad), "--out", str(tmp / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "bad.jsonl" in err and "row 2" in err and "'order'" in err and "\n" not in err
    assert main(["judges", "elicit", "--items", str(tmp / "items.jsonl"), "--out", str(tmp / "e")]) == 2
    assert "--model" in capsys.readouterr().err


def test_elicit_without_a_judge_writes_nothing(tmp_path, capsys):
    """Items built from --data go to OUT/items.jsonl: a missing judge is refused before that."""
    out = tmp_path / "e"
    assert main(["judges", "elicit", "--data", "simulated:n_prompts=4,seed=1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmeval: error: give exactly one judge") and "\n" not in err
    assert not out.exists()


def test_analyze_one_judge_draws_its_profile_and_says_why_no_heatmap(tmp_path, capsys):
    rng = np.random.default_rng(2)
    items, judg, _ = simulate_panel(120, {"solo": rng.normal(0, 1.5, 6)}, target=rng.normal(0, 1.5, 6),
                                    sources=("hh",), seed=2)
    judg.to_json(tmp_path / "judgments.jsonl", orient="records", lines=True)
    out = tmp_path / "an"
    assert main(["judges", "analyze", "--judgments", str(tmp_path / "judgments.jsonl"), "--out", str(out),
                 "--n-splits", "2", "--null-repeats", "0", "--wandb-mode", "disabled"]) == 0
    note = "agreement_heatmap.png not drawn: agreement needs two judges, the judgments hold 1 (solo)"
    err = [line for line in capsys.readouterr().err.splitlines() if "not drawn" in line]
    assert err == [note]
    assert f"\n{note}.\n" in (out / "analysis.md").read_text()
    assert (out / "weight_profiles.png").is_file() and not (out / "agreement_heatmap.png").exists()
