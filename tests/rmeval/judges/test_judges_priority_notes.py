"""analysis.md says why a prioritisation control is absent (too few fitted judges, or
--null-repeats 0) instead of leaving its section out silently."""

from __future__ import annotations

from rmeval.judges.analysis import analysis_markdown, analyze

from .test_judges_priority_controls import _panel


def _section(md: str, heading: str) -> str:
    return md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_one_fitted_judge_of_three_is_named_in_both_sections():
    judg = _panel(False, 0, n_items=120)
    first = judg["item_id"].min()
    # j1 and j2 read one item only: one verdict class, no priority fit
    judg = judg[(judg["judge"] == "j0") | ((judg["judge"].isin(["j1", "j2"])) & (judg["item_id"] == first))]
    judg = judg[judg["judge"] != "j3"]
    res = analyze(judg, n_splits=0, null_repeats=3)
    assert [bool(j["weights"]) for j in res["judges"].values()] == [True, False, False]
    assert "identical_preference_null" not in res and "component_swaps" not in res
    md = analysis_markdown(res)
    for heading in ("Identical-preference null", "Component swaps"):
        assert _section(md, heading).strip().startswith("Not computed: 1 of 3 judges have a priority fit")


def test_null_repeats_zero_is_named_and_the_swaps_still_run():
    res = analyze(_panel(False, 1, n_items=120), n_splits=0, null_repeats=0)
    md = analysis_markdown(res)
    assert _section(md, "Identical-preference null").strip() == "Not computed: --null-repeats 0."
    assert res["component_swaps"]["n_targets"] == 3 and "Not computed" not in _section(md, "Component swaps")


def test_controls_off_writes_no_priority_sections():
    res = analyze(_panel(False, 2, n_items=60), n_splits=0, controls=False)
    assert res["meta"]["controls"] is False
    assert "## Identical-preference null" not in analysis_markdown(res)
