"""Model-side prompt splits (longer vs shorter, balanced topic halves): every figure by hand on the
same halves, the halves cut on the scored prompts only (not the whole prompts table), the topic
clusters against scikit-learn's own TF-IDF k-means, and a planted length effect recovered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfVectorizer

from rmcore.data.loading import load_data
from rmeval.audit.features import prompt_table, topic_clusters
from rmeval.stats.bootstrap import PromptSetResamples
from rmeval.stats.splits import balanced_halves, prompt_splits
from tests.support import hand_icc


def _data(k=60, n=3, seed=0, effect=-0.5):
    rng = np.random.default_rng(seed)
    words = rng.integers(5, 300, size=k)
    single = rng.random(k) < 0.7
    topic = rng.integers(0, 8, size=k)
    prompts = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(k)], "prompt_words": words, "turns": 1 + ~single,
                            "single_turn": single, "topic": topic})
    rows, wrong = [], []
    for i in range(k):
        u = rng.normal() + effect * (words[i] > np.median(words))
        for j in range(n):
            s = u + rng.normal()
            rows.append((f"p{i}", f"p{i}r{j}", s, float(rng.integers(0, 5))))
            for v in range(2):
                wrong.append((f"p{i}", f"p{i}r{j}", v, s - 1 + rng.normal()))
    orig = pd.DataFrame(rows, columns=["prompt_id", "response_id", "score", "helpfulness"])
    return orig, prompts, pd.DataFrame(wrong, columns=["prompt_id", "response_id", "variant", "score"])


def test_length_split_by_hand():
    orig, prompts, wrong = _data()
    res = prompt_splits({"original": orig}, prompts, "helpfulness", PromptSetResamples(0, 200), wrong=wrong)
    cell = res["length"]["all"]
    long_ids = set(prompts.loc[prompts["prompt_words"] > prompts["prompt_words"].median(), "prompt_id"])
    a = orig["prompt_id"].isin(long_ids).to_numpy()
    s, h = orig["score"].to_numpy(), orig["helpfulness"].to_numpy()
    diff = (s[a].mean() - s[~a].mean()) / s.std(ddof=1)
    hdiff = (h[a].mean() - h[~a].mean()) / h.std(ddof=1)
    assert cell["score_difference"]["estimate"] == pytest.approx(diff, abs=1e-12)
    assert cell["score_difference_points"]["estimate"] == pytest.approx(s[a].mean() - s[~a].mean(), abs=1e-12)
    assert cell["human_difference"]["estimate"] == pytest.approx(hdiff, abs=1e-12)
    assert cell["model_minus_human"]["estimate"] == pytest.approx(diff - hdiff, abs=1e-12)
    g = orig["prompt_id"].to_numpy()
    assert cell["share_a"]["estimate"] == pytest.approx(hand_icc(s[a], g[a]), abs=1e-10)
    assert cell["share_b"]["estimate"] == pytest.approx(hand_icc(s[~a], g[~a]), abs=1e-10)
    m = wrong.groupby(["prompt_id", "response_id"])["score"].mean()
    own = orig.set_index(["prompt_id", "response_id"])["score"]
    d = (own - m.reindex(own.index)).to_numpy()
    ma, mb = d[a].mean() / s.std(ddof=1), d[~a].mean() / s.std(ddof=1)
    assert cell["margin_a"]["estimate"] == pytest.approx(ma, abs=1e-12)
    assert cell["margin_difference"]["estimate"] == pytest.approx(ma - mb, abs=1e-12)
    assert cell["n_prompts_a"] == len(long_ids)


def test_single_turn_split_uses_the_subsets_median():
    orig, prompts, wrong = _data(seed=1)
    res = prompt_splits({"original": orig}, prompts, "helpfulness", PromptSetResamples(0, 100), wrong=wrong)
    st = prompts[prompts["single_turn"]]
    long_ids = set(st.loc[st["prompt_words"] > st["prompt_words"].median(), "prompt_id"])
    sub = orig[orig["prompt_id"].isin(set(st["prompt_id"]))]
    a = sub["prompt_id"].isin(long_ids).to_numpy()
    s = sub["score"].to_numpy()
    assert res["length"]["single_turn"]["score_difference"]["estimate"] == pytest.approx(
        (s[a].mean() - s[~a].mean()) / s.std(ddof=1), abs=1e-12)


def test_splits_are_cut_on_the_scored_prompts():
    """300 scored prompts with distinct word counts (median cut: 150 / 150), 100 longer prompts in
    the table without scores, and 5 prompts with a single scored response (no within-prompt
    information, left out): the cut is the scored prompts' median; the generic condition, scored on
    200 prompts only, is cut at its own prompts' median (100 / 100)."""
    orig, prompts, wrong = _data(k=300, n=2, seed=6)
    rng = np.random.default_rng(7)
    prompts["prompt_words"] = rng.permutation(300) + 1
    one = [f"p{i}" for i in range(5)]
    lone = orig[orig["prompt_id"].isin(one)].groupby("prompt_id").head(1)
    orig = pd.concat([orig[~orig["prompt_id"].isin(one)], lone], ignore_index=True)
    unscored = pd.DataFrame({"prompt_id": [f"x{i}" for i in range(100)], "prompt_words": 1000 + np.arange(100),
                             "turns": 1, "single_turn": True, "topic": rng.integers(0, 8, size=100)})
    table = pd.concat([prompts, unscored], ignore_index=True)
    gen_ids = [f"p{i}" for i in range(200)]
    gen = orig[orig["prompt_id"].isin(gen_ids)].assign(score=lambda d: d["score"] * 0.5)
    res = prompt_splits({"original": orig, "generic": gen}, table, "helpfulness", PromptSetResamples(0, 100),
                        wrong=wrong)
    scored = prompts[~prompts["prompt_id"].isin(one)]  # 295 analysed prompts
    long_ids = set(scored.loc[scored["prompt_words"] > scored["prompt_words"].median(), "prompt_id"])
    cell = res["length"]["all"]
    assert (cell["n_prompts_a"], cell["n_prompts_b"]) == (147, 148)
    kept = orig[~orig["prompt_id"].isin(one)]
    a = kept["prompt_id"].isin(long_ids).to_numpy()
    s = kept["score"].to_numpy()
    assert cell["score_difference"]["estimate"] == pytest.approx((s[a].mean() - s[~a].mean()) / s.std(ddof=1),
                                                                 abs=1e-12)
    g_scored = scored[scored["prompt_id"].isin(gen_ids)]
    g_long = set(g_scored.loc[g_scored["prompt_words"] > g_scored["prompt_words"].median(), "prompt_id"])
    g_kept = gen[gen["prompt_id"].isin(g_scored["prompt_id"])]
    ga = g_kept["prompt_id"].isin(g_long).to_numpy()
    gs = g_kept["score"].to_numpy()
    gcell = res["length"]["generic"]
    assert (gcell["n_prompts_a"], gcell["n_prompts_b"]) == (len(g_long), len(g_scored) - len(g_long))
    assert abs(gcell["n_prompts_a"] - gcell["n_prompts_b"]) <= 1
    assert gcell["score_difference"]["estimate"] == pytest.approx(
        (gs[ga].mean() - gs[~ga].mean()) / gs.std(ddof=1), abs=1e-12)
    # the topic halves balance the analysed prompts: whole clusters, counts within one cluster's size
    topic = res["topic_1"]["all"]
    sizes = scored["topic"].value_counts()
    assert topic["n_prompts_a"] + topic["n_prompts_b"] == 295
    assert abs(topic["n_prompts_a"] - topic["n_prompts_b"]) <= sizes.max()
    # and the unscored prompts change nothing: the same section from the table without them
    alone = prompt_splits({"original": orig, "generic": gen}, prompts, "helpfulness", PromptSetResamples(0, 100),
                          wrong=wrong)
    for split in ("length", "topic_1", "topic_2"):
        assert res[split] == alone[split], split


