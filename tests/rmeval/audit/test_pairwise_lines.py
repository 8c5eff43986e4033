"""The one-line summaries of ``rmeval pairwise`` and ``rmeval audit``: what each truncation count counts."""

from __future__ import annotations

from rmeval.audit.pairwise import pairwise_line
from rmeval.audit.pipeline import audit_line
from rmeval.scoring.run import truncation_note


def test_pairwise_line_says_the_counts_are_texts_of_how_many():
    # 80 RewardBench prompts, chosen + rejected each: 160 scored texts
    res = {"accuracy": {"estimate": 0.55}, "rewardbench": {"score": {"estimate": 0.518}},
           "truncation": {"n": 160, "n_resumed": 0, "prompt_truncated": 34, "response_truncated": 24}}
    line = pairwise_line("m", res, 80, "OUT")
    assert line == ("m: pairwise accuracy 0.550 on 80 pairs, RewardBench score 0.518 "
                    "(34 of 160 texts had their prompt cut; 24 responses cut) -> OUT")


def test_resumed_rows_count_like_new_ones():
    # the counts run over every row, those resumed from an earlier run's table with their kept flags
    total = {"n": 160, "n_resumed": 150, "prompt_truncated": 3, "response_truncated": 0}
    assert truncation_note(total) == "3 of 160 texts had their prompt cut; 0 responses cut"


def test_audit_line_uses_the_same_words():
    per = {"original": {"n": 90, "n_resumed": 0, "prompt_truncated": 2, "response_truncated": 5},
           "generic": {"n": 90, "n_resumed": 0, "prompt_truncated": 0, "response_truncated": 5}}
    total = {"n": 180, "n_resumed": 0, "prompt_truncated": 2, "response_truncated": 10}
    line = audit_line("m", {"truncation": {"total": total, "by_condition": per}}, "OUT")
    assert line == "m: 180 scores (2 of 180 texts had their prompt cut; 10 responses cut) -> OUT"
