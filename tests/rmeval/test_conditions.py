"""Prompt conditions: keys, donors and rewritten prompts checked against hand-worked expectations."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rmcore.data.loading import load_rating_set
from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError
from rmeval.conditions import (
    CONDITIONS,
    DEFAULT_GENERIC_REPLY,
    build_condition,
    content_words,
    donor_exclusions,
)


def u(text):
    return [{"role": "user", "content": text}]


def rating_set() -> RatingSet:
    texts = {
        "p0": "How do I bake sourdough bread at home",          # 8 words
        "p1": "Best way to bake bread with sourdough starter",  # shares bake/bread/sourdough with p0
        "p2": "Explain quantum entanglement simply",             # 4 words
        "p3": "What is the capital city of France and why",      # 9 words
        "p4": "Write a poem about the sea",                      # 6 words
        "p5": "Explain quantum entanglement simply",             # identical conversation to p2
    }
    prompts = []
    for pid, t in texts.items():
        msgs = u(t)
        if pid == "p4":
            msgs = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}] + u(t)
        prompts.append(PromptRecord(pid, msgs, [Response(f"{pid}:a", f"answer a to {pid}", {"helpfulness": 1.0}),
                                                Response(f"{pid}:b", f"answer b to {pid}", {"helpfulness": 2.0})]))
    return RatingSet(prompts, name="toy", attributes=("helpfulness",))


def test_registry_has_ten_conditions():
    """The study's ten prompt conditions, plus the fixed reply under random and related donors (the
    match statistics' scale-free controls)."""
    assert len(CONDITIONS) == 12
    assert {"fixed_reply_random", "fixed_reply_related"} < set(CONDITIONS)
    with pytest.raises(ValueError, match="unknown condition"):
        build_condition("nope", rating_set())


def test_original_generic_prompt_only():
    rs = rating_set()
    orig = build_condition("original", rs)
    assert len(orig) == 12 and all(i.messages == rs.by_id()[i.prompt_id].messages for i in orig)
    gen = build_condition("generic", rs)
    assert {tuple(map(tuple, (m.items() for m in i.messages))) for i in gen} == {
        ((("role", "user"), ("content", "Please respond.")),)}
    assert build_condition("generic", rs, instruction="Go.")[0].messages == u("Go.")
    po = build_condition("prompt_only", rs)
    assert len(po) == 6 and {i.response_id for i in po} == {"__generic_reply__"}
    assert all(i.response == DEFAULT_GENERIC_REPLY and i.variant == 0 and i.donor_prompt_id is None for i in po)


@pytest.mark.parametrize("name", ["random", "overlap", "length"])
def test_donors_never_own_prompt_nor_identical_conversation(name):
    rs = rating_set()
    items = build_condition(name, rs)
    for it in items:
        assert it.donor_prompt_id != it.prompt_id
        assert {it.prompt_id, it.donor_prompt_id} != {"p2", "p5"}
        assert it.messages == rs.by_id()[it.donor_prompt_id].messages  # the whole conversation moved
    per = {}
    for it in items:
        per.setdefault((it.prompt_id, it.response_id), []).append((it.variant, it.donor_prompt_id))
    for donors in per.values():
        assert [v for v, _ in donors] == [0, 1, 2, 3]
        assert len({d for _, d in donors}) == 4
        # both responses of a prompt see the same donors
    a = [d for v, d in sorted(per[("p0", "p0:a")])]
    b = [d for v, d in sorted(per[("p0", "p0:b")])]
    assert a == b


def test_random_is_seeded():
    rs = rating_set()
    keys = lambda s: [i.key for i in build_condition("random", rs, seed=s)]  # noqa: E731
    assert keys(1) == keys(1)
    assert keys(1) != keys(2) or keys(1) != keys(3)


def test_overlap_nearest_by_hand():
    rs = rating_set()
    # content words p0 {bake, sourdough, bread, home}, p1 {best, way, bake, bread, sourdough, starter}
    assert content_words("How do I bake sourdough bread at home") == {"bake", "sourdough", "bread", "home"}
    items = build_condition("overlap", rs, n_donors=1)
    donor = {i.prompt_id: i.donor_prompt_id for i in items}
    assert donor["p0"] == "p1" and donor["p1"] == "p0"  # Jaccard 3/7 beats 0


