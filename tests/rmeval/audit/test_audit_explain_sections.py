"""The new audit sections end to end on tables (no model): a scores table built from the simulated
set's ratings under the real condition builders, the prompt table, and response/prompt features;
compute_audit writes transplant AUCs (checked against scikit-learn on the same rows), the fixed
reply, the prompt splits and variance_explained, and the report renders them. A preference set's
tables (no rated attribute) keep the model-side sections."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from rmcore.data.simulated import simulate_rating_set
from rmeval.audit.features import prompt_table
from rmeval.audit.report import write_report
from rmeval.conditions import CONDITIONS
from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.settings import StatsSettings


def _tables():
    rs = simulate_rating_set(n_prompts=40, responses_per_prompt=3, with_preferences=False, seed=4)
    ratings = rs.ratings_table()
    help_ = {(p.prompt_id, r.response_id): r.ratings["helpfulness"] for p in rs.prompts for r in p.responses}
    offset = {p.prompt_id: p.meta["prompt_offset"] for p in rs.prompts}
    rng = np.random.default_rng(0)
    rows = []
    for cond in ("original", "generic", "random", "prompt_only", "fixed_reply_random"):
        for it in CONDITIONS[cond](rs, seed=0):
            own = it.donor_prompt_id is None and cond != "generic"
            base = help_.get((it.prompt_id, it.response_id), 0.0)
            # a reward that reads the prompt: a match bonus on the own prompt, the donor's offset otherwise
            score = base + (0.8 if own else 0.0) + offset[it.donor_prompt_id or it.prompt_id] + rng.normal(0, 0.3)
            rows.append({"prompt_id": it.prompt_id, "response_id": it.response_id, "condition": cond,
                         "variant": it.variant, "donor_prompt_id": it.donor_prompt_id, "score": score})
    scores = pd.DataFrame(rows)
    feats = ratings[["prompt_id", "response_id"]].assign(
        txt_a=rng.normal(size=len(ratings)), txt_b=ratings["helpfulness"].to_numpy(float))
    pfeats = pd.DataFrame({"prompt_id": [p.prompt_id for p in rs.prompts],
                           "pemb_0_0": [p.meta["visible_offset"] for p in rs.prompts],
                           "pemb_0_1": rng.normal(size=len(rs.prompts))})
    return rs, scores, ratings, feats, pfeats


def test_new_sections_and_report(tmp_path):
    rs, scores, ratings, feats, pfeats = _tables()
    audit = compute_audit(scores, ratings, StatsSettings(n_boot=100, n_boot_regression=100,
                                                        probe_learners=["ridge", "kernel_ridge"]),
                          prompts=prompt_table(rs, n_topics=4), features=feats, prompt_features=pfeats)
    o = scores[scores.condition == "original"]
    w = scores[scores.condition == "random"]
    ref = roc_auc_score(np.r_[np.ones(len(o)), np.zeros(len(w))], np.r_[o.score, w.score])
    assert abs(audit["transplant"]["random"]["auc"]["estimate"] - ref) < 1e-12
    assert audit["transplant"]["random"]["auc"]["estimate"] > 0.6  # the planted match bonus
    fixed = audit["fixed_reply"]["random"]
    assert fixed["auc"]["estimate"] > 0.6 and abs(fixed["chance_accuracy"] - 0.2) < 1e-12
    assert {"length", "topic_1", "topic_2"} <= set(audit["prompt_splits"])
    ve = audit["variance_explained"]
    assert {"calibrated", "response_probes", "prompt_probe", "crossed"} <= set(ve)
    assert set(ve["response_probes"]) >= {"ridge", "kernel_ridge"} and "mlp" not in ve["response_probes"]
    assert ve["crossed"]["match"]["estimate"] > 0
    paths = write_report(audit, tmp_path)
    md = paths["markdown"].read_text() if "markdown" in paths else (tmp_path / "audit.md").read_text()
    for heading in ("## A fixed reply under donor prompts", "## Prompt splits",
                    "## What explains the prompt-level variance"):
        assert heading in md
    assert json.loads((tmp_path / "audit.json").read_text())["variance_explained"]["fold_grouping"] == "first turn"


def test_without_a_rated_attribute_the_model_side_remains():
    rs, scores, ratings, feats, pfeats = _tables()
    bare = ratings[["prompt_id", "response_id"]]
    audit = compute_audit(scores, bare, StatsSettings(n_boot=50, n_boot_regression=50, probe_learners=["ridge"]),
                          attribute=None, prompts=prompt_table(rs, n_topics=4), features=feats,
                          prompt_features=pfeats)
    assert "human" not in audit["share"] and "sibling_regression" not in audit
    assert "auc" in audit["transplant"]["random"] and "prompt_splits" in audit
    assert "calibrated" not in audit["variance_explained"] and "response_probes" in audit["variance_explained"]


def test_scoring_variant_differences_are_variant_minus_reference():
    rs, scores, ratings, _, _ = _tables()
    bump = {p.prompt_id: 3.0 * i for i, p in enumerate(rs.prompts)}  # a prompt-level offset: the share rises
    variant = scores.assign(score=scores["score"] + scores["prompt_id"].map(bump))
    sv = compute_audit(scores, ratings, StatsSettings(n_boot=50, n_boot_regression=50), compare={"offset": variant})
    share = sv["scoring_variants"]["offset"]["share_original"]
    assert share["difference"]["estimate"] > 0.1
    assert abs(share["difference"]["estimate"]
               - (share["variant"]["estimate"] - share["reference"]["estimate"])) < 1e-12
