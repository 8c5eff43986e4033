"""summary.csv, report.md and the plots from planted ledger rows (no model): the exact columns,
per-arm means and seed ranges computed by hand, and the exact test's 1/252 for separated arms."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rmtrain.sweep.report import (
    arm_table,
    arm_tests,
    figure_columns,
    summary_columns,
    summary_frame,
    write_outputs,
)

FIGURES, SUMMARY_COLUMNS = figure_columns(), summary_columns()  # views of the audit's sections

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
        "arm", "model", "seed", "status", "status_reason", "heldout_pair_accuracy", "share_original", "share_generic",
        "transplant_random_margin_sd", "transplant_random_accuracy", "sibling_coefficient", "run_dir", "audit_dir")
    assert len(df) == 11 and df.loc[df["arm"] == "gap_only", "share_original"].isna().all()
    assert df.loc[df["arm"] == "gap_only", ["status", "status_reason"]].values.tolist() == [
        ["failed", "RuntimeError: boom"]]


def test_means_ranges_and_tests_by_hand():
    df = summary_frame(_rows())
    t = arm_table(df, ["regression", "bradley_terry", "gap_only"]).set_index("arm")
    # regression: 0.60, 0.61, ..., 0.64 -> mean 0.62, range [0.60, 0.64]
    assert t.loc["regression", "share_original_mean"] == pytest.approx(0.62)
    assert (t.loc["regression", "share_original_min"],
            t.loc["regression", "share_original_max"]) == pytest.approx((0.60, 0.64))
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


def test_diverged_and_collapsed_runs_keep_their_rows_and_leave_the_figures(tmp_path):
    """Seeds 4 and 5 of regression diverged and collapsed (their ledger figures, as a collapsed
    run's, are what training measured): their rows stay with status and reason, every figure blank,
    and the per-arm table and the exact test read seeds 1-3 only: 3 against 5 seeds, 56 splits."""
    rows = _rows()
    rows[3].update(status="diverged", status_reason="non-finite loss at step 2 (loss nan); training stopped, "
                                                    "no model saved")
    rows[4].update(status="collapsed", status_reason="held-out score SD 0 is at most 0.0001 x ...")
    df = summary_frame(rows)
    lost = df[df["seed"].isin([4, 5]) & (df["arm"] == "regression")]
    assert lost["status"].tolist() == ["diverged", "collapsed"] and lost[list(FIGURES)].isna().all().all()
    assert lost["status_reason"].tolist() == [rows[3]["status_reason"], rows[4]["status_reason"]]
    t = arm_table(df, ["regression", "bradley_terry"]).set_index("arm")
    assert t.loc["regression", "n_seeds"] == 3
    assert t.loc["regression", "share_original_mean"] == pytest.approx(0.61)  # 0.60, 0.61, 0.62
    r = arm_tests(df, ["regression", "bradley_terry"]).iloc[0]
    assert (r["n_a"], r["n_b"], r["n_splits"]) == (3, 5, 56) and r["p_a_greater"] == pytest.approx(1 / 56)
    text = write_outputs(tmp_path, rows, rows, ["regression", "bradley_terry", "gap_only"], title="T",
                         selected={})["report"].read_text()
    assert "10 of 11 runs finished (search runs included) (2 of them diverged or collapsed" in text
    assert "| regression | 3 | 0.610 [0.600, 0.620]" in text
    section = text.split("## Runs that diverged or collapsed")[1].split("## ")[0]
    assert f"| m/regression/seed4 | None | diverged | {rows[3]['status_reason']} |" in section
    assert "| m/regression/seed5 | None | collapsed |" in section


def test_an_arm_whose_every_search_run_diverged_is_blocked(tmp_path):
    """No setting is selected from diverged search runs: the arm's seed runs are blocked, saying
    why, and count as final runs lost to divergence (the command's exit code)."""
    import yaml

    from rmtrain.config import load_sweep
    from rmtrain.sweep import Ledger, expand
    from rmtrain.sweep.driver import NO_USABLE, _seed_stage_plan, _select, finish

    raw = {"arm": "regression", "model": "m", "data": {"name": "simulated"}, "wandb": {"mode": "disabled"},
           "sweep": {"arms": ["regression", "bradley_terry"], "seeds": [1, 2], "output_root": str(tmp_path / "out"),
                     "search": {"training.learning_rate": [1e-3, 1e300]}, "audit": {"enabled": False}}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(raw))
    sweep = load_sweep(tmp_path / "r.yaml")
    m = expand(sweep)
    ledger = Ledger(tmp_path / "out" / "ledger")
    for spec in m.runs:
        ledger.ensure(spec.to_dict())
    for spec in m.search:
        bad = spec.arm == "regression" or spec.setting["training.learning_rate"] > 1
        Path(spec.output_dir).mkdir(parents=True)
        ledger.update(spec.run_id, state="done", output_dir=spec.output_dir,
                      figures={"heldout_pair_accuracy": None if bad else 0.6,
                               "selection_pair_accuracy": None if bad else 0.6},
                      **({"status": "diverged", "status_reason": "non-finite weights at step 1"} if bad else {}))
    selected = _select(sweep, m, ledger, tmp_path / "out")
    assert list(selected) == ["m/bradley_terry"] and selected["m/bradley_terry"]["excluded"] == {
        "m/bradley_terry/search/learning_rate=1e+300": "diverged: non-finite weights at step 1"}
    todo = _seed_stage_plan(sweep, m, ledger, selected, False)
    assert todo == ["m/bradley_terry/seed2"]
    for seed in (1, 2):
        row = ledger.get(f"m/regression/seed{seed}")
        assert row["state"] == "blocked" and row["error"] == (
            f"{NO_USABLE}: m/regression/search/learning_rate=0.001 diverged; "
            "m/regression/search/learning_rate=1e+300 diverged")
    ledger.update("m/bradley_terry/seed2", state="done", figures={"heldout_pair_accuracy": 0.6})
    res = finish(sweep, m, ledger, tmp_path / "out", selected, echo=lambda s: None)
    assert res["unusable_final"] == ["m/regression/seed1", "m/regression/seed2"]
