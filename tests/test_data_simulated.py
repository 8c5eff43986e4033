"""The simulated rating set plants what its docstring says it plants."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from rmtrain.data.pairs import build_pairs
from rmtrain.data.schema import DEFAULT_ATTRIBUTES
from rmtrain.data.simulated import SimulationConfig, icc1_by_prompt, simulate_rating_set


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
            assert 0 < len(r.text.split()) <= 60
    n_multi = sum(not p.single_turn for p in rs.prompts)
    assert abs(n_multi / 600 - 0.2) < 0.05
    tab = rs.ratings_table()
    for a in DEFAULT_ATTRIBUTES:  # every level used, so the attributes carry information
        assert tab[a].nunique() >= 4, a


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_realised_icc_matches_knob(share):
    sim = simulate_rating_set(human_share=share, seed=3)
    icc = _pingouin_icc1(sim)
    assert abs(icc - share) <= 0.05
    assert icc1_by_prompt(sim) == pytest.approx(icc, abs=1e-9)  # hand formula == pingouin


def test_icc_knob_moves_the_data():
    lo, hi = simulate_rating_set(human_share=0.1, n_prompts=300), simulate_rating_set(human_share=0.6,
                                                                                       n_prompts=300)
    assert icc1_by_prompt(hi) - icc1_by_prompt(lo) > 0.4


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
    b = simulate_rating_set(SimulationConfig(n_prompts=50, seed=7))
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


def test_quality_visible_in_text(rs):
    """A bag-of-words model on the response text alone predicts within-prompt helpfulness on held-out
    prompts, and one on the prompt text predicts the prompt's mean rating: both effects are learnable."""
    sk = pytest.importorskip("sklearn")  # noqa: F841
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    texts, y_within, pid = [], [], []
    for i, p in enumerate(rs.prompts):
        h = np.array([r.ratings["helpfulness"] for r in p.responses])
        for r, yc in zip(p.responses, h - h.mean()):
            texts.append(p.last_user_text + " || " + r.text)
            y_within.append(yc)
            pid.append(i)
    pid, y_within = np.array(pid), np.array(y_within)
    train, test = pid < 400, pid >= 400
    vec = TfidfVectorizer(min_df=2).fit([t for t, m in zip(texts, train) if m])
    x = vec.transform(texts)
    pred = Ridge(alpha=3.0).fit(x[train], y_within[train]).predict(x[test]).reshape(-1, 4)
    pred = (pred - pred.mean(axis=1, keepdims=True)).ravel()  # compare within prompts
    # ceiling ~0.72 (rater noise is invisible); a bag of words gets ~0.63
    assert spearmanr(pred, y_within[test])[0] > 0.5

    prompts = [p.last_user_text for p in rs.prompts]
    means = np.array([np.mean([r.ratings["helpfulness"] for r in p.responses]) for p in rs.prompts])
    pv = TfidfVectorizer().fit(prompts[:400])
    pp = Ridge(alpha=1.0).fit(pv.transform(prompts[:400]), means[:400]).predict(pv.transform(prompts[400:]))
    assert spearmanr(pp, means[400:])[0] > 0.3
    # the planted quality level tracks the rating within prompts
    lvl = [r.meta["quality_level"] for p in rs.prompts for r in p.responses]
    hel = [r.ratings["helpfulness"] for p in rs.prompts for r in p.responses]
    assert spearmanr(lvl, hel)[0] > 0.5
