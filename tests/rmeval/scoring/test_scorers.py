"""Scorer backends against independent references: plain forward passes and hand computations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.errors import ConfigError
from rmcore.models.formatting import plain_prompt
from rmeval.scoring import make_scorer
from rmeval.scoring.base import SCORERS
from rmeval.scoring.dpo import DPOImplicitScorer
from rmeval.scoring.judge import GenerativeJudgeScorer, digit_token_ids
from rmeval.scoring.seq_classifier import SeqClassifierScorer
from tests.support import CORPUS, longest_rm_bench_rows, save_tiny_classifier, save_tiny_lm, tiny_tokenizer


def varied_items(n: int = 40) -> list:
    rng = np.random.default_rng(0)
    words = " ".join(CORPUS).split()
    items = []
    for i in range(n):
        p = " ".join(rng.choice(words, size=int(rng.integers(1, 60))))
        r = " ".join(rng.choice(words, size=int(rng.integers(1, 90))))
        msgs = [{"role": "user", "content": p}]
        if i % 5 == 0:
            msgs = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}] + msgs
        items.append((msgs, r))
    return items


def test_registry_names():
    assert {"seq_classifier", "generative_judge", "dpo_implicit"} <= set(SCORERS)
    with pytest.raises(ValueError, match="unknown scorer"):
        make_scorer("nope")


def test_minilm_batch_size_invariance(tmp_path, minilm_ckpt):
    items = varied_items(40)
    s = make_scorer("seq_classifier", model=minilm_ckpt, max_length=128)
    runs = {}
    for bs in (1, 7, 32):
        s.batch_size = bs
        runs[bs] = s.score(items)
    np.testing.assert_allclose(runs[1], runs[7], atol=1e-5)
    np.testing.assert_allclose(runs[1], runs[32], atol=1e-5)


def test_seq_classifier_matches_plain_forward_and_padding_sides(tmp_path):
    model, tok = save_tiny_classifier(tmp_path)
    items = varied_items(30)
    right = SeqClassifierScorer(tmp_path, max_length=64, batch_size=7)
    left = SeqClassifierScorer(tmp_path, max_length=64, batch_size=7, padding_side="left")
    s_right, s_left = right.score(items), left.score(items)
    bs32 = SeqClassifierScorer(tmp_path, max_length=64, batch_size=32).score(items)
    np.testing.assert_allclose(s_right, s_left, atol=1e-5)
    np.testing.assert_allclose(s_right, bs32, atol=1e-5)
    # reference: each text alone, plain layout built by hand, prompt cut from the left
    model.eval()
    for (msgs, resp), got in zip(items[:8], s_right[:8]):
        p_ids = tok(plain_prompt(msgs), add_special_tokens=False)["input_ids"]
        r_ids = tok(" " + resp, add_special_tokens=False)["input_ids"][:63]
        ids = p_ids[max(len(p_ids) - (64 - len(r_ids)), 0):] + r_ids
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([ids])).logits[0, 0].item()
        assert got == pytest.approx(ref, abs=1e-5)
    # truncations are counted: some prompts are longer than the 64-token budget
    assert right.truncation["n_scored"] == 30
    assert right.truncation["prompt_truncated"] > 0
    assert right.last_flags.shape == (30, 2)


def test_judge_expected_rating_by_hand(tmp_path):
    model, tok = save_tiny_lm(tmp_path)
    judge = GenerativeJudgeScorer(tmp_path, max_length=256, batch_size=3)
    items = varied_items(5)
    got = judge.score(items)
    assert np.all((got >= 1) & (got <= 5))
    vocab = tok.get_vocab()
    digit_ids = [vocab[d] for d in "12345"]
    model.eval()
    for (msgs, resp), g in zip(items, got):
        ids, _, _ = judge.encode(msgs, resp)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
        z = logits[digit_ids]
        p = torch.exp(z - z.max()) / torch.exp(z - z.max()).sum()
        assert g == pytest.approx(float(sum((d + 1) * p[d] for d in range(5))), abs=1e-5)


def test_judge_text_ends_with_rating_cue(tmp_path):
    save_tiny_lm(tmp_path)
    judge = GenerativeJudgeScorer(tmp_path, max_length=40)
    ids, p_cut, _ = judge.encode([{"role": "user", "content": "bake bread " * 30}], "Mix flour")
    assert len(ids) <= 40 and p_cut
    assert judge.tokenizer.decode(ids).rstrip().endswith(":")  # "Rating:" kept; the conversation was cut


def test_digit_tokens_with_leading_space(tmp_path):
    _, tok = save_tiny_lm(tmp_path, bpe=True)
    ids = digit_token_ids(tok)
    vocab = tok.get_vocab()
    for d, got in zip("12345", ids):
        assert vocab[d] in got
        if "Ġ" + d in vocab:
            assert vocab["Ġ" + d] in got


def _response_logprob(model, tok, msgs, resp):
    p = tok(plain_prompt(msgs), add_special_tokens=False)["input_ids"]
    r = tok(" " + resp, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p + r])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    return sum(logp[len(p) + j - 1, r[j]].item() for j in range(len(r)))


def test_dpo_implicit_reward_by_hand(tmp_path):
    pol_dir, ref_dir = tmp_path / "pol", tmp_path / "ref"
    pol, tok = save_tiny_lm(pol_dir, seed=1)
    ref, _ = save_tiny_lm(ref_dir, seed=2)
    scorer = DPOImplicitScorer(pol_dir, ref_dir, beta=0.25, max_length=512, batch_size=4)
    items = varied_items(6)
    got = scorer.score(items)
    for (m, r), g in zip(items, got):
        want = 0.25 * (_response_logprob(pol.eval(), tok, m, r) - _response_logprob(ref.eval(), tok, m, r))
        assert g == pytest.approx(want, abs=1e-4)
    same = DPOImplicitScorer(pol_dir, pol_dir, beta=0.1).score(items)
    np.testing.assert_array_equal(same, np.zeros(len(items)))
    two_copies = make_scorer("dpo_implicit", policy=pol_dir, reference=str(pol_dir) + "/", beta=0.1).score(items)
    np.testing.assert_allclose(two_copies, 0.0, atol=1e-6)


# -- texts longer than the model's position limit; max_tokens ------------------------------------------------

@pytest.mark.usefixtures("one_torch_thread")
def test_in_memory_scorer_of_the_audit_callback_honours_the_limit(tmp_path, demo_ckpt, shared_data):
    """AuditCallback scores the in-memory model through SeqClassifierScorer: same limit."""
    from rmcore.models.modeling import load_reward_model

    model, tok = load_reward_model(str(demo_ckpt))
    rs = load_rating_set({"name": "rm_bench", "path": str(longest_rm_bench_rows(shared_data, tmp_path))})
    items = [(p.messages, r.text) for p in rs.prompts for r in p.responses]
    scorer = SeqClassifierScorer(model, tokenizer=tok)
    assert scorer.max_length == 512
    scores = scorer.score(items)
    assert np.isfinite(scores).all() and scorer.last_flags.any()


def _tiny_gpt2(path: Path, n_positions: int = 32):
    """A causal LM with learned absolute positions: a longer input is an index error, not a warning."""
    from rmcore.models.tiny import save_tiny, tiny_model

    tok = tiny_tokenizer()
    model = tiny_model(tok, "gpt2", token_ids=("pad",), n_positions=n_positions, n_embd=16, n_layer=1, n_head=2)
    save_tiny(path, model, tok)
    return model, tok


@pytest.mark.usefixtures("one_torch_thread")
def test_judge_and_dpo_take_the_limit_from_the_model(tmp_path):
    _tiny_gpt2(tmp_path)
    long_item = ([{"role": "user", "content": " ".join(["bread"] * 80)}], " ".join(["cats"] * 60))
    judge = make_scorer("generative_judge", model=str(tmp_path))
    assert judge.max_length == 32
    assert np.isfinite(judge.score([long_item])).all() and judge.last_flags.any()
    dpo = make_scorer("dpo_implicit", policy=str(tmp_path), reference=str(tmp_path))
    assert dpo.max_length == 32
    assert np.isfinite(dpo.score([long_item])).all() and dpo.last_flags.any()


@pytest.mark.usefixtures("one_torch_thread")
def test_max_tokens_reaches_every_scorer(tmp_path):
    from dataclasses import replace

    from rmcore.settings.fields import from_args
    from rmeval.cli import build_parser
    from rmeval.cli.audit import AuditCommand
    from rmeval.scoring import load_scorer

    _tiny_gpt2(tmp_path, n_positions=64)
    for scorer in ("generative_judge", "dpo_implicit"):
        reference = ["--reference", str(tmp_path)] if scorer == "dpo_implicit" else []  # a judge takes none
        args = build_parser().parse_args(["audit", "--checkpoint", str(tmp_path), "--data", "simulated",
                                          "--out", "o", "--scorer", scorer, *reference, "--max-tokens", "100"])
        s = load_scorer(replace(from_args(AuditCommand, args).scorer, model=str(tmp_path)))
        assert s.max_tokens == 100, scorer


@pytest.mark.usefixtures("one_torch_thread")
def test_max_tokens_caps_judge_batches(tmp_path):
    _tiny_gpt2(tmp_path, n_positions=64)
    judge = make_scorer("generative_judge", model=str(tmp_path), batch_size=8, max_tokens=70)
    widths: list[tuple[int, int]] = []
    hook = judge.model.register_forward_hook(lambda m, a, k, o: widths.append(tuple(k["input_ids"].shape)),
                                             with_kwargs=True)
    items = [([{"role": "user", "content": "bread " * n}], "cats") for n in (1, 2, 3, 4)]
    judge.score(items)
    hook.remove()
    assert all(b * w <= 70 for b, w in widths) and len(widths) > 1, widths


# -- the pad token -------------------------------------------------------------------------------------------

@pytest.mark.usefixtures("one_torch_thread")
def test_in_memory_scorer_never_pads_with_eos(tmp_path):
    model, tok = save_tiny_classifier(tmp_path)
    tok.pad_token = None  # e.g. a Llama tokenizer: no pad token, has unk and eos
    model.config.pad_token_id = None
    scorer = SeqClassifierScorer(model, tokenizer=tok)
    assert scorer.pad_id == tok.unk_token_id != tok.eos_token_id
    assert model.config.pad_token_id == tok.unk_token_id  # the model reads the same pad as the tokenizer
    tok.pad_token = tok.unk_token = None
    with pytest.raises(ConfigError, match="no pad or unk"):
        SeqClassifierScorer(model, tokenizer=tok)
