"""The sweep's figures are one view of the audit sections' declarations (rmeval.stats.audit_sections
.sweep_figures): the ledger's figures of a final and of an extra audit, summary.csv's columns and
their order, report.md's headings, pinned to what they were when two lists spelled them; and a
registered section's figure reaches them all."""

from __future__ import annotations

import json

from rmeval.stats.audit_sections import (
    AUDIT_SECTIONS,
    AuditSection,
    Figure,
    figure_values,
    register_section,
    sweep_figures,
)
from rmtrain.sweep.extra_audits import read_figures
from rmtrain.sweep.report import (
    figure_columns,
    figure_labels,
    labelled_figures,
    summary_columns,
    summary_frame,
)

AUDIT = {"share": {"original": {"estimate": 0.3}, "generic": {"estimate": 0.1}, "human": {"estimate": 0.25}},
         "transplant": {"random": {"margin_sd": {"estimate": 1.5, "ci95": [1.0, 2.0]}, "accuracy": {"estimate": 0.75}}},
         "sibling_regression": {"sibling": {"estimate": -0.2}}, "pairwise": {"accuracy": {"estimate": 0.6}}}


def test_the_figures_and_where_they_sit_in_an_audit():
    assert {n: f.path for n, f in sweep_figures("run", "reference").items()} == {
        "share_original": ("share", "original", "estimate"),
        "share_generic": ("share", "generic", "estimate"),
        "share_human": ("share", "human", "estimate"),
        "transplant_random_margin_sd": ("transplant", "random", "margin_sd", "estimate"),
        "transplant_random_accuracy": ("transplant", "random", "accuracy", "estimate"),
        "sibling_coefficient": ("sibling_regression", "sibling", "estimate"),
    }
    assert sweep_figures("accuracy")["pair_accuracy"].path == ("pairwise", "accuracy", "estimate")


def test_summary_columns_and_headings_keep_their_order():
    assert figure_columns() == ("heldout_pair_accuracy", "share_original", "share_generic",
                                "transplant_random_margin_sd", "transplant_random_accuracy", "sibling_coefficient")
    assert summary_columns() == ("arm", "model", "seed", "status", "status_reason", *figure_columns(), "run_dir",
                                 "audit_dir")
    assert labelled_figures() == ("pair_accuracy", "share_original", "share_generic", "transplant_random_margin_sd",
                                  "transplant_random_accuracy", "sibling_coefficient", "share_human")
    assert figure_labels() == {
        "heldout_pair_accuracy": "held-out pair accuracy", "share_original": "between-prompt share",
        "share_generic": "share (generic prompt)", "transplant_random_margin_sd": "random-wrong-prompt margin (SD)",
        "transplant_random_accuracy": "random-wrong-prompt match accuracy",
        "sibling_coefficient": "sibling coefficient",
        "pair_accuracy": "pair accuracy (audit prompts)", "share_human": "human share"}


def test_the_ledger_figures_of_a_final_and_of_an_extra_audit(tmp_path):
    # a run's final audit: its pair accuracy is training's held-out one (not read here)
    assert figure_values(AUDIT, "run", "reference") == {
        "share_original": 0.3, "share_generic": 0.1, "share_human": 0.25, "transplant_random_margin_sd": 1.5,
        "transplant_random_accuracy": 0.75, "sibling_coefficient": -0.2}
    (tmp_path / "audit.json").write_text(json.dumps({**AUDIT, "share": {"original": {"estimate": 0.3}}}))
    assert read_figures(tmp_path) == {
        "share_original": 0.3, "share_generic": None, "share_human": None, "transplant_random_margin_sd": 1.5,
        "transplant_random_accuracy": 0.75, "sibling_coefficient": -0.2, "pair_accuracy": 0.6}


def test_a_registered_sections_figure_reaches_the_ledger_and_summary_csv():
    register_section(AuditSection("example_spread", lambda inputs: None,
                                  figures={"example_sd": Figure(("sd",), "score SD")}))
    try:
        assert figure_values({"example_spread": {"sd": 2}})["example_sd"] == 2.0
        assert figure_columns()[-1] == "example_sd" and figure_labels()["example_sd"] == "score SD"
        assert labelled_figures()[-2:] == ("example_sd", "share_human")
        rows = [{"arm": "a", "model": "m", "seed": 1, "state": "done", "figures": {"example_sd": 2.0}}]
        df = summary_frame(rows, ["second"])
        assert df["example_sd"].tolist() == [2.0] and "second:example_sd" in df.columns
    finally:
        del AUDIT_SECTIONS["example_spread"]
