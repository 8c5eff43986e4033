"""Text generators for paraphrase / related prompts: file, local causal LM, OpenAI-compatible HTTP."""

from __future__ import annotations

import json
from http.server import HTTPServer

import pytest

from rmcore.data.schema import PromptRecord, Response
from rmcore.errors import DataError
from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer
from rmeval.backends.generators import INSTRUCTIONS, FileGenerator, HFGenerator, OpenAIGenerator
from rmeval.backends.spec import make_backend, offering, parse_backend_spec
from tests.support import JsonHandler, serving


def prompts():
    return [PromptRecord(f"p{i}", [{"role": "user", "content": t}], [Response(f"p{i}:a", "ok")])
            for i, t in enumerate(["How do I bake bread", "Write a poem about the sea"])]


def test_registry():
    """The backend kinds that write prompt variants (rmeval.backends.spec, capability variants)."""
    assert set(offering("variants")) == {"file", "hf", "openai", "simulated"}
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        make_backend("variants", parse_backend_spec("nope"))


def test_file_generator_orders_variants_and_names_bad_row(tmp_path):
    f = tmp_path / "rel.jsonl"
    f.write_text('{"prompt_id": "p0", "variant": 1, "text": "second"}\n'
                 '{"prompt_id": "p0", "variant": 0, "text": "first"}\n\n'
                 '{"prompt_id": "p1", "variant": 0, "text": "sea"}\n')
    assert FileGenerator(f).generate(prompts(), "related") == {"p0": ["first", "second"], "p1": ["sea"]}
    assert FileGenerator(f).generate(prompts(), "related", n=1)["p0"] == ["first"]
    f.write_text('{"prompt_id": "p0", "text": "fine"}\n{"prompt_id": "zzz", "variant": 0, "text": "x"}\n')
    with pytest.raises(DataError, match=r"row 2.*prompt_id.*zzz"):
        FileGenerator(f).generate(prompts(), "paraphrase")
    f.write_text('{"prompt_id": "p0"}\n')
    with pytest.raises(DataError, match=r"row 1.*'text'"):
        FileGenerator(f)
    f.write_text('{"prompt_id": "p0", "text": "fine"}\n')
    with pytest.raises(ValueError, match="task"):
        FileGenerator(f).generate(prompts(), "summarise")


WORDS = ("bake", "bread", "poem", "sea")


def _tiny_lm(tmp_path):
    """A random tiny Llama that can say only WORDS: its generation config suppresses every other
    token (the end of text, padding, punctuation and the instructions' words among them), so each
    reply is exactly max_new_tokens of those words, whatever the random weights favour on this
    machine's arithmetic; which of them it picks is left to the weights."""
    corpus = [INSTRUCTIONS["paraphrase"], INSTRUCTIONS["related"], "User: Assistant: bake bread poem sea"]
    tok = train_tokenizer(corpus, word_level=True, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    model = tiny_model(tok, "llama", num_attention_heads=4, num_key_value_heads=4)
    allowed = set(tok.convert_tokens_to_ids(list(WORDS)))
    assert len(allowed) == len(WORDS) and tok.unk_token_id not in allowed
    model.generation_config.suppress_tokens = [i for i in range(model.config.vocab_size) if i not in allowed]
    save_tiny(tmp_path, model, tok)


def test_hf_generator_tiny_lm(tmp_path):
    _tiny_lm(tmp_path)
    greedy = HFGenerator(tmp_path, max_new_tokens=5)
    out1 = greedy.generate(prompts(), "paraphrase", n=1)
    # one reply per prompt, never empty: five of the planted words
    assert set(out1) == {"p0", "p1"} and all(len(v) == 1 for v in out1.values())
    assert all(len(t.split()) == 5 and set(t.split()) <= set(WORDS) for v in out1.values() for t in v)
    assert out1 == greedy.generate(prompts(), "paraphrase", n=1)  # greedy is deterministic
    sampled = HFGenerator(tmp_path, max_new_tokens=5, seed=3).generate(prompts(), "related", n=3)
    assert set(sampled) == {"p0", "p1"} and all(len(v) == 3 for v in sampled.values())  # n replies, none empty
    assert all(len(t.split()) == 5 and set(t.split()) <= set(WORDS) for v in sampled.values() for t in v)
    assert "bake bread" in greedy.instruction(prompts()[0], "paraphrase")


class _Handler(JsonHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append((self.path, self.headers.get("Authorization"), body))
        n = body.get("n", 1)
        reply = {"choices": [{"index": i, "message": {"role": "assistant", "content": f' "Request: variant {i}" '}}
                             for i in range(n)]}
        self.send_json(reply)


def test_openai_generator_against_local_server(monkeypatch):
    with serving(_Handler, HTTPServer) as url:
        monkeypatch.setenv("TEST_KEY", "sk-test")
        gen = OpenAIGenerator("tiny-model", base_url=f"{url}/v1",
                              api_key_env="TEST_KEY", timeout=5)
        out = gen.generate(prompts(), "paraphrase", n=2)
    assert out == {"p0": ["variant 0", "variant 1"], "p1": ["variant 0", "variant 1"]}
    path, auth, body = _Handler.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["model"] == "tiny-model" and body["n"] == 2
    assert "How do I bake bread" in body["messages"][0]["content"]
