from __future__ import annotations

import pytest

from rmtrain.data.simulated import TOPICS, simulate_rating_set, simulated_prompt_variants


def test_paraphrases_keep_topic_and_frame_related_keep_subject_only():
    rs = simulate_rating_set(n_prompts=20, seed=2)
    para = simulated_prompt_variants(rs, "paraphrase", n=3, seed=1)
    rel = simulated_prompt_variants(rs, "related", n=2, seed=1)
    assert len(para) == 60 and len(rel) == 40
    by_id = rs.by_id()
    tasks = {s: t for s, t, _, _ in TOPICS}
    for row in para:
        p = by_id[row["prompt_id"]]
        frame = p.last_user_text.split(":")[0]
        assert row["text"].startswith(frame + ":")  # difficulty frame kept
        assert tasks[p.meta["topic"]] in row["text"]  # same task
        assert row["text"] != p.last_user_text
    for row in rel:
        p = by_id[row["prompt_id"]]
        assert p.meta["topic"] in row["text"] and tasks[p.meta["topic"]] not in row["text"]
    assert {r["variant"] for r in para} == {0, 1, 2}


def test_variants_reject_foreign_prompts():
    rs = simulate_rating_set(n_prompts=4)
    rs.prompts[0].meta = {}
    with pytest.raises(ValueError, match="not from the simulated set"):
        simulated_prompt_variants(rs, "related")