def test_planted_length_effect_is_recovered():
    """Scores of responses to longer prompts are 0.8 lower in raw units; total SD is about 1.5."""
    orig, prompts, wrong = _data(k=400, seed=2, effect=-0.8)
    res = prompt_splits({"original": orig}, prompts, "helpfulness", PromptSetResamples(0, 500), wrong=wrong)
    pts = res["length"]["all"]["score_difference_points"]
    assert pts["ci95"][0] < -0.8 < pts["ci95"][1]
    assert res["length"]["all"]["human_difference"]["ci95"][0] < 0 < res["length"]["all"]["human_difference"]["ci95"][1]
    assert res["length"]["all"]["model_minus_human"]["ci95"][1] < 0


def test_balanced_halves_keep_clusters_whole_and_balance_them():
    rng = np.random.default_rng(4)
    clusters = rng.integers(0, 20, size=500)
    sizes = np.bincount(clusters)
    for split in (1, 2):
        a = balanced_halves(clusters, seed=0, split=split)
        for c in np.unique(clusters):  # a topic is never cut in two
            assert len(set(a[clusters == c])) == 1
        assert abs(a.sum() - (~a).sum()) <= sizes.max()
    assert (balanced_halves(clusters, 0, 1) != balanced_halves(clusters, 0, 2)).any()  # two different splits


def test_topic_clusters_are_sklearns_tfidf_kmeans():
    rs = load_data("simulated:n_prompts=80,seed=3", None, 0)
    texts = [next(m["content"] for m in p.messages if m["role"] == "user") for p in rs.prompts]
    x = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(texts)
    ref = KMeans(n_clusters=20, n_init=10, random_state=0).fit_predict(x)
    got = topic_clusters(texts, 20, seed=0)
    assert (got == ref).all()
    table = prompt_table(rs)
    assert (table["topic"].to_numpy() == ref).all()
    assert table["prompt_words"].tolist() == [sum(len(m["content"].split()) for m in p.messages) for p in rs.prompts]


def test_topic_split_and_generic_cells():
    orig, prompts, wrong = _data(seed=5)
    gen = orig.assign(score=orig["score"] * 0.5)
    res = prompt_splits({"original": orig, "generic": gen}, prompts, None, PromptSetResamples(0, 100), wrong=wrong)
    assert {"topic_1", "topic_2", "length"} <= set(res)
    cell = res["topic_1"]["all"]
    a_prompts = set(prompts.loc[balanced_halves(prompts["topic"].to_numpy(), 0, 1), "prompt_id"])
    a = orig["prompt_id"].isin(a_prompts).to_numpy()
    s = orig["score"].to_numpy()
    assert cell["score_difference"]["estimate"] == pytest.approx((s[a].mean() - s[~a].mean()) / s.std(ddof=1))
    assert "human_difference" not in cell  # no rated attribute
    # the generic prompt's scores are half the original ones: the same difference in SDs, no margin
    g = res["length"]["generic"]
    assert g["score_difference"]["estimate"] == pytest.approx(res["length"]["all"]["score_difference"]["estimate"])
    assert "margin_a" not in g