def test_length_nearest_by_hand():
    rs = rating_set()
    donor = {i.prompt_id: i.donor_prompt_id for i in build_condition("length", rs, n_donors=1)}
    # word counts of user turns: p0 8, p1 8, p2 4, p3 9, p4 2+6=8 (two user turns), p5 4 (identical to p2)
    # nearest length, ties broken by prompt order; p5 is not a donor for p2 (same conversation)
    assert donor == {"p0": "p1", "p1": "p0", "p2": "p0", "p3": "p0", "p4": "p0", "p5": "p0"}


def test_embedding_precomputed_and_real_encoder():
    rs = rating_set()
    emb = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0, 1], [0.1, 0.0, 1], [0, 1, 0]], float)
    donor = {i.prompt_id: i.donor_prompt_id for i in build_condition("embedding", rs, n_donors=1, embeddings=emb)}
    assert donor == {"p0": "p1", "p1": "p0", "p2": "p1", "p3": "p4", "p4": "p3", "p5": "p1"}
    real = {i.prompt_id: [] for i in rs.prompts}
    for i in build_condition("embedding", rs, n_donors=2):  # default: the local MiniLM encoder
        if i.response_id.endswith(":a"):
            real[i.prompt_id].append(i.donor_prompt_id)
    assert real["p0"][0] == "p1" and real["p1"][0] == "p0"


def test_rewritten_conditions_from_file(tmp_path):
    rs = rating_set()
    f = tmp_path / "para.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"prompt_id": "p4", "variant": 1, "text": "Compose verses on the ocean"},
        {"prompt_id": "p4", "variant": 0, "text": "Write sea poetry"},
        {"prompt_id": "p0", "variant": 0, "text": "How to make sourdough at home?"}]))
    items = build_condition("paraphrase", rs, paraphrase_file=f)
    assert len(items) == 6
    p4 = [i for i in items if i.prompt_id == "p4" and i.response_id == "p4:a"]
    assert [i.variant for i in p4] == [0, 1] and all(i.donor_prompt_id is None for i in p4)
    assert p4[0].messages[:2] == rs.by_id()["p4"].messages[:2]  # earlier turns kept
    assert p4[0].messages[-1] == {"role": "user", "content": "Write sea poetry"}
    assert p4[1].messages[-1]["content"] == "Compose verses on the ocean"
    rel = build_condition("related", rs, related_file=f)
    assert {i.condition for i in rel} == {"related"}
    with pytest.raises(ValueError, match="needs a related_file"):
        build_condition("related", rs)


def test_last_turn_only_multi_turn():
    rs = rating_set()
    items = build_condition("last_turn", rs)
    assert {i.prompt_id for i in items} == {"p4"} and len(items) == 2
    assert items[0].messages == u("Write a poem about the sea")


# -- wrong-prompt donors: near-duplicates excluded and counted -----------------------------------------------

def _prompt(pid: str, messages: list[dict]) -> PromptRecord:
    return PromptRecord(pid, messages, [Response(f"{pid}:r0", f"reply {pid}", {"helpfulness": 1.0}),
                                        Response(f"{pid}:r1", f"other {pid}", {"helpfulness": 2.0})])


def test_near_duplicate_first_turns_are_never_donors():
    u = lambda t: {"role": "user", "content": t}  # noqa: E731
    a = lambda t: {"role": "assistant", "content": t}  # noqa: E731
    rs = RatingSet(prompts=[
        _prompt("A", [u("How do I bake bread at home?")]),
        # HelpSteer2 style: the same first turn, then a follow-up: not a wrong prompt for A's responses
        _prompt("B", [u("how do I bake  bread at home"), a("Knead it."), u("And for how long?")]),
        _prompt("C", [u("What is the capital of France?")]),
        _prompt("D", [u("Tell me a joke about cats.")]),
        _prompt("E", [u("Bread recipes at home, how do I bake them?")]),
    ], attributes=("helpfulness",))
    assert donor_exclusions(rs.prompts) == {"n_pairs": 2, "n_prompts": 2}  # A->B and B->A
    for cond in ("random", "overlap", "length"):
        items = build_condition(cond, rs, n_donors=3, seed=0)
        donors = {(it.prompt_id, it.donor_prompt_id) for it in items}
        assert ("A", "B") not in donors and ("B", "A") not in donors, cond
        # A keeps exactly the three other prompts as donors
        assert {d for p, d in donors if p == "A"} == {"C", "D", "E"}, cond


