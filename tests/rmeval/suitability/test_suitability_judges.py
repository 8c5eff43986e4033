"""Reward Auditor's generative-judge prompt (an explanation, then [[A]]/[[B]]/[[C]]) and a DPO model
scored without its reference (pi_ref = 1), each recomputed by hand from the model's logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import expit

from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer
from rmeval.backends import read_bracket_verdict
from rmeval.perturbations.suite import Pair
from rmeval.scoring import ScorerSettings, load_scorer
from rmeval.scoring.judge import GenerativeJudgeScorer
from rmeval.scoring.pairwise_judge import EXPLAIN_TEMPLATE, ExplainedVerdictPrompt, PairwiseJudgeScorer
from rmeval.suitability import confidence_scorer, pair_metrics

CORPUS = [EXPLAIN_TEMPLATE, "[[ A ]] [[ B ]] [[ C ]] A B C 1 2 3 4 5 User Paris is the capital of France",
          "Cats sleep all day. What is the capital of France? good answer"]


def save_lm(path, seed: int = 0):
    tok = train_tokenizer(CORPUS, word_level=True, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    save_tiny(path, tiny_model(tok, "llama", seed=seed, num_attention_heads=4, num_key_value_heads=4,
                               max_position_embeddings=1024), tok)
    return path


PAIRS = [Pair.of([{"role": "user", "content": "What is the capital of France?"}], "Paris is the capital.",
                 "Cats sleep all day."),
         Pair.of([{"role": "user", "content": "Cats?"}], "Cats sleep all day.", "Paris.")]


@torch.inference_mode()
def verdict_by_hand(judge: GenerativeJudgeScorer, prompt_ids: list[int], max_new: int) -> float:
    """Greedy explanation token by token, cut at its first "[[", then log p(A) − log p(B) after "[["."""
    model, tok = judge.model, judge.tokenizer
    ids = list(prompt_ids)
    for _ in range(max_new):
        nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
        if nxt == tok.eos_token_id:
            break
        ids.append(nxt)
    text = tok.decode(ids[len(prompt_ids):], skip_special_tokens=True)
    cut = text.find("[[")
    explanation = text[:cut] if cut >= 0 else text.rstrip() + "\n\n"
    full = list(prompt_ids) + tok(explanation + "[[", add_special_tokens=False)["input_ids"]
    logp = torch.log_softmax(model(torch.tensor([full])).logits[0, -1].double(), -1)
    a, b = (tok.convert_tokens_to_ids(x) for x in ("A", "B"))
    return float(logp[a] - logp[b])


def test_explain_style_by_hand(tmp_path):
    judge = GenerativeJudgeScorer(save_lm(tmp_path / "judge"), max_length=640)
    cs = PairwiseJudgeScorer(judge, style="explain", max_new_tokens=6)
    assert cs.prompt.letters == ("A", "B", "C")
    items = [(p.message_list(), (p.chosen, p.rejected)) for p in PAIRS]
    s = cs.score(items)
    for item, got in zip(items, s):
        ids, _, _ = cs.encode(list(item[0]), *item[1])
        assert got == pytest.approx(verdict_by_hand(judge, ids, 6), abs=1e-4)
    # the suitability metrics: M = ½[σ(s(c, r)) + σ(−s(r, c))] and log M
    m, log_m = pair_metrics(cs, PAIRS)
    s_rc = cs.score([(p.message_list(), (p.rejected, p.chosen)) for p in PAIRS])
    assert m == pytest.approx(0.5 * (expit(s) + expit(-s_rc)))
    assert log_m == pytest.approx(np.log(m))
    # the judge of a suitability run takes the style
    wrapped, _ = confidence_scorer(judge, judge_style="explain", judge_explain_tokens=6)
    assert wrapped.fingerprint == cs.fingerprint != PairwiseJudgeScorer(judge).fingerprint


def test_explanation_is_cut_at_its_verdict(tmp_path, monkeypatch):
    judge = GenerativeJudgeScorer(save_lm(tmp_path / "judge"), max_length=640)
    q = ExplainedVerdictPrompt(judge, max_new_tokens=8)
    tok = judge.tokenizer
    written = tok("good answer [[ B ]] Paris", add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(judge.backend, "generate", lambda seqs, n: [written for _ in seqs])
    (t,) = q.encode(judge.backend, [(PAIRS[0].message_list(), (PAIRS[0].chosen, PAIRS[0].rejected))])
    assert q.last_explanations == ["good answer "]
    assert t.suffix == tok("good answer [[", add_special_tokens=False)["input_ids"]
    assert q.parse("Brief analysis... so [[A]] is wrong; final: [[ C ]]") == "C" and q.parse("no verdict") is None
    assert read_bracket_verdict("[[A]] then [[B]]", ("A", "B")) == "B"


def test_explain_style_needs_room(tmp_path):
    from rmcore.errors import ConfigError

    judge = GenerativeJudgeScorer(save_lm(tmp_path / "judge"), max_length=200)
    with pytest.raises(ConfigError, match="no room for a 256-token explanation"):
        PairwiseJudgeScorer(judge, style="explain")


@torch.inference_mode()
def test_dpo_without_reference_is_beta_log_pi(tmp_path):
    from rmeval.scoring.dpo import DPOImplicitScorer

    path = save_lm(tmp_path / "policy")
    dpo = DPOImplicitScorer(path, None, beta=0.5, max_length=64)
    items = [(p.message_list(), p.chosen) for p in PAIRS] + [(p.message_list(), p.rejected) for p in PAIRS]
    got = dpo.score(items)
    for (msgs, resp), g in zip(items, got):
        p_ids, r_ids, _, _ = dpo.split(list(msgs), resp)
        ids = torch.tensor([p_ids + r_ids])
        logp = torch.log_softmax(dpo.policy(ids).logits[0, :-1].double(), -1)
        total = sum(float(logp[len(p_ids) - 1 + j, t]) for j, t in enumerate(r_ids))
        assert g == pytest.approx(0.5 * total, rel=1e-6)
    via_cli = load_scorer(ScorerSettings(model=str(path), kind="dpo_implicit", reference="none", beta=0.5,
                                         max_length=64))
    # one item against a batch: float32 sums
    assert via_cli.reference is None and via_cli.score(items[:1])[0] == pytest.approx(got[0], rel=1e-6)
    assert math.isfinite(float(got.sum()))
