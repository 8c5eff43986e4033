"""build_pairs and split_by_prompt on hand-built sets with known answers."""

from __future__ import annotations

import math

import pytest

from rmcore.data.pairs import Pair, build_pairs, split_by_prompt
from rmcore.data.schema import Preference, PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError


def _set(preferences=()) -> RatingSet:
    def p(pid, ratings):
        return PromptRecord(pid, [{"role": "user", "content": pid}],
                            [Response(f"{pid}:{i}", f"text {i}", {} if h is None else {"helpfulness": h,
                                                                                       "verbosity": 4 - i})
                             for i, h in enumerate(ratings)])
    return RatingSet([p("a", [3, 1, 3]),        # pairs (0>1, 2), (2>1, 2); tie 0=2
                      p("b", [2]),              # single response
                      p("c", [0, None, 4]),     # 2 pairs touch the unrated response; (2>0, 4)
                      p("d", [float("nan"), 1]),  # NaN counts as unrated
                      p("e", [2, 2])],          # only a tie
                     name="hand", attributes=("helpfulness", "verbosity"), preferences=list(preferences))


def test_rating_pairs_by_hand():
    ps = build_pairs(_set(), "helpfulness")
    assert ps.label_source == "rating"
    assert ps.pairs == [Pair("a", "a:0", "a:1", 2.0, "rating", 2.0), Pair("a", "a:2", "a:1", 2.0, "rating", 2.0),
                        Pair("c", "c:2", "c:0", 4.0, "rating", 4.0)]
    assert (ps.n_ties_dropped, ps.n_unrated_dropped, ps.n_single_response_prompts) == (2, 3, 1)
    assert ps.n_prompts_without_pairs == 3  # b, d, e
    assert ps.prompt_ids == ["a", "c"]
    # verbosity = 4 - index: no ties; only c:1 lacks it (d:0 has a NaN helpfulness, verbosity 4)
    pv = build_pairs(_set(), "verbosity")
    assert ("a", "a:0", "a:2", 2.0) in [(p.prompt_id, p.chosen_id, p.rejected_id, p.gap) for p in pv]
    assert len(pv) == 3 + 0 + 1 + 1 + 1 and pv.n_unrated_dropped == 2 and pv.n_ties_dropped == 0


def test_released_labels_take_precedence():
    prefs = [Preference("a", "a:1", "a:0", strength=2.0),  # against the ratings: gap -2
             Preference("c", "c:1", "c:2", strength=1.0),  # c:1 unrated -> gap None
             Preference("zz", "zz:0", "zz:1")]             # unknown prompt -> dropped
    ps = build_pairs(_set(prefs), "helpfulness")
    assert ps.label_source == "preference"
    assert [(p.chosen_id, p.gap, p.strength) for p in ps] == [("a:1", -2.0, 2.0), ("c:1", None, 1.0)]
    assert ps.n_dangling_dropped == 1 and ps.n_ties_dropped == 0
    assert len(build_pairs(_set(prefs), use_released=False)) == 3
    # a set with labels but without the attribute still yields pairs, with gap None
    no_ratings = RatingSet(_set().prompts, attributes=(), preferences=prefs[:1])
    assert [p.gap for p in build_pairs(no_ratings)] == [None]


def test_unknown_attribute_is_config_error():
    with pytest.raises(ConfigError, match="coherence"):
        build_pairs(_set(), "coherence")


def test_split_by_prompt():
    ids = [f"p{i:03d}" for i in range(100)]
    train, held = split_by_prompt(ids, 0.2, seed=1)
    assert len(held) == 20 and len(train) == 80
    assert set(train) | set(held) == set(ids) and not set(train) & set(held)
    assert train == sorted(train) and held == sorted(held)
    assert split_by_prompt(list(reversed(ids)) + ids[:10], 0.2, seed=1) == (train, held)  # order, dupes
    assert split_by_prompt(ids, 0.2, seed=2)[1] != held
    assert split_by_prompt(ids, 0.0, seed=1) == (ids, [])
    assert split_by_prompt(["x", "y"], 0.1, seed=0)[1] != []  # at least one held-out prompt
    with pytest.raises(ValueError):
        split_by_prompt(ids, 1.0, seed=0)


def test_split_never_splits_a_prompt():
    ps = build_pairs(_set(), "helpfulness")
    train, held = split_by_prompt(ps.prompt_ids, 0.5, seed=0)
    a, b = ps.subset(train), ps.subset(held)
    assert len(a) + len(b) == len(ps)
    assert not {p.prompt_id for p in a} & {p.prompt_id for p in b}
    assert not math.isnan(sum(p.gap for p in a.pairs + b.pairs))
