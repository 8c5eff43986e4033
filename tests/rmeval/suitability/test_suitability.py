"""Suitability: rewriters and the suite, confidence per scorer kind, the pairs table's errors, and
the two commands end to end on real RM-Bench data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from rmcore.data.preference_sets import load_rm_bench
from rmcore.data.schema import Preference, PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError, DataError
from rmeval.cli import main
from rmeval.perturbations.rewriters import (
    CachedRewriter,
    FileRewriter,
    LMRewriter,
    Rewriter,
    RewriteRequest,
)
from rmeval.perturbations.stylized import structured_presentation, synonym_table, synonym_transform
from rmeval.perturbations.suite import Pair, build_perturbation, build_suite, parse_spec, preference_items
from rmeval.scoring.judge import GenerativeJudgeScorer
from rmeval.scoring.pairwise_judge import PairwiseJudgeScorer
from rmeval.scoring.seq_classifier import SeqClassifierScorer
from rmeval.suitability import (
    SuitabilitySettings,
    confidence_scorer,
    confidences,
    finalize,
    infer,
    validate_pairs,
)
from tests.support import save_tiny_classifier, save_tiny_lm

RMB_CHAT = Path("rm-bench") / "chat_filtered.json"  # under ../shared/data


def small_set(n: int = 6) -> RatingSet:
    prompts, prefs = [], []
    for i in range(n):
        pid = f"p{i}"
        prompts.append(PromptRecord(pid,
                                    [{"role": "user", "content": f"How do I bake bread, step {i}? Keep it short."}],
                                    [Response(f"{pid}:a",
                                              f"Mix flour and water. It is very important to use good yeast {i}."),
                                     Response(f"{pid}:b", f"Just buy bread {i}.")]))
        prefs.append(Preference(pid, f"{pid}:a", f"{pid}:b"))
    return RatingSet(prompts, name="small", preferences=prefs)


# -- rewriters and the suite ------------------------------------------------------------------------

def test_rule_st_and_sp():
    table = synonym_table()
    assert table["important"] and "_about" not in table
    text = "It is very important. Run `use this` or see https://use.example.com/use quickly."
    out = synonym_transform(text, np.random.default_rng(0), rate=1.0)
    assert "`use this`" in out and "https://use.example.com/use" in out
    assert "important" not in out and "quickly" not in out and out.split()[2] in [w.lower() for w in table["very"]]
    assert synonym_transform(text, np.random.default_rng(1)) == synonym_transform(text, np.random.default_rng(1))
    sp = structured_presentation("Bread needs flour. Add water. Bake it.")
    assert sp == "## Answer\n\n**Bread needs flour.**\n\n### Details\n\n- Add water.\n- Bake it.\n"


class _Flaky(Rewriter):
    """A backend that fails on texts containing '3' and answers empty on '4'."""
    kind = "flaky"

    def __init__(self):
        self.calls = 0

    @property
    def fingerprint(self):
        return "flaky-v1"

    def rewrite(self, code, requests):
        self.calls += len(requests)
        return [None if "3" in r.text else ("" if "4" in r.text else r.text.upper()) for r in requests]


def test_suite_counts_failures_and_cache_never_asks_twice(tmp_path):
    rs = small_set()
    items, skipped = preference_items(rs)
    assert [it.item_id for it in items] == [p.prompt_id for p in rs.prompts] and not skipped
    inner = _Flaky()
    rw = CachedRewriter(inner, tmp_path / "rw.sqlite")
    ps = build_perturbation("LE@lm", items, rewriters={"lm": rw})
    assert ps.counts() == {"n_items": 6, "n_changed": 4, "n_unchanged": 0, "n_failed": 2}
    assert inner.calls == 12
    assert all(t.item_id == it.item_id for t, it in zip(ps.twins, items))
    build_perturbation("LE@lm", items, rewriters={"lm": rw})
    assert inner.calls == 12 + 2  # only the raised (not cached) rewrite is asked again; empty is cached
    rw2 = CachedRewriter(_Flaky(), tmp_path / "rw.sqlite")  # a new process: the cache on disk
    build_perturbation("LE@lm", items, rewriters={"lm": rw2})
    assert rw2.inner.calls == 2


def test_controlled_suite_changes_last_user_turn_only():
    rs = small_set(3)
    rs.prompts[0].messages = [{"role": "user", "content": "first, turn."}, {"role": "assistant", "content": "ok."},
                              {"role": "user", "content": "second, turn."}]
    items, _ = preference_items(rs)
    suite = build_suite(["IU", "ST", "SP"], items)
    t = suite[0].twins[0]
    assert t.perturbed.messages[:2] == t.original.messages[:2]
    assert t.perturbed.messages[2][1].startswith("second, turn. @")
    assert t.perturbed.chosen == t.original.chosen
    sp = suite[2].twins[0].perturbed
    assert sp.chosen.startswith("## Answer") and sp.rejected.startswith("## Answer")
    with pytest.raises(ConfigError, match="unknown perturbation 'XX'"):
        build_suite(["XX"], items)
    with pytest.raises(ConfigError, match="needs a lm rewriter"):
        build_suite(["LC"], items)
    assert parse_spec("SP") == ("SP", "rule") and parse_spec("LE") == ("LE", "lm")
    with pytest.raises(ConfigError, match="RM-Bench"):
        build_perturbation("SP@rmbench", items, rating_set=rs)


def test_file_rewriter(tmp_path):
    f = tmp_path / "rw.jsonl"
    f.write_text('{"item_id": "p0", "perturbation": "LC", "side": "chosen", "text": "你好"}\n'
                 '{"item_id": "p0", "perturbation": "LC@file", "side": "rejected", "text": "再见"}\n')
    rw = FileRewriter(f)
    out = rw.rewrite("LC", [RewriteRequest("p0", "chosen", "x"), RewriteRequest("p0", "rejected", "y"),
                            RewriteRequest("p1", "chosen", "z")])
    assert out == ["你好", "再见", None]
    f.write_text('{"item_id": "p0", "perturbation": "LC", "side": "left", "text": "x"}\n')
    with pytest.raises(DataError, match=r"rw.jsonl, row 1, field 'side'"):
        FileRewriter(f)
    f.write_text('{"item_id": "p0", "perturbation": "QQ", "side": "chosen", "text": "x"}\n')
    with pytest.raises(DataError, match=r"row 1, field 'perturbation'"):
        FileRewriter(f)


def test_lm_rewriter_over_hf_generator(tmp_path):
    from rmeval.backends.generators import HFGenerator

    save_tiny_lm(tmp_path / "lm")
    gen = HFGenerator(tmp_path / "lm", max_new_tokens=4, do_sample=False)
    rw = CachedRewriter(LMRewriter(gen, max_new_tokens=4), tmp_path / "c.sqlite")
    reqs = [RewriteRequest("a", "chosen", "Paris is the capital of France."), RewriteRequest("a", "rejected", "No.")]
    first = rw.rewrite("LC", reqs)
    assert len(first) == 2 and rw.asked == 2
    assert rw.rewrite("LC", reqs) == first and rw.asked == 2
    assert "Chinese" in rw.inner.instruction("LC", "x") and "{language}" not in rw.inner.instruction("SLC", "x")


def test_rmbench_levels_are_a_perturbation_source(shared_data):
    rs = load_rm_bench(shared_data / RMB_CHAT, limit=5)
    raw = json.loads((shared_data / RMB_CHAT).read_text())[:5]
    items, _ = preference_items(rs)
    assert [it.pair.chosen for it in items] == [r["chosen"][0] for r in raw]
    le, sp = build_suite(["LE@rmbench", "SP@rmbench"], items, rating_set=rs)
    for t, r in zip(le.twins, raw):
        assert (t.original.chosen, t.original.rejected, t.perturbed.chosen, t.perturbed.rejected) == \
            (r["chosen"][0], r["rejected"][0], r["chosen"][1], r["rejected"][1])
        assert t.item_id == str(r["id"])
    for t, r in zip(sp.twins, raw):
        assert (t.original.chosen, t.perturbed.rejected) == (r["chosen"][1], r["rejected"][2])


# -- confidence --------------------------------------------------------------------------------------

def save_verdict_lm(path):
    """A tiny causal LM whose word-level vocabulary has the verdict letters and rating digits."""
    from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer
    from rmeval.scoring.judge import JUDGE_TEMPLATE
    from rmeval.scoring.pairwise_judge import PAIRWISE_TEMPLATE

    corpus = [PAIRWISE_TEMPLATE, JUDGE_TEMPLATE, "A B 1 2 3 4 5 User Paris capital France cats joke"]
    tok = train_tokenizer(corpus, word_level=True, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    save_tiny(path, tiny_model(tok, "llama", num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256),
              tok)


def test_confidence_seq_classifier_and_judge_by_hand(tmp_path):
    save_tiny_classifier(tmp_path / "clf")
    clf = SeqClassifierScorer(tmp_path / "clf", max_length=64)
    pairs = [Pair.of([{"role": "user", "content": "What is the capital of France?"}], "Paris is the capital.",
                     "Cats sleep all day."),
             Pair.of([{"role": "user", "content": "Tell me a joke about cats."}], "Cats judge you.", "Paris.")]
    cs, own = confidence_scorer(clf)
    m = confidences(cs, pairs)
    r = clf.score([(p.message_list(), p.chosen) for p in pairs] + [(p.message_list(), p.rejected) for p in pairs])
    assert not own and np.allclose(m, expit(r[:2] - r[2:]))
    save_verdict_lm(tmp_path / "judge")
    judge = GenerativeJudgeScorer(tmp_path / "judge", max_length=96)
    cs, _ = confidence_scorer(judge)
    assert isinstance(cs, PairwiseJudgeScorer)
    m = confidences(cs, pairs)
    p_ab = expit(cs.score([(p.message_list(), (p.chosen, p.rejected)) for p in pairs]))  # score: log-odds of A
    p_ba = expit(cs.score([(p.message_list(), (p.rejected, p.chosen)) for p in pairs]))
    assert np.allclose(m, 0.5 * (p_ab + 1 - p_ba)) and np.all((m > 0) & (m < 1))
    # p_A by hand: softmax of the verdict tokens' logits after the prompt
    ids, _, _ = cs.encode(pairs[0].message_list(), pairs[0].chosen, pairs[0].rejected)
    logits = judge.next_token_logits([ids])[0]
    la, lb = (float(np.logaddexp.reduce(logits[v].numpy())) for v in cs.verdict_ids)
    assert p_ab[0] == pytest.approx(1 / (1 + np.exp(lb - la)), rel=1e-5)


# -- the pairs table ---------------------------------------------------------------------------------

def _pairs_frame(rng, n=30, shift=None):
    shift = shift or {"EF": 0.0, "ST": 0.08}
    rows = []
    for code, s in shift.items():
        mo = rng.beta(5, 2, n)
        mp = np.clip(mo - s + rng.normal(0, 0.05, n), 0, 1)
        rows += [{"item_id": f"i{k}", "perturbation": code, "m_original": a, "m_perturbed": b}
                 for k, (a, b) in enumerate(zip(mo, mp))]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("mutate,match", [
    (lambda df: df.assign(perturbation=df["perturbation"].where(df.index != 3, "ZZ")),
     r"pairs.csv, row 5, field 'perturbation': unknown perturbation code 'ZZ'"),
    (lambda df: df.assign(m_original=df["m_original"].where(df.index != 0, 1.2)),
     r"row 2, field 'm_original': confidence must be in \[0, 1\]"),
    (lambda df: df.assign(m_original=df["m_original"].where(df.index != 1, np.nan)),
     r"row 3, field 'm_original': confidence is NaN"),
    (lambda df: df.assign(m_perturbed=df["m_perturbed"].where(df.index != 2, np.nan)),
     r"row 4, field 'm_perturbed': item 'i2' has no perturbed twin"),
    (lambda df: pd.concat([df, df.iloc[[4]]], ignore_index=True),
     r"row 62, field 'item_id': duplicate row for item 'i4'"),
    (lambda df: df.drop(columns="m_perturbed"), r"field 'm_perturbed': missing column"),
])
def test_bad_pairs_name_file_row_field(tmp_path, mutate, match):
    df = mutate(_pairs_frame(np.random.default_rng(0)))
    f = tmp_path / "pairs.csv"
    df.to_csv(f, index=False)
    with pytest.raises(DataError, match=match):
        validate_pairs(pd.read_csv(f), file=str(f))
    rc_err = main(["suitability-stats", "--pairs", str(f), "--out", str(tmp_path / "o"), "--wandb-mode", "disabled"])
    assert rc_err == 2


def test_groups_option_and_accuracy_change():
    df = _pairs_frame(np.random.default_rng(1), shift={"EF": 0.0, "ZZ": 0.1})
    with pytest.raises(DataError, match="'ZZ' without a group"):
        validate_pairs(df)
    df = validate_pairs(df, groups={"ZZ": "mine"})
    res = infer(df, SuitabilitySettings(n_permutations=500, metric="confidence"), groups={"ZZ": "mine"})
    zz = res["perturbations"]["ZZ"]
    g = df[df["perturbation"] == "ZZ"]
    assert zz["group"] == "mine" and zz["n"] == 30
    assert zz["accuracy_original"] == pytest.approx((g["m_original"] > 0.5).mean())
    assert zz["accuracy_change"] == pytest.approx((g["m_perturbed"] > 0.5).mean() - (g["m_original"] > 0.5).mean())
    assert zz["t"] == pytest.approx(stats.ttest_rel(g["m_original"], g["m_perturbed"]).statistic)


def test_suitability_stats_command_and_panel_rule(tmp_path):
    rng = np.random.default_rng(2)
    frames = []
    for model, st in (("rm1", 0.1), ("rm2", 0.0), ("rm3", 0.05)):
        f = _pairs_frame(rng, n=40, shift={"EF": 0.0, "PH": 0.0, "ST": st, "SP": st / 2})
        frames.append(f.assign(model=model))
    f = tmp_path / "pairs.jsonl"
    pd.concat(frames).to_json(f, orient="records", lines=True)
    out = tmp_path / "out"
    assert main(["suitability-stats", "--pairs", str(f), "--out", str(out), "--n-permutations", "2000",
                 "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "suitability.json").read_text())
    assert set(doc["models"]) == {"rm1", "rm2", "rm3"}
    rec = doc["models"]["rm1"]["perturbations"]["ST"]
    assert list(rec)[:8] == ["group", "n", "mean_delta", "cohens_d", "t", "p_value", "rejected", "unsuitable"]
    assert doc["settings"]["B"] == 2000 and doc["settings"]["q"] == 0.05 and doc["settings"]["eta"] == 0.5
    per = {m: doc["models"][m]["perturbations"] for m in doc["models"]}
    # the panel rule: per perturbation m = max{d : p >= 0.05} over the models
    for code in ("EF", "ST"):
        free = [per[m][code]["cohens_d"] for m in per if per[m][code]["p_value"] >= 0.05]
        m_code = max(free) if free else 0.0
        assert doc["settings"]["m"][code] == pytest.approx(m_code)
        for m in per:
            assert per[m][code]["unsuitable"] == (per[m][code]["rejected"] and per[m][code]["cohens_d"] > m_code)
    assert per["rm1"]["ST"]["rejected"] and not per["rm2"]["ST"]["rejected"]
    md = (out / "suitability.md").read_text()
    assert "| rm1 |" in md and "| rm3 |" in md and (out / "suitability.png").stat().st_size > 1000
    # a user-set margin overrides the panel rule
    finalize_res = {"a": infer(frames[0].drop(columns="model"), SuitabilitySettings(n_permutations=200))}
    finalize(finalize_res, SuitabilitySettings(n_permutations=200, margin=100.0))
    assert not any(r["unsuitable"] for r in finalize_res["a"]["perturbations"].values())


# -- rmeval suitability end to end ------------------------------------------------------------------

def test_suitability_command_on_rmbench_chat(tmp_path, shared_data, minilm_ckpt):
    out = tmp_path / "suit"
    args = ["suitability", "--checkpoint", str(minilm_ckpt), "--data", f"rm_bench:{shared_data / RMB_CHAT}",
            "--out", str(out), "--max-items", "6", "--max-length", "128", "--n-permutations", "1000",
            "--wandb-mode", "disabled"]
    assert main(args) == 0
    doc = json.loads((out / "suitability.json").read_text())
    codes = ["EF", "PH", "IU", "IW", "CN", "ST", "SP", "LE@rmbench", "SP@rmbench"]
    assert list(doc["perturbations"]) == codes
    for c in codes:
        r = doc["perturbations"][c]
        assert r["group"] == ("controlled" if c in ("EF", "PH", "IU", "IW", "CN") else "stylized")
        assert r["n_items"] == 6 and r["n_changed"] + r["n_unchanged"] + r["n_failed"] == 6
        assert r["n"] == r["n_changed"] + r["n_unchanged"]  # whole set: an unchanged twin is a ΔM of 0
    pairs = pd.read_parquet(out / "suitability_pairs.parquet")
    assert set(pairs["perturbation"]) == set(codes)
    # the inference alone on the written pairs reproduces the command's figures
    assert main(["suitability-stats", "--pairs", str(out / "suitability_pairs.parquet"), "--out", str(tmp_path / "s"),
                 "--n-permutations", "1000", "--wandb-mode", "disabled"]) == 0
    again = json.loads((tmp_path / "s" / "suitability.json").read_text())
    for c in codes:
        assert again["perturbations"][c]["p_value"] == pytest.approx(doc["perturbations"][c]["p_value"], nan_ok=True)
    # a rerun is served from the score cache
    assert main(args) == 0
    assert json.loads((out / "suitability.json").read_text())["perturbations"] == doc["perturbations"]


def test_audit_runs_suitability_when_asked(tmp_path, minilm_ckpt):
    out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(minilm_ckpt), "--data", "simulated:n_prompts=8,seed=1",
                 "--out", str(out), "--conditions", "original", "--max-length", "64", "--n-boot", "50",
                 "--n-boot-regression", "50", "--suitability", "EF", "CN", "ST", "--n-permutations", "300",
                 "--margin", "0.1", "--wandb-mode", "disabled"]) == 0
    assert (out / "audit.json").is_file()  # the audit itself is unchanged
    doc = json.loads((out / "suitability.json").read_text())
    assert list(doc["perturbations"]) == ["EF", "CN", "ST"]
    assert doc["settings"]["B"] == 300 and doc["settings"]["m"] == 0.1
    from rmcore.data.loading import load_data

    rs = load_data("simulated:n_prompts=8,seed=1")
    n_with_label = len({q.prompt_id for q in rs.preferences})  # one item per labelled prompt
    assert all(r["n_items"] == n_with_label for r in doc["perturbations"].values())
    assert doc["meta"]["items_skipped"].get("no_preference", 0) == 8 - n_with_label
    assert (out / "suitability_pairs.parquet").is_file() and (out / "suitability.md").is_file()


def test_confidence_dpo_is_sigmoid_of_implicit_reward_difference(tmp_path):
    from rmeval.scoring.dpo import DPOImplicitScorer

    save_tiny_lm(tmp_path / "policy", seed=0)
    save_tiny_lm(tmp_path / "ref", seed=1)
    dpo = DPOImplicitScorer(tmp_path / "policy", tmp_path / "ref", beta=0.5, max_length=64)
    pairs = [Pair.of([{"role": "user", "content": "What is the capital of France?"}], "Paris is the capital.",
                     "Cats sleep all day.")]
    cs, own = confidence_scorer(dpo, tmp_path / "cache.sqlite")
    m = confidences(cs, pairs)
    r = dpo.score([(pairs[0].message_list(), pairs[0].chosen), (pairs[0].message_list(), pairs[0].rejected)])
    assert own and m[0] == pytest.approx(expit(r[0] - r[1]), rel=1e-9)
    cs.cache.close()


def test_changed_column_from_csv_is_counted_not_tested(tmp_path):
    df = _pairs_frame(np.random.default_rng(5), n=12, shift={"EF": 0.05})
    df["changed"] = [k % 4 != 0 for k in range(len(df))]  # every 4th twin identical to its original
    f = tmp_path / "p.csv"
    df.to_csv(f, index=False)  # written as the strings True / False
    from rmeval.suitability import read_pairs

    res = infer(read_pairs(f), SuitabilitySettings(n_permutations=200, metric="confidence"))["perturbations"]["EF"]
    assert res["n"] == 12 and res["n_changed"] == 9 and res["n_unchanged"] == 3
    delta = np.where(df["changed"], df["m_original"] - df["m_perturbed"], 0.0)  # unchanged: a change of 0
    assert res["t"] == pytest.approx(stats.ttest_1samp(delta, 0).statistic)
