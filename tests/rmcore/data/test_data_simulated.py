"""The simulated rating set plants what its docstring says it plants. Features and markers are read
back from the TEXT with the test's own patterns, so the checks do not trust the simulator's meta."""

from __future__ import annotations

import re
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import chi2_contingency, spearmanr, ttest_ind

from rmcore.data.pairs import build_pairs
from rmcore.data.schema import DEFAULT_ATTRIBUTES
from rmcore.data.simulated import (
    TOPICS,
    PromptFeatures,
    SimulationSettings,
    answer_quality,
    icc1_by_prompt,
    prompt_features,
    response_features,
    simulate_rating_set,
)

# the test's own reading of a prompt's last turn and of a response
TASK_PATTERNS = [("troubleshoot", r"did not work|went badly|keeps going wrong"),
                 ("mistakes", r"mistakes|get wrong when|pitfalls"),
                 ("plan", r"plan to|schedule my first weeks"),
                 ("how_to", r"how do i|best way to|how to")]
CONSTRAINT_PATTERNS = {"list": r"numbered list", "brief": r"keep it brief|answer short", "example": r"example",
                       "summary": r"summary", "beginner": r"beginner|new to this"}
MARKER_PATTERNS = {"list": r"(^|\s)1\. ", "example": r"For example,", "summary": r"In short,",
                   "beginner": r"^New to this\?"}


def read_prompt(text: str) -> dict:
    low = text.lower()
    topic = next(t for t, (_, task, _, _) in enumerate(TOPICS) if task.lower() in low)
    task = next(name for name, pat in TASK_PATTERNS if re.search(pat, low))
    cons = frozenset(c for c, pat in CONSTRAINT_PATTERNS.items() if re.search(pat, low))
    sentences = re.split(r"(?<=[.?]) ", low)
    context = next(k for k, s in enumerate(sentences) if TOPICS[topic][1].lower() in s)  # before the question
    return {"topic": topic, "task": task, "constraints": cons, "context": context}


def read_markers(text: str) -> frozenset:
    return frozenset(c for c, pat in MARKER_PATTERNS.items() if re.search(pat, text))


@pytest.fixture(scope="module")
def rs():
    return simulate_rating_set()


def _pingouin_icc1(rs, attribute="helpfulness") -> float:
    pg = pytest.importorskip("pingouin")
    df = rs.ratings_table()
    df["rater"] = df["response_id"].str.rsplit(":", n=1).str[1]  # r0..r3 as the "raters"
    icc = pg.intraclass_corr(df, targets="prompt_id", raters="rater", ratings=attribute)
    row = icc[icc["Type"].isin(["ICC1", "ICC(1,1)"])]  # the name differs across pingouin versions
    assert len(row) == 1
    return float(row["ICC"].iloc[0])


def test_shape_and_ratings(rs):
    assert len(rs) == 600 and rs.n_responses == 2400
    assert rs.attributes == DEFAULT_ATTRIBUTES
    for p in rs.prompts:
        assert len(p.responses) == 4
        roles = [m["role"] for m in p.messages]
        assert roles[-1] == "user" and all(a != b for a, b in zip(roles, roles[1:]))
        for r in p.responses:
            assert set(r.ratings) == set(DEFAULT_ATTRIBUTES)
            assert all(v in (0.0, 1.0, 2.0, 3.0, 4.0) for v in r.ratings.values())
            assert 0 < len(r.text.split()) <= 80
    n_multi = sum(not p.single_turn for p in rs.prompts)
    assert abs(n_multi / 600 - 0.2) < 0.05
    tab = rs.ratings_table()
    for a in DEFAULT_ATTRIBUTES:  # every level used, so the attributes carry information
        assert tab[a].nunique() >= 4, a


def test_texts_unique(rs):
    """Every conversation, last user turn and response text occurs once: a split by prompt gives
    disjoint training and audit texts."""
    convs = [repr(p.messages) for p in rs.prompts]
    lasts = [p.last_user_text for p in rs.prompts]
    texts = [r.text for p in rs.prompts for r in p.responses]
    assert len(set(convs)) == len(convs) and len(set(lasts)) == len(lasts) and len(set(texts)) == len(texts)


@pytest.mark.parametrize("share", [0.0, 0.1, 0.3, 0.5])
def test_realised_icc_matches_knob(share):
    sim = simulate_rating_set(human_share=share, seed=3)
    icc = _pingouin_icc1(sim)
    assert abs(icc - share) <= 0.03
    assert icc1_by_prompt(sim) == pytest.approx(icc, abs=1e-9)  # hand formula == pingouin


def test_icc_knob_moves_the_data():
    lo, hi = (simulate_rating_set(human_share=s, n_prompts=300) for s in (0.1, 0.6))
    assert icc1_by_prompt(hi) - icc1_by_prompt(lo) > 0.4