# -- options checked, the registry the one source ------------------------------------------------------------

def test_condition_option_typo_is_an_error():
    rs = load_rating_set({"name": "simulated", "n_prompts": 6, "responses_per_prompt": 2, "seed": 0})
    with pytest.raises(ConfigError, match=r"n_donor.*n_donors"):
        build_condition("random", rs, n_donor=1)
    assert len(build_condition("random", rs, n_donors=1, seed=0)) == 12


def test_registered_condition_is_accepted_by_tables_and_cli(monkeypatch):
    import rmeval.conditions as C
    from rmcore.settings.fields import from_args
    from rmeval.cli import build_parser
    from rmeval.cli.audit import AuditCommand
    from rmeval.stats.audit_sections import compute_audit
    from rmeval.stats.settings import StatsSettings

    def shouting(rs, **_):
        return [C.ConditionItem(p.prompt_id, r.response_id, "shouting", 0, None,
                                [{"role": "user", "content": p.last_user_text.upper()}], r.text)
                for p in rs.prompts for r in p.responses]

    monkeypatch.setitem(C.CONDITIONS, "shouting", shouting)
    args = build_parser().parse_args(["audit", "--checkpoint", "x", "--data", "simulated", "--out", "o",
                                      "--conditions", "original", "shouting"])
    settings = from_args(AuditCommand, args).audit
    settings.validate()  # --conditions against the registry
    assert settings.conditions == ["original", "shouting"]
    ratings = pd.DataFrame({"prompt_id": list("aabbcc"), "response_id": list("123456"),
                            "helpfulness": [1.0, 2, 3, 4, 2, 5]})
    scores = pd.concat([ratings.assign(condition=c, score=np.arange(6.0) + i)[
        ["prompt_id", "response_id", "condition", "score"]] for i, c in enumerate(["original", "shouting"])])
    audit = compute_audit(scores, ratings, StatsSettings(n_boot=10, n_boot_regression=10))
    assert audit["meta"]["conditions"] == ["original", "shouting"]


def test_register_condition_adds_a_condition_every_reader_sees():
    """register_condition (not the dict): checked name, a second registration refused, the builder's
    keywords accepted as options, ``needs`` honoured by the CLI's default list; taken back after."""
    import rmeval.conditions as C
    from rmeval.audit.settings import resolve_conditions
    from rmeval.tables import condition_names

    def echo_twice(rs, *, echo_times: int = 2, **_):
        return [C.ConditionItem(p.prompt_id, r.response_id, "echo_twice", 0, None,
                                [{"role": "user", "content": " ".join([p.last_user_text] * echo_times)}], r.text)
                for p in rs.prompts for r in p.responses]

    with pytest.raises(ConfigError, match="lower_snake_case"):
        C.register_condition("Echo-Twice", echo_twice)
    try:
        C.register_condition("echo_twice", echo_twice, needs="related_file")
        with pytest.raises(ConfigError, match="condition 'echo_twice' is already registered"):
            C.register_condition("echo_twice", echo_twice)
        C.register_condition("echo_twice", echo_twice, needs="related_file", replace=True)
        assert list(CONDITIONS)[-1] == "echo_twice" and condition_names()[-1] == "echo_twice"
        assert "echo_times" in C.condition_options()
        items = build_condition("echo_twice", rating_set(), echo_times=3, n_donors=1)
        assert len(items) == 12
        assert items[0].messages[0]["content"] == " ".join(["How do I bake sourdough bread at home"] * 3)
        assert "echo_twice" not in resolve_conditions(None)
        assert "echo_twice" in resolve_conditions(None, related_file="related.jsonl")
        with pytest.raises(ConfigError, match=r"needs --related-file"):
            resolve_conditions(["echo_twice"])
        with pytest.raises(ConfigError, match=r"unknown condition 'echo_twcie'; known: original, .*, echo_twice "
                                              r"\(did you mean 'echo_twice'\?\)$"):
            C.check_condition_names(["echo_twcie"])
    finally:
        CONDITIONS.pop("echo_twice", None)
        C.NEEDS.pop("echo_twice", None)
    assert "echo_twice" not in CONDITIONS and len(CONDITIONS) == 12
