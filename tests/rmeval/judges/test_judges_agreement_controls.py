"""JudgeProfile's perception controls against an independent reading of the judgments table
(tests/rmeval/judges/judges_reference.py: plain Python loops over the long table, scikit-learn's kappa, scipy's
correlations) on a simulated panel with position bias, unresolved reads, missing reads and ties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import cohen_kappa_score

from rmeval.judges.agreement_controls import no_conflict
from rmeval.judges.analysis import analyze, build_panel
from rmeval.judges.inventory import CORE_ATTRIBUTES, OVERALL, default_inventory
from rmeval.judges.simulate import simulate_panel

from .judges_reference import Reads, mean

# four core attributes and four others, with their shipped families
ATTRS = ["breadth", "depth", "specificity", "relevance", "verbosity", "empathy", "harmfulness", "formatting"]


@pytest.fixture(scope="module")
def panel_data():
    rng = np.random.default_rng(3)
    w = {f"judge{j}": rng.normal(0, 1.5, len(ATTRS)) for j in range(3)}
    items, judg, _ = simulate_panel(150, w, attributes=ATTRS, detect=0.8, flip=0.08, position=0.15,
                                    sources=("hh", "chat"), target=rng.normal(0, 1.5, len(ATTRS)), seed=4)
    judg = judg.sample(frac=0.97, random_state=1).reset_index(drop=True)  # some reads missing
    unparsed = (judg["attribute"] == OVERALL) & (judg["order"] == "AB") & (rng.random(len(judg)) < 0.08)
    judg.loc[unparsed, "direction"] = 0
    items.loc[items.index[:9], "label"] = "tie"
    # thresholds inside the readers' usable counts (about 35-45 per source, 70-85 pooled): some readers stay out
    res = analyze(judg, items, n_splits=2, null_repeats=0, min_shared=3, min_n_source=38, min_n_pooled=78)
    return judg, items, res, Reads(judg)


def test_three_category_kappa_is_sklearns_on_every_cell_both_read(panel_data):
    judg, _, res, ref = panel_data
    for protocol in ("stable", "single_read"):
        ov, at = [], []
        for j, k in ref.pairs():
            for store, attrs in ((ov, [OVERALL]), (at, ref.attributes)):
                xs, ys = [], []
                for i in ref.items:
                    for a in attrs:
                        dj, dk = ref.get(protocol, j, i, a), ref.get(protocol, k, i, a)
                        if dj is not None and dk is not None:
                            xs.append(dj)
                            ys.append(dk)
                store.append(cohen_kappa_score(xs, ys))
        got = res["three_category_kappa"][protocol]
        assert got["overall"] == pytest.approx(np.mean(ov), abs=1e-12)
        assert got["attribute"] == pytest.approx(np.mean(at), abs=1e-12)
        assert got["n_pairs"] == 3


def _stratum_rates(ref: Reads, protocol: str, j: str, k: str, stratum: str) -> tuple[float | None, float | None]:
    """(agreement, coverage) of a pair in a winner stratum, from the reads."""
    agree = joint = cells = 0
    for i in ref.items:
        v = ref.verdicts(protocol, j, k, i)
        if stratum != "attribute" and (v is None or (v[0] == v[1]) != (stratum == "same_winner")):
            continue
        for a in ref.attributes:
            dj, dk = ref.get(protocol, j, i, a), ref.get(protocol, k, i, a)
            if dj is None or dk is None:
                continue
            cells += 1
            if dj and dk:
                joint += 1
                agree += dj == dk
    return (agree / joint if joint else None), (joint / cells if cells else None)


def test_single_read_control_strata_and_pair_spread(panel_data):
    _, _, res, ref = panel_data
    for protocol in ("stable", "single_read"):
        got = res["single_read_control"][protocol]
        for stratum in ("attribute", "same_winner", "opposite_winner"):
            rates = [_stratum_rates(ref, protocol, j, k, stratum) for j, k in ref.pairs()]
            ag = [r[0] for r in rates if r[0] is not None]
            assert got[stratum]["mean"] == pytest.approx(np.mean(ag), abs=1e-12)
            assert got[stratum]["coverage"] == pytest.approx(np.mean([r[1] for r in rates if r[1] is not None]))
            assert (got[stratum]["min"], got[stratum]["max"]) == pytest.approx((min(ag), max(ag)))
            assert got[stratum]["n_above_half"] == sum(a > 0.5 for a in ag)
        ov = []
        for j, k in ref.pairs():
            vs = [ref.verdicts(protocol, j, k, i) for i in ref.items]
            vs = [v for v in vs if v]
            ov.append(np.mean([a == b for a, b in vs]))
        assert got["overall"]["mean"] == pytest.approx(np.mean(ov))
    # the single read resolves more cells than the stable protocol (no order-consistency filter)
    sr = res["single_read_control"]
    assert sr["single_read"]["attribute"]["coverage"] > sr["stable"]["attribute"]["coverage"]


def test_matched_items_by_hand(panel_data):
    _, _, res, ref = panel_data
    core = [a for a in ref.attributes if a in CORE_ATTRIBUTES]
    assert res["matched_items"]["core_attributes"] == core
    for protocol in ("stable", "single_read"):
        rows = []
        for j, k in ref.pairs():
            items = [i for i in ref.items if ref.verdicts(protocol, j, k, i) and ref.joint(protocol, j, k, i)]
            verdict = np.mean([ref.verdicts(protocol, j, k, i)[0] == ref.verdicts(protocol, j, k, i)[1] for i in items])
            cells = [c for i in items for c in ref.joint(protocol, j, k, i)]
            per_item = [np.mean([a == b for a, b in ref.joint(protocol, j, k, i)]) for i in items]
            core_cells = [c for i in items for c in ref.joint(protocol, j, k, i, core)]
            attr = np.mean([a == b for a, b in cells])
            rows.append({"overall": verdict, "attribute": attr, "item_mean": np.mean(per_item),
                         "core": np.mean([a == b for a, b in core_cells]), "gap": attr - verdict,
                         "judges": (j, k)})
        got = res["matched_items"][protocol]
        for key, ref_key in (("overall", "overall"), ("attribute", "attribute"), ("attribute_item_mean", "item_mean"),
                             ("core", "core"), ("gap", "gap")):
            assert got[key] == pytest.approx(np.mean([r[ref_key] for r in rows]), abs=1e-12), key
        assert got["n_pairs_positive_gap"] == sum(r["gap"] > 0 for r in rows)
        for judge in ref.judges:
            mine = [r["gap"] for r in rows if judge in r["judges"]]
            assert got["judges"][judge]["gap"] == pytest.approx(np.mean(mine))


def test_no_conflict_subset_by_hand(panel_data):
    _, _, res, ref = panel_data
    for t, r in res["no_conflict"]["thresholds"].items():
        cases = differ = definite = 0
        for j, k in ref.pairs():
            for i in ref.items:
                v = ref.verdicts("stable", j, k, i)
                if not v:
                    continue
                definite += 1
                cells = ref.joint("stable", j, k, i)
                if len(cells) >= int(t) and all(a == b for a, b in cells):
                    cases += 1
                    differ += v[0] != v[1]
        assert (r["n_cases"], r["n_different_winner"]) == (cases, differ)
        assert r["coverage"] == pytest.approx(cases / definite)
    assert res["no_conflict"]["min_shared"] == 3 and res["no_conflict"]["n_cases"] == \
        res["no_conflict"]["thresholds"]["3"]["n_cases"]


def test_no_conflict_planted_example():
    """Two judges, four items, three attributes: item 1 no conflict and opposite winners, item 2 no
    conflict and the same winner, item 3 a conflict, item 4 only two shared attributes."""
    rows = []

    def put(item, judge, attribute, d):
        rows.extend({"item_id": item, "judge": judge, "attribute": attribute, "order": o, "direction": d}
                    for o in ("AB", "BA"))

    for item, (va, vb), da, db in (("i1", (1, -1), [1, 1, -1], [1, 1, -1]), ("i2", (1, 1), [1, -1, 1], [1, -1, 1]),
                                   ("i3", (1, -1), [1, 1, 1], [1, 1, -1]), ("i4", (1, -1), [1, 1, 0], [1, 1, 1])):
        put(item, "a", OVERALL, va)
        put(item, "b", OVERALL, vb)
        for n, (x, y) in enumerate(zip(da, db)):
            put(item, "a", f"x{n}", x)
            put(item, "b", f"x{n}", y)
    r = no_conflict(build_panel(pd.DataFrame(rows)), 3)
    assert (r["n_cases"], r["n_different_winner"], r["different_winner_rate"], r["coverage"]) == (2, 1, 0.5, 0.5)
    assert r["thresholds"]["1"]["n_cases"] == 3 and r["thresholds"]["1"]["n_different_winner"] == 2


def test_importance_quartiles_families_and_correlation(panel_data):
    _, _, res, ref = panel_data
    imp = res["attribute_importance"]
    # importance from the reported own-perception weights (themselves checked against scikit-learn)
    w = np.array([[res["judges"][j]["weights"][a] for a in ref.attributes] for j in ref.judges])
    norm = w / np.abs(w).mean(axis=1, keepdims=True)
    importance = np.abs(norm).mean(axis=0)
    opp = []
    for a in ref.attributes:
        per_pair = []
        for j, k in ref.pairs():
            agree = n = 0
            for i in ref.items:
                v = ref.verdicts("stable", j, k, i)
                if v and v[0] != v[1]:
                    for dj, dk in ref.joint("stable", j, k, i, [a]):
                        n += 1
                        agree += dj == dk
            if n:
                per_pair.append(agree / n)
        opp.append(mean(per_pair))
    for n, a in enumerate(ref.attributes):
        assert imp["attributes"][a]["importance"] == pytest.approx(importance[n])
        assert imp["attributes"][a]["opposite_winner"] == pytest.approx(opp[n])
    # 8 attributes: quartiles of two, by ascending importance
    order = [ref.attributes[i] for i in np.argsort(importance)]
    for q in range(4):
        assert sorted(imp["quartiles"][f"Q{q + 1}"]["attributes"]) == sorted(order[2 * q: 2 * q + 2])
        assert imp["quartiles"][f"Q{q + 1}"]["opposite_winner"] == pytest.approx(
            np.mean([opp[ref.attributes.index(a)] for a in order[2 * q: 2 * q + 2]]))
    c = imp["importance_vs_opposite_agreement"]
    assert c["pearson"] == pytest.approx(pearsonr(importance, opp)[0])
    assert c["spearman"] == pytest.approx(spearmanr(importance, opp)[0])
    family = {a.name: a.family for a in default_inventory()}
    fams = {family[a] for a in ATTRS}
    assert set(imp["families"]) == fams
    for f in fams:
        members = [n for n, a in enumerate(ref.attributes) if family[a] == f]
        assert imp["families"][f]["importance"] == pytest.approx(np.mean(importance[members]))


def test_difficulty_strata_by_hand(panel_data):
    _, items, res, ref = panel_data
    label = {r.item_id: (1 if r.label == "A" else -1 if r.label == "B" else 0) for r in items.itertuples()}
    got = res["difficulty_strata"]
    assert got["n_labelled_items"] == 141 and got["n_ties_or_unlabelled"] == 9
    for stratum in ("both_match", "both_depart", "judges_disagree"):
        n_items = agree = joint = 0
        pair_rates = []
        for j, k in ref.pairs():
            pa = pj = 0
            for i in ref.items:
                v, y = ref.verdicts("stable", j, k, i), label[i]
                if not v or not y:
                    continue
                s = "judges_disagree" if v[0] != v[1] else "both_match" if v[0] == y else "both_depart"
                if s != stratum:
                    continue
                n_items += 1
                cells = ref.joint("stable", j, k, i)
                pj += len(cells)
                pa += sum(a == b for a, b in cells)
            agree, joint = agree + pa, joint + pj
            if pj:
                pair_rates.append(pa / pj)
        assert got[stratum]["n_items"] == n_items
        assert got[stratum]["agreement_pooled"] == pytest.approx(agree / joint)
        assert got[stratum]["agreement_mean_over_pairs"] == pytest.approx(np.mean(pair_rates))


def test_label_associations_by_hand(panel_data):
    _, items, res, ref = panel_data
    label = {r.item_id: (1 if r.label == "A" else -1 if r.label == "B" else 0) for r in items.itertuples()}
    source = dict(zip(items["item_id"], items["source"]))
    la = res["label_associations"]
    left_out = 0
    for scope, min_n in (("pooled", 78), ("hh", 38), ("chat", 38)):
        got = la["pooled"] if scope == "pooled" else la["sources"][scope]
        for a in ref.attributes:
            accs, covs = [], []
            for j in ref.judges:
                hits = n = read = 0
                for i in ref.items:
                    if not label[i] or (scope != "pooled" and source[i] != scope):
                        continue
                    d = ref.get("stable", j, i, a)
                    if d is None:
                        continue
                    read += 1
                    if d:
                        n += 1
                        hits += d == label[i]
                covs.append(n / read)
                if n > min_n:
                    accs.append(hits / n)
            if not accs:  # no reader enters: no figure, never a guess
                assert (got[a]["median_accuracy"], got[a]["strength"], got[a]["sign"]) == (None, None, None)
            else:
                med = float(np.median(accs))
                assert got[a]["median_accuracy"] == pytest.approx(med)
                assert got[a]["strength"] == pytest.approx(float(np.median(np.abs(np.array(accs) - 0.5))))
                assert got[a]["sign"] == ("+" if med >= 0.5 else "-")
            assert got[a]["coverage"] == pytest.approx(np.mean(covs)) and got[a]["n_readers"] == len(accs)
            left_out += 3 - len(accs)
        strengths = [r["strength"] for r in got.values() if r["strength"] is not None]
        assert strengths == sorted(strengths, reverse=True)
    assert left_out > 0  # the thresholds were exercised


def test_planted_label_association_sign_and_strength():
    """An attribute the labels follow exactly (accuracy 1, strength 0.5, +) and one they oppose."""
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for i in range(60):
        y = int(rng.choice([-1, 1]))
        labels.append({"item_id": f"i{i}", "source": "s", "query": "q", "response_a": "a", "response_b": "b",
                       "label": "A" if y == 1 else "B"})
        for judge in ("j1", "j2"):
            for attribute, d in (("follows", y), ("opposes", -y), (OVERALL, y)):
                rows += [{"item_id": f"i{i}", "judge": judge, "attribute": attribute, "order": o, "direction": d}
                         for o in ("AB", "BA")]
    res = analyze(pd.DataFrame(rows), pd.DataFrame(labels), n_splits=0, null_repeats=0, min_n_pooled=10)
    la = res["label_associations"]["pooled"]
    assert list(la)[0] in ("follows", "opposes")
    assert (la["follows"]["median_accuracy"], la["follows"]["strength"], la["follows"]["sign"]) == (1.0, 0.5, "+")
    assert (la["opposes"]["median_accuracy"], la["opposes"]["strength"], la["opposes"]["sign"]) == (0.0, 0.5, "-")
    assert la["follows"]["coverage"] == 1.0 and la["follows"]["n_comparisons"] == 120  # 60 items x 2 readers
