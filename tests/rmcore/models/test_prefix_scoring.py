"""Prefix-shared scoring (rmcore.models.prefix_scoring) gives the unshared scores, for every scorer kind.

Reference: the same scorer with ``shared_prompt=False`` (one padded forward per text, itself
checked against hand computations in tests/rmeval/scoring/test_scorers.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rmcore.models.prefix_scoring import conversation_key, group_by_prefix
from rmeval.scoring.dpo import DPOImplicitScorer
from rmeval.scoring.judge import GenerativeJudgeScorer
from rmeval.scoring.seq_classifier import SeqClassifierScorer
from tests.support import CORPUS, TINY_SET, save_tiny_classifier, save_tiny_lm, tiny_set_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def audit_like_items() -> list:
    """Prompts with several responses each (conditions of an audit), the same responses under
    several donor prompts (transplants), some long prompts the max length cuts, and singletons."""
    rng = np.random.default_rng(3)
    words = " ".join(CORPUS).split()
    prompts = [" ".join(rng.choice(words, size=int(n))) for n in (12, 30, 55, 80, 5)]
    responses = [" ".join(rng.choice(words, size=int(n))) for n in (1, 4, 9, 20, 35, 60)]
    items = []
    for i, p in enumerate(prompts):
        msgs = [{"role": "user", "content": p}]
        if i == 2:
            msgs = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}] + msgs
        for r in responses[i % 2::1 if i < 4 else 6]:
            items.append((msgs, r))
    items.append(([{"role": "user", "content": "alone"}], "single response"))
    return items


def test_groups_share_only_common_tokens() -> None:
    seqs = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [1, 2, 3, 4, 5, 6, 7, 8, 9, 12], [9, 9],
            [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]]
    groups, alone = group_by_prefix(seqs, ["a", "a", "b", "a"], min_prefix=2)
    assert groups == [] and sorted(alone) == [0, 1, 2, 3]  # a cut prompt shares nothing with the others
    groups, alone = group_by_prefix(seqs[:3], ["a", "a", "b"], min_prefix=2)
    assert groups == [(9, [0, 1])] and alone == [2]
    groups, _ = group_by_prefix([[1, 2, 3], [1, 2, 3, 4]], ["a", "a"], min_prefix=1)
    assert groups == [(2, [0, 1])]  # each text keeps a token of its own


@pytest.mark.parametrize("max_length", [40, 512])
def test_seq_classifier_shared_equals_unshared(tmp_path, max_length: int) -> None:
    save_tiny_classifier(tmp_path)
    items = audit_like_items()
    shared = SeqClassifierScorer(tmp_path, max_length=max_length, batch_size=3)
    plain = SeqClassifierScorer(tmp_path, max_length=max_length, batch_size=3, shared_prompt=False)
    got, ref = shared.score(items), plain.score(items)
    assert np.std(ref) > 0
    np.testing.assert_allclose(got, ref, atol=1e-5)
    np.testing.assert_array_equal(shared.last_flags, plain.last_flags)
    groups, _ = group_by_prefix([e.input_ids for e in shared.encode(items)],
                                [conversation_key(m) for m, _ in items])
    # the shared path really ran (with a short max length each prompt is cut per response: nothing shared)
    assert len(groups) >= 3 if max_length == 512 else groups == []


def test_seq_classifier_qwen3_chat_template(tmp_path) -> None:
    from rmcore.models.tiny import tiny_model

    tok = tiny_set_tokenizer()
    tok.add_special_tokens({"pad_token": "<|pad|>"})
    model = tiny_model(tok, "qwen3", head="classifier", token_ids=("pad",), num_attention_heads=4, head_dim=8,
                       max_position_embeddings=512, num_labels=1).eval()
    from rmcore.data.loading import load_rating_set

    rs = load_rating_set(TINY_SET)
    items = [(p.messages, r.text) for p in rs.prompts[:6] for r in p.responses]
    got = SeqClassifierScorer(model, tokenizer=tok, max_length=128, batch_size=2).score(items)
    ref = SeqClassifierScorer(model, tokenizer=tok, max_length=128, batch_size=2, shared_prompt=False).score(items)
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_minilm_keeps_its_path(minilm_ckpt) -> None:
    from rmcore.models.prefix_scoring import supports_prefix_scoring

    s = SeqClassifierScorer(minilm_ckpt, max_length=64)
    assert not supports_prefix_scoring(s.model)


@pytest.mark.parametrize("max_length", [60, 512])
def test_judge_shared_equals_unshared(tmp_path, max_length: int) -> None:
    save_tiny_lm(tmp_path, bpe=True)
    items = audit_like_items()
    got = GenerativeJudgeScorer(tmp_path, max_length=max_length, batch_size=3).score(items)
    ref = GenerativeJudgeScorer(tmp_path, max_length=max_length, batch_size=3, shared_prompt=False).score(items)
    assert np.std(ref) > 0 or max_length < 512
    np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("max_length", [40, 512])
def test_dpo_shared_equals_unshared(tmp_path, max_length: int) -> None:
    save_tiny_lm(tmp_path / "pol", seed=1)
    save_tiny_lm(tmp_path / "ref", seed=2)
    items = audit_like_items()
    # responses that all begin alike: the shared prefix reaches into the response
    items += [([{"role": "user", "content": "What is the capital of France?"}], "Paris is " + t)
              for t in ("the capital", "a large city", "Paris")]
    kw = dict(beta=0.5, max_length=max_length, batch_size=3)
    got = DPOImplicitScorer(tmp_path / "pol", tmp_path / "ref", **kw).score(items)
    ref = DPOImplicitScorer(tmp_path / "pol", tmp_path / "ref", shared_prompt=False, **kw).score(items)
    assert np.std(ref) > 0
    np.testing.assert_allclose(got, ref, atol=1e-5)
