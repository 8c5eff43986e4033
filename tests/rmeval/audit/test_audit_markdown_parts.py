"""audit.md from its registered parts (rmeval.audit.report.MARKDOWN): every audit section has one,
each part is rendered only when one of its sections is there, a new part comes after the
built-ins; and W&B's scalars are every number of every section."""

from __future__ import annotations

from rmeval.audit.report import MARKDOWN, register_markdown, render_markdown, wandb_scalars
from rmeval.stats.audit_sections import AUDIT_SECTIONS

PIPELINE_PARTS = {"judge_diagnostics"}  # written by the pipeline beside the statistics (a judge's digits)


def test_every_section_is_shown_by_exactly_one_part():
    shown = [s for part in MARKDOWN.values() for s in part.sections]
    assert sorted(shown) == sorted({*AUDIT_SECTIONS, *PIPELINE_PARTS})


def test_a_part_renders_when_its_section_is_there_after_the_built_ins():
    register_markdown("example_part", lambda audit: ["## Example", "", str(audit["example_part"]["n"]), ""])
    try:
        audit = {"meta": {"n_prompts": 2}, "prompt_only": {"estimate": 0.5, "ci95": [0.1, 0.9], "n_prompts": 2},
                 "example_part": {"n": 7}}
        text = render_markdown(audit)
        assert text.index("## Prompt-only score") < text.index("## Example\n\n7\n")
        assert "## Example" not in render_markdown({"meta": {}})
    finally:
        del MARKDOWN["example_part"]


def test_wandb_scalars_are_the_numbers_of_every_section():
    audit = {"share": {"original": {"estimate": 0.25, "ci95": [0.1, 0.4], "n_prompts": 3, "ok": True}},
             "meta": {"attribute": "helpfulness"}, "example": {"value": 2}}
    assert wandb_scalars(audit) == {"audit/share/original/estimate": 0.25, "audit/share/original/ci95/lo": 0.1,
                                    "audit/share/original/ci95/hi": 0.4, "audit/share/original/n_prompts": 3,
                                    "audit/example/value": 2}