def test_prompt_features_visible_and_independent(rs):
    """Topic, task type, stated constraints and length are read back from the prompt text, equal
    the drawn features, and are independent of each other (chi-square tests of every pair)."""
    read = [read_prompt(p.last_user_text) for p in rs.prompts]
    for p, r in zip(rs.prompts, read):
        f = prompt_features(p)
        assert (r["topic"], r["task"], r["constraints"]) == (f.topic, f.task, f.constraints), p.last_user_text
        assert r["context"] == p.meta["length"], p.last_user_text
    cols = {"topic": [r["topic"] for r in read], "task": [r["task"] for r in read],
            "n_constraints": [len(r["constraints"]) for r in read], "length": [r["context"] for r in read]}
    for c in ("task", "n_constraints", "length"):  # balanced draws
        counts = np.unique(cols[c], return_counts=True)[1]
        assert counts.max() - counts.min() <= 1, c
    for a, b in combinations(cols, 2):
        _, ua = np.unique(cols[a], return_inverse=True)
        _, ub = np.unique(cols[b], return_inverse=True)
        table = np.zeros((ua.max() + 1, ub.max() + 1))
        np.add.at(table, (ua, ub), 1)
        assert chi2_contingency(table)[1] > 0.001, (a, b)
    # every constraint is stated, and each about equally often (uniform subsets given the count)
    per = [sum(c in r["constraints"] for r in read) for c in CONSTRAINT_PATTERNS]
    assert min(per) > 0.7 * 600 / 5 and max(per) < 1.3 * 600 / 5


def test_prompt_level_signal_comes_from_several_features():
    """With every prompt effect visible (prompt_visibility=1), each of the four features explains
    part of the prompt means: the between-level spread of prompt means is non-zero for each."""
    sim = simulate_rating_set(prompt_visibility=1.0, human_share=0.5, seed=5)
    read = [read_prompt(p.last_user_text) for p in sim.prompts]
    offset = np.array([p.meta["prompt_offset"] for p in sim.prompts])
    for key, f in (("topic", lambda r: r["topic"]), ("task", lambda r: r["task"]),
                   ("n_constraints", lambda r: len(r["constraints"])), ("length", lambda r: r["context"])):
        levels = np.array([f(r) for r in read])
        means = [offset[levels == lv].mean() for lv in np.unique(levels)]
        assert np.ptp(means) > 0.05, key
    # and together they ARE the offset: a one-hot least-squares fit on the text-read features
    onehots = [np.eye(k)[np.unique([f(r) for r in read], return_inverse=True)[1]] for k, f in
               ((30, lambda r: r["topic"]), (4, lambda r: r["task"]), (3, lambda r: len(r["constraints"])),
                (3, lambda r: r["context"]))]
    x = np.column_stack(onehots)
    resid = offset - x @ np.linalg.lstsq(x, offset, rcond=None)[0]
    assert resid.std() < 1e-8


def test_match_effect_constraints(rs):
    """A response carries the markers its own prompt asks for more often than a random other
    prompt's; the rubric's drop under another prompt's constraints is 0.5 per honoured constraint lost
    (derived from the text), and rated helpfulness is higher when an asked constraint is honoured."""
    rng = np.random.default_rng(0)
    read = [read_prompt(p.last_user_text) for p in rs.prompts]
    own_met, donor_met, drops = [], [], []
    met_help, unmet_help = [], []
    for i, p in enumerate(rs.prompts):
        d = int(rng.integers(len(rs.prompts) - 1))
        d += d >= i
        own, donor = read[i]["constraints"] - {"brief"}, read[d]["constraints"] - {"brief"}
        f = prompt_features(p)
        for r in p.responses:
            m = read_markers(r.text)
            own_met.append(len(m & own))
            donor_met.append(len(m & donor))
            rf = response_features(r)
            assert m == rf.markers - {"brief"}, r.text
            swapped = PromptFeatures(f.topic, f.task, frozenset(read[d]["constraints"]))
            drop = answer_quality(f, rf) - answer_quality(swapped, rf)
            brief_term = 0.5 * (("brief" in rf.markers)
                                * (("brief" in f.constraints) - ("brief" in swapped.constraints)))
            on_topic = rf.topic == f.topic
            assert drop == pytest.approx(on_topic * (0.5 * (len(m & own) - len(m & donor)) + brief_term))
            drops.append(drop)
            for c in own:
                (met_help if c in m else unmet_help).append(r.ratings["helpfulness"] - np.mean(
                    [s.ratings["helpfulness"] for s in p.responses]))
    assert np.mean(own_met) > np.mean(donor_met) + 0.2
    assert np.mean(drops) > 0.1
    assert np.mean(met_help) > np.mean(unmet_help) and ttest_ind(met_help, unmet_help).pvalue < 1e-4


