"""The audit's sections (rmeval.stats.audit_sections.AUDIT_SECTIONS): audit.json's keys in their order, the
random streams' indices pinned to those every earlier audit drew from, the checks a new section
passes, and what ``needs``, a None result and ``AuditInputs.rng`` mean."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmcore.errors import ConfigError
from rmeval.stats.audit_sections import (
    AUDIT_SECTIONS,
    AuditSection,
    Figure,
    compute_audit,
    register_section,
    streams,
)
from rmeval.stats.settings import StatsSettings
from rmeval.tables import TRANSPLANT_KINDS


@pytest.fixture
def restore_sections():
    before = dict(AUDIT_SECTIONS)
    yield
    for name in [n for n in AUDIT_SECTIONS if n not in before]:
        del AUDIT_SECTIONS[name]
    AUDIT_SECTIONS.update(before)


def _tables(k: int = 8, n: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    pid = np.repeat([f"p{i}" for i in range(k)], n)
    ratings = pd.DataFrame({"prompt_id": pid, "response_id": [f"r{j}" for j in range(k * n)],
                            "helpfulness": np.tile(np.arange(n, dtype=float), k)})
    scores = ratings[["prompt_id", "response_id"]].assign(condition="original", score=np.arange(k * n, dtype=float))
    return scores, ratings


def test_every_stream_keeps_the_index_earlier_audits_drew_from():
    """The table as it stood before the sections declared it (an append-only list): changing an
    index moves every interval drawn from it."""
    before = {name: i for i, name in enumerate(
        ["share.original", "share.single_turn", "share.generic", "share.ranks", "share.log_length",
         "share.human", "prompt_only", *[f"transplant.{k}" for k in TRANSPLANT_KINDS], "paraphrase",
         "last_turn", "sibling_regression", "selection", "pairwise",
         "share.last_turn", "sibling_regression.generic", "share.paraphrase",
         *[f"share.{k}" for k in TRANSPLANT_KINDS],
         "sibling_regression.random", "centering",
         "fixed_reply.random", "fixed_reply.related", "scoring_variants"])}
    assert {k: v for k, v in streams().items() if k in before} == before


def test_the_sections_are_audit_json_keys_in_order():
    assert AUDIT_SECTIONS.names() == [
        "share", "share_vs_human", "share_difference", "prompt_only", "fixed_reply", "transplant", "paraphrase",
        "last_turn", "sibling_regression", "sibling_regression_by_condition", "prompt_means", "selection",
        "centering", "prompt_splits", "variance_explained", "scoring_variants", "pairwise"]


def _noop(inputs):
    return None


@pytest.mark.usefixtures("restore_sections")
@pytest.mark.parametrize("section,message", [
    (AuditSection("example_a", _noop, streams={"example_a": 0}),
     "audit section 'example_a': stream index 0 of 'example_a' is taken by 'share.original' (section 'share'); "
     "an index never changes, the next free one is 30"),
    (AuditSection("example_a", _noop, streams={"centering": 40}),
     "audit section 'example_a': stream 'centering' is already declared by section 'centering'"),
    (AuditSection("example_a", _noop, streams={"x": 40, "y": 40}), "audit section 'example_a': two of its streams "
                                                                   "share an index"),
    (AuditSection("example_a", _noop, streams={"x": -1}), "audit section 'example_a': stream 'x' needs an index "
                                                          ">= 0, got -1"),
    (AuditSection("example_a", _noop, needs=("ratings",)), "audit section 'example_a': unknown need 'ratings'; "
                                                           "known: original, attribute"),
    (AuditSection("example_a", _noop, figures={"f": Figure(("estimate",), "f", "main")}),
     "audit section 'example_a': figure 'f' has unknown role 'main'; known: accuracy, run, reference"),
    (AuditSection("example_a", _noop, figures={"share_human": Figure(("estimate",), "f")}),
     "audit section 'example_a': figure 'share_human' is already declared by section 'share'"),
    (AuditSection("share", _noop), "audit section 'share' is already registered (pass replace=True to replace it)"),
])
def test_a_section_that_cannot_join_is_refused_in_one_line(section, message):
    with pytest.raises(ConfigError) as e:
        register_section(section)
    assert str(e.value) == message
    assert AUDIT_SECTIONS.names()[-1] == "pairwise"


@pytest.mark.usefixtures("restore_sections")
def test_a_replaced_section_keeps_its_own_streams():
    old = AUDIT_SECTIONS["centering"]
    register_section(AuditSection("centering", _noop, needs=old.needs, streams=dict(old.streams)), replace=True)
    assert streams()["centering"] == 26 and AUDIT_SECTIONS.names()[12] == "centering"


@pytest.mark.usefixtures("restore_sections")
def test_needs_none_and_rng():
    """A section without what it needs is not computed, a None result is absent, and the stream
    of index i is numpy's default_rng([seed, i])."""
    def draw(inputs):
        return {"draws": inputs.rng("example_draw").integers(0, 1000, size=3).tolist()}

    register_section(AuditSection("example_draw", draw, needs=("original",), streams={"example_draw": 31}))
    register_section(AuditSection("example_rated", lambda inputs: {"n": 1}, needs=("attribute",)))
    register_section(AuditSection("example_none", _noop))
    scores, ratings = _tables()
    audit = compute_audit(scores, ratings, StatsSettings(n_boot=20, seed=5))
    assert audit["example_draw"]["draws"] == np.random.default_rng([5, 31]).integers(0, 1000, size=3).tolist()
    assert audit["example_rated"] == {"n": 1} and "example_none" not in audit
    assert list(audit)[-3:] == ["example_draw", "example_rated", "meta"]  # after the built-ins, before meta
    no_rating = compute_audit(scores, ratings.drop(columns="helpfulness"), StatsSettings(n_boot=20), attribute=None)
    assert "example_rated" not in no_rating and "example_draw" in no_rating
    only_generic = compute_audit(scores.assign(condition="generic"), ratings, StatsSettings(n_boot=20))
    assert "example_draw" not in only_generic and "example_rated" in only_generic


def test_an_undeclared_stream_is_an_error():
    scores, ratings = _tables()

    def undeclared(inputs):
        return inputs.rng("example_nowhere")

    section = AuditSection("example_undeclared", undeclared)
    AUDIT_SECTIONS.register(section.name, section)
    try:
        with pytest.raises(ConfigError, match="random stream 'example_nowhere' is declared by no audit section"):
            compute_audit(scores, ratings, StatsSettings(n_boot=20))
    finally:
        del AUDIT_SECTIONS["example_undeclared"]
