"""summary.csv, report.md and the plots from planted ledger rows (no model): the exact columns,
per-arm means and seed ranges computed by hand, and the exact test's 1/252 for separated arms."""

from __future__ import annotations

import pandas as pd
import pytest

from rmtrain.sweep.report import FIGURES, SUMMARY_COLUMNS, arm_table, arm_tests, summary_frame, write_outputs

SEEDS = [1, 2, 3, 4, 5]


def _rows() -> list[dict]:
    rows = []
    for arm, base in (("regression", 0.60), ("bradley_terry", 0.30)):
        for i, seed in enumerate(SEEDS):
            figs = {k: base + 0.01 * i for k in FIGURES}
            figs["share_human"] = 0.05
            rows.append({"run_id": f"m/{arm}/seed{seed}", "arm": arm, "model": "m", "seed": seed, "state": "done",
                         "figures": figs, "output_dir": f"/o/{arm}/seed{seed}", "audit_dir": f"/o/{arm}/a{seed}"})
    rows.append({"run_id": "m/gap_only/seed1", "arm": "gap_only", "model": "m", "seed": 1, "state": "failed",
                 "figures": {}, "output_dir": "/o/g", "audit_dir": None, "error": "RuntimeError: boom"})
    return rows


def test_summary_columns_exactly():
    df = summary_frame(_rows())
    assert tuple(df.columns) == SUMMARY_COLUMNS == (
        "arm", "model", "seed", "heldout_pair_accuracy", "share_original", "share_generic",
        "transplant_random_margin_sd", "transplant_random_accuracy", "sibling_coefficient", "run_dir", "audit_dir")
    assert len(df) == 11 and df.loc[df["arm"] == "gap_only", "share_original"].isna().all()


def test_means_ranges_and_tests_by_hand():
    df = summary_frame(_rows())
    t = arm_table(df, ["regression", "bradley_terry", "gap_only"]).set_index("arm")
    # regression: 0.60, 0.61, ..., 0.64 -> mean 0.62, range [0.60, 0.64]
    assert t.loc["regression", "share_original_mean"] == pytest.approx(0.62)
    assert (t.loc["regression", "share_original_min"], t.loc["regression", "share_original_max"]) == pytest.approx((0.60, 0.64))
    assert t.loc["gap_only", "n_seeds"] == 0
    tests = arm_tests(df, ["regression", "bradley_terry", "gap_only"])
    r = tests[(tests["figure"] == "share_original")].iloc[0]
    assert (r["arm_a"], r["arm_b"]) == ("regression", "bradley_terry")
    assert r["p_a_greater"] == pytest.approx(1 / 252) and r["p_a_less"] == pytest.approx(1.0)
    assert len(tests) == len(FIGURES)  # gap_only has no finished seed: not tested


def test_report_files(tmp_path):
    rows = _rows()
    final = rows
    paths = write_outputs(tmp_path, final, rows, ["regression", "bradley_terry", "gap_only"], title="T",
                          selected={"m/regression": {"training.learning_rate": 1e-5}})
    csv = pd.read_csv(paths["summary"])
    assert list(csv.columns) == list(SUMMARY_COLUMNS) and len(csv) == 11
    text = paths["report"].read_text()
    assert "| regression | 5 | 0.620 [0.600, 0.640]" in text
    assert "0.0040" in text and "1/252" in text
    assert "Human reference between-prompt share (the audit prompts' ratings): 0.050" in text
    assert "m/gap_only/seed1 | failed | RuntimeError: boom" in text
    for name in ("share_vs_margin.png", "arm_bars.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the report's means are what pandas gives on the CSV
    g = csv[csv["arm"] == "bradley_terry"]["heldout_pair_accuracy"]
    assert f"{g.mean():.3f} [{g.min():.3f}, {g.max():.3f}]" in text
