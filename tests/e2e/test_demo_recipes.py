"""The demo recipes: the sweep the issue asks for (six arms, two seeds, the same learning-rate grid
for every arm, audits), both human-share regimes, and an audit set whose prompts AND responses are
disjoint from every text a run trains or selects on (exact text sets)."""

from __future__ import annotations

import pytest

from rmcore.data.loading import load_rating_set
from rmcore.data.simulated import icc1_by_prompt
from rmtrain.config import load_sweep
from rmtrain.prepare import prepare_data
from rmtrain.runs import audit_rating_set
from tests.support import ROOT

DEMOS = {"demo.yaml": 0.3, "demo_helpsteer2_like.yaml": 0.0}
ARMS = {"regression", "bradley_terry", "bt_margin", "gap_only", "shuffled_mean", "binarized"}


def _texts(rs, prompt_ids) -> tuple[set[str], set[str]]:
    """(prompt texts: every turn of every conversation, whole conversations; response texts)."""
    by = rs.by_id()
    prompts, responses = set(), set()
    for pid in prompt_ids:
        p = by[pid]
        prompts |= {m["content"] for m in p.messages} | {repr(p.messages)}
        responses |= {r.text for r in p.responses}
    return prompts, responses


@pytest.mark.parametrize("name", DEMOS)
def test_demo_sweep_shape(name):
    sw = load_sweep(ROOT / "recipes" / name)
    s = sw.settings
    assert set(s.arms) == ARMS and len(s.seeds) == 2
    rates = s.search["training.learning_rate"]
    assert len(rates) >= 2 and set(s.search) == {"training.learning_rate"}  # one grid, shared by every arm
    assert s.audit.enabled and {"original", "generic", "random"} <= set(s.audit.base.conditions)
    cfg = sw.run_config(sw.models[0], "regression", s.seeds[0])
    assert cfg.selection_fraction > 0  # the search selects on its own prompts, not the reported ones
    assert cfg.data["name"] == "simulated" and cfg.data["human_share"] == DEMOS[name]


@pytest.mark.parametrize("name", DEMOS)
def test_demo_audit_texts_disjoint_from_training(name):
    sw = load_sweep(ROOT / "recipes" / name)
    cfg = sw.run_config(sw.models[0], "bradley_terry", sw.settings.seeds[0])
    data = prepare_data(cfg)
    audit_rs, counts = audit_rating_set(cfg, sw.settings.audit)
    assert len(audit_rs) == counts["n_audit_prompts"] == sw.settings.audit.max_prompts
    # every text a run sees: training prompts (all their responses, paired or not) and selection prompts
    seen_prompts, seen_responses = _texts(data.rating_set, [*data.train_prompt_ids, *data.selection_prompt_ids])
    audit_prompts, audit_responses = _texts(audit_rs, [p.prompt_id for p in audit_rs.prompts])
    assert seen_prompts and seen_responses and audit_prompts and audit_responses
    # the earlier turns of multi-turn prompts ("I want to get better at X.") are shared context; the
    # requests themselves (last user turns) and whole conversations must not be
    requests = {p.last_user_text for p in audit_rs.prompts} | {repr(p.messages) for p in audit_rs.prompts}
    assert not requests & seen_prompts
    assert not audit_responses & seen_responses
    # the audit's human share is the regime's (60 prompts: a rough check, wide tolerance)
    assert abs(icc1_by_prompt(audit_rs) - DEMOS[name]) < 0.25


def test_a_separately_drawn_audit_set_would_share_texts():
    """The check has teeth: a second simulated set (another seed, the old demo's audit) repeats
    training responses verbatim, which is why the demo audits the held-out split instead."""
    sw = load_sweep(ROOT / "recipes" / "demo.yaml")
    cfg = sw.run_config(sw.models[0], "bradley_terry", 1)
    data = prepare_data(cfg)
    _, seen_responses = _texts(data.rating_set, data.train_prompt_ids)
    other = load_rating_set({**cfg.data, "seed": 1, "n_prompts": 60})
    _, other_responses = _texts(other, [p.prompt_id for p in other.prompts])
    assert other_responses & seen_responses
