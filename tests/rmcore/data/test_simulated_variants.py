from __future__ import annotations

import pytest

from rmcore.data.simulated import TOPICS, prompt_features, simulate_rating_set, simulated_prompt_variants

# the test's own reading of a constraint in a paraphrase (the paraphrase wordings)
PARA_CONSTRAINT = {"list": "numbered points", "brief": "concise", "example": "example", "summary": "summary",
                   "beginner": "novice"}


def test_paraphrases_keep_topic_task_constraints_related_keep_subject_only():
    rs = simulate_rating_set(n_prompts=40, seed=2)
    para = simulated_prompt_variants(rs, "paraphrase", n=3, seed=1)
    rel = simulated_prompt_variants(rs, "related", n=2, seed=1)
    assert len(para) == 120 and len(rel) == 80
    by_id = rs.by_id()
    tasks = {s: t for s, t, _, _ in TOPICS}
    originals = {p.last_user_text for p in rs.prompts}
    for row in para:
        p = by_id[row["prompt_id"]]
        f = prompt_features(p)
        assert tasks[p.meta["topic"]] in row["text"]  # same task named
        stated = {c for c, w in PARA_CONSTRAINT.items() if w in row["text"].lower()}
        assert stated == set(f.constraints), row["text"]  # same constraints, reworded
        assert row["text"] not in originals  # a paraphrase never equals a prompt of the set
    for row in rel:
        p = by_id[row["prompt_id"]]
        assert p.meta["topic"] in row["text"] and tasks[p.meta["topic"]] not in row["text"]
        assert row["text"] not in originals
    assert {r["variant"] for r in para} == {0, 1, 2}
    # paraphrases of one prompt differ from each other
    for pid in by_id:
        texts = [r["text"] for r in para if r["prompt_id"] == pid]
        assert len(set(texts)) == len(texts)


def test_variants_reject_foreign_prompts():
    rs = simulate_rating_set(n_prompts=4)
    rs.prompts[0].meta = {}
    with pytest.raises(ValueError, match="not from the simulated set"):
        simulated_prompt_variants(rs, "related")
