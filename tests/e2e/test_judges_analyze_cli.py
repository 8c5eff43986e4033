"""`rmeval judges analyze` with reference labels and the paper's controls: every section in
analysis.json and analysis.md, the headline figures on W&B, a heat map sized to its labels, and
bad flags as one-line errors that write nothing."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from PIL import Image

from rmeval.cli import main
from rmeval.judges.simulate import simulate_panel
from tests.support import read_run

SECTIONS = ("single_read_control", "three_category_kappa", "matched_items", "no_conflict", "attribute_importance",
            "difficulty_strata", "label_associations", "identical_preference_null", "component_swaps")


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    w = {f"judge-{j}": rng.normal(0, 1.5, 8) for j in range(3)}
    items, judg, _ = simulate_panel(200, w, target=rng.normal(0, 1.5, 8), sources=("hh", "chat"), position=0.1,
                                    seed=1)
    items.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    judg.to_json(tmp_path / "judgments.jsonl", orient="records", lines=True)
    return tmp_path


def test_analyze_with_items_writes_every_control(files, capsys):
    out = files / "an"
    assert main(["judges", "analyze", "--judgments", str(files / "judgments.jsonl"), "--items",
                 str(files / "items.jsonl"), "--out", str(out), "--n-splits", "2", "--null-repeats", "5",
                 "--min-shared-attributes", "3", "--min-n-source", "20", "--min-n-pooled", "40",
                 "--wandb-mode", "offline"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    res = json.loads((out / "analysis.json").read_text())
    assert set(SECTIONS) <= set(res)
    null = res["identical_preference_null"]
    assert f"on {null['n_attributes_exceeding']} of 8 attributes" in line and line.endswith("analysis.json")
    assert null["repeats"] == 5 and res["no_conflict"]["min_shared"] == 3
    assert (res["label_associations"]["min_n_pooled"] == 40
            and set(res["label_associations"]["sources"]) == {"hh", "chat"})
    md = (out / "analysis.md").read_text()
    for heading in ("## Stable and single-read protocols", "## Three-category kappa", "## Matched items",
                    "## No-conflict subset", "## Agreement by fitted importance", "## Difficulty strata",
                    "## Single-attribute associations", "## Identical-preference null", "## Component swaps"):
        assert heading in md
    width, height = Image.open(out / "agreement_heatmap.png").size
    assert width >= 600 and height >= 500
    for _ in range(50):  # the offline run file is completed by the W&B service shortly after finish()
        logged = {k: v for h in read_run(out / "wandb")["history"] for k, v in h.items()}
        if "judges/no_conflict/different_winner_rate" in logged:
            break
        time.sleep(0.2)
    assert logged["judges/no_conflict/different_winner_rate"] == pytest.approx(
        res["no_conflict"]["different_winner_rate"])
    assert logged["judges/identical_preference_null/median_ratio"] == pytest.approx(null["median_ratio"])
    # per-attribute detail of the controls stays in the file
    assert not any(k.startswith("judges/identical_preference_null/attributes/") for k in logged)


def test_analyze_without_items_has_no_label_sections(files):
    out = files / "an2"
    assert main(["judges", "analyze", "--judgments", str(files / "judgments.jsonl"), "--out", str(out),
                 "--n-splits", "0", "--null-repeats", "0", "--wandb-mode", "disabled"]) == 0
    res = json.loads((out / "analysis.json").read_text())
    assert "difficulty_strata" not in res and "label_associations" not in res
    assert "identical_preference_null" not in res and "component_swaps" in res


@pytest.mark.parametrize("flags, message", [(["--null-repeats", "-1"],
                                             "--null-repeats: -1 is out of range; allowed: an integer >= 0"),
                                            (["--min-shared-attributes", "0"],
                                             "--min-shared-attributes: 0 is out of range; allowed: an integer >= 1"),
                                            (["--donor", "nobody"], "--donor 'nobody' is not a judge"),
                                            (["--items", "missing.jsonl"], "not found")])
def test_bad_flags_are_one_line_errors(files, capsys, flags, message):
    out = files / "bad"
    code = main(["judges", "analyze", "--judgments", str(files / "judgments.jsonl"), "--out", str(out),
                 "--wandb-mode", "disabled", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("rmeval: error:") and message in err and "\n" not in err
    assert not out.exists()