def test_match_effect_topic_and_task(rs):
    """Moving a response to a random other prompt lowers its rubric quality (mostly: another topic),
    and within prompts the rating follows the rubric."""
    rng = np.random.default_rng(1)
    own, wrong = [], []
    for i, p in enumerate(rs.prompts):
        d = int(rng.integers(len(rs.prompts) - 1))
        d += d >= i
        fd = prompt_features(rs.prompts[d])
        for r in p.responses:
            own.append(r.meta["answer_quality"])
            wrong.append(answer_quality(fd, response_features(r)))
            # an answer that names tips of another topic is off-topic and worth nothing
            tips = [t for t, (_, _, ts, _) in enumerate(TOPICS) if any(x in r.text for x in ts)]
            if tips:
                assert tips == [response_features(r).topic]
                if tips[0] != prompt_features(p).topic:
                    assert r.meta["answer_quality"] == 0.0
    assert np.mean(own) - np.mean(wrong) > 1.5
    h = np.array([[r.ratings["helpfulness"] for r in p.responses] for p in rs.prompts])
    a = np.array([[r.meta["answer_quality"] for r in p.responses] for p in rs.prompts])
    rho = spearmanr((h - h.mean(1, keepdims=True)).ravel(), (a - a.mean(1, keepdims=True)).ravel())[0]
    assert rho > 0.5


def test_label_agreement(rs):
    flags = [q.meta_dict()["agrees_with_ratings"] for q in rs.preferences]
    assert len(flags) > 2000
    by = rs.by_id()
    agree = []
    for q in rs.preferences:  # recompute from the ratings, not from the meta flag
        rat = {r.response_id: r.ratings["helpfulness"] for r in by[q.prompt_id].responses}
        assert rat[q.chosen_id] != rat[q.rejected_id]
        assert q.strength == abs(rat[q.chosen_id] - rat[q.rejected_id])
        agree.append(rat[q.chosen_id] > rat[q.rejected_id])
    assert agree == flags
    assert abs(np.mean(agree) - 0.9) < 0.03
    low = simulate_rating_set(label_agreement=0.6, n_prompts=300, seed=1)
    rate = np.mean([q.meta_dict()["agrees_with_ratings"] for q in low.preferences])
    assert abs(rate - 0.6) < 0.05
    # released labels take precedence in build_pairs; rating pairs equal the labelled pairs' count
    ps, pr = build_pairs(rs), build_pairs(rs, use_released=False)
    assert ps.label_source == "preference" and len(ps) == len(rs.preferences) == len(pr)
    assert np.mean([p.gap > 0 for p in ps]) == pytest.approx(np.mean(agree))


def test_seeded_and_knobs():
    a = simulate_rating_set(n_prompts=50, seed=7)
    b = simulate_rating_set(SimulationSettings(n_prompts=50, seed=7))
    c = simulate_rating_set(n_prompts=50, seed=8)
    assert a.ratings_table().equals(b.ratings_table())
    assert [r.text for p in a.prompts for r in p.responses] == [r.text for p in b.prompts for r in p.responses]
    assert not a.ratings_table().equals(c.ratings_table())
    d = simulate_rating_set(n_prompts=20, responses_per_prompt=2, multi_turn_fraction=1.0, with_preferences=False)
    assert all(len(p.responses) == 2 and p.turns == 2 for p in d.prompts) and d.preferences == []
    with pytest.raises(ValueError):
        simulate_rating_set(human_share=0.95)
    with pytest.raises(ValueError):
        simulate_rating_set(label_agreement=1.5)
    with pytest.raises(TypeError):
        simulate_rating_set(not_a_knob=1)


def test_quality_and_prompt_level_learnable(rs):
    """Bag-of-words models: one on the prompt text predicts the prompt's mean rating on held-out
    prompts (share 0.3, 60% of it visible); one on prompt x response word pairs predicts
    within-prompt helpfulness (the match needs the pair, not the response alone)."""
    pytest.importorskip("sklearn")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    prompts = [p.last_user_text for p in rs.prompts]
    means = np.array([np.mean([r.ratings["helpfulness"] for r in p.responses]) for p in rs.prompts])
    pv = TfidfVectorizer().fit(prompts[:400])
    pp = Ridge(alpha=1.0).fit(pv.transform(prompts[:400]), means[:400]).predict(pv.transform(prompts[400:]))
    assert spearmanr(pp, means[400:])[0] > 0.3

    texts, y_within, pid = [], [], []
    for i, p in enumerate(rs.prompts):
        h = np.array([r.ratings["helpfulness"] for r in p.responses])
        pr = read_prompt(p.last_user_text)
        for r, yc in zip(p.responses, h - h.mean()):
            rw = set(re.findall(r"[a-z]+", r.text.lower()))
            # response words crossed with the prompt's topic and task type (a linear model sees the
            # match only through such pairs)
            texts.append(" ".join(rw) + " " + " ".join(f"t{pr['topic']}_{w} {pr['task']}_{w}" for w in rw))
            y_within.append(yc)
            pid.append(i)
    pid, y_within = np.array(pid), np.array(y_within)
    train, test = pid < 400, pid >= 400
    vec = TfidfVectorizer(min_df=2, token_pattern=r"\S+").fit([t for t, m in zip(texts, train) if m])
    x = vec.transform(texts)
    pred = Ridge(alpha=3.0).fit(x[train], y_within[train]).predict(x[test]).reshape(-1, 4)
    pred = (pred - pred.mean(axis=1, keepdims=True)).ravel()
    assert spearmanr(pred, y_within[test])[0] > 0.3
