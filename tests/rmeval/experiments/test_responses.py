"""Policy responses (rmeval.experiments.responses) on the generator backends: a tiny local causal LM, an
OpenAI-compatible endpoint (a local HTTP server) and vLLM's offline API (a stand-in module with its
interface, since vLLM does not install on a CPU machine); caching and resumption."""

from __future__ import annotations

import json
import sys
import types
from http.server import HTTPServer

import pytest

from rmcore.data.schema import PromptRecord, Response
from rmcore.errors import ConfigError
from rmcore.models.tiny import CHAT_TEMPLATE
from rmeval.backends.generators import HFGenerator
from rmeval.experiments.responses import generate_responses, resolve_model
from rmeval.experiments.settings import PolicySpec, SamplingSettings
from tests.support import JsonHandler, serving

CONVERSATIONS = [
    [{"role": "user", "content": "How do I bake bread?"}],
    [{"role": "user", "content": "Write a poem about the sea"}, {"role": "assistant", "content": "Waves."},
     {"role": "user", "content": "Longer, please."}],
    [{"role": "user", "content": "Name a prime number."}],
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Summarise the plot of Hamlet."}],
]


def prompts():
    return [PromptRecord(f"p{i}", m, [Response(f"p{i}:a", "Sure, here it is."), Response(f"p{i}:b", "No.")])
            for i, m in enumerate(CONVERSATIONS)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    build = tmp_path_factory.mktemp("models")
    texts = [m["content"] for c in CONVERSATIONS for m in c] + ["Sure, here it is.", "No."]
    return build, texts


def test_tiny_policy_sampled_greedy_cached_and_resumed(tiny, tmp_path):
    build, texts = tiny
    pol = PolicySpec(name="a", model="tiny:3")
    s = SamplingSettings(n=2, temperature=0.7, top_p=0.9, max_new_tokens=6, chunk_prompts=2, seed=5)
    full = generate_responses(prompts(), pol, s, cache=tmp_path / "a.sqlite", build_dir=build, texts=texts)
    assert len(full) == 10 and list(full["sample"][:2]) == [0, 1]
    assert full.attrs["n_generated"] == 10 and full.attrs["n_cached"] == 0
    assert (full["n_tokens"] <= 6).all() and full["capped"].dtype == bool
    assert (full.loc[full["capped"], "n_tokens"] == 6).all()
    # a rerun asks the model nothing
    again = generate_responses(prompts(), pol, s, cache=tmp_path / "a.sqlite", build_dir=build, texts=texts)
    assert again.attrs["n_generated"] == 0 and again["response"].tolist() == full["response"].tolist()
    # interrupted after the first chunk, then resumed: the same responses as one uninterrupted run
    generate_responses(prompts()[:2], pol, s, cache=tmp_path / "b.sqlite", build_dir=build, texts=texts)
    resumed = generate_responses(prompts(), pol, s, cache=tmp_path / "b.sqlite", build_dir=build, texts=texts)
    assert resumed.attrs["n_cached"] == 4 and resumed.attrs["n_generated"] == 6
    assert resumed["response"].tolist() == full["response"].tolist()
    # another seed is another key; greedy decoding gives one deterministic response per prompt
    g = SamplingSettings(max_new_tokens=6)
    g1 = generate_responses(prompts(), pol, g, cache=tmp_path / "a.sqlite", build_dir=build, texts=texts)
    g2 = generate_responses(prompts(), pol, g, cache=tmp_path / "c.sqlite", build_dir=build, texts=texts)
    assert len(g1) == 5 and g1["response"].tolist() == g2["response"].tolist()
    with pytest.raises(ConfigError, match="greedy"):
        SamplingSettings(n=3).validate()


def test_chat_template_holds_the_whole_conversation(tiny):
    build, texts = tiny
    path = resolve_model("tiny:3", texts=texts, build_dir=build)
    gen = HFGenerator(path, max_new_tokens=4)
    assert gen.tokenizer.chat_template == CHAT_TEMPLATE
    text = gen.wrap(CONVERSATIONS[1])
    assert text == "<|user|>Write a poem about the sea<|endoftext|><|assistant|>Waves.<|endoftext|>" \
                   "<|user|>Longer, please.<|endoftext|><|assistant|>"
    gen.tokenizer.chat_template = None  # no template: the documented plain layout
    assert gen.wrap(CONVERSATIONS[1]) == ("User: Write a poem about the sea\n\nAssistant: Waves.\n\n"
                                          "User: Longer, please.\n\nAssistant:")
    # an input longer than the model's positions less the cap keeps its end and is counted
    gen.tokenizer.chat_template = CHAT_TEMPLATE
    long = [{"role": "user", "content": "bread " * 2000}]
    out = gen.sample([long], 1, 4)
    assert gen.n_truncated == 1 and len(out[0]) == 1


def test_toy_model_spec_is_checked():
    with pytest.raises(ConfigError, match="tiny:SEED"):
        PolicySpec(name="x", model="tiny:abc").validate()
    with pytest.raises(ConfigError, match="base_url"):
        PolicySpec(name="x", model="m", backend="openai").validate()
    with pytest.raises(ConfigError, match="backend"):
        PolicySpec(name="x", model="m", backend="tgi").validate()


class _Chat(JsonHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Chat.seen.append(body)
        n = body.get("n", 1)
        last = body["messages"][-1]["content"]
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": i, "finish_reason": "length" if i == 0 else "stop",
                              "message": {"role": "assistant", "content": f" answer {i} to {last} "}}
                             for i in range(n)]}
        self.send_json(reply)


def test_openai_backend_sends_the_conversation(tmp_path):
    with serving(_Chat, HTTPServer) as url:
        pol = PolicySpec(name="ep", model="served", backend="openai", base_url=f"{url}/v1",
                         chat_template_kwargs={"enable_thinking": False})
        s = SamplingSettings(n=2, temperature=0.7, top_p=0.9, max_new_tokens=32)
        df = generate_responses(prompts()[:2], pol, s, cache=tmp_path / "r.sqlite")
    assert df["response"].tolist() == ["answer 0 to How do I bake bread?", "answer 1 to How do I bake bread?",
                                       "answer 0 to Longer, please.", "answer 1 to Longer, please."]
    assert df["capped"].tolist() == [True, False, True, False] and df["n_tokens"].isna().all()
    body = _Chat.seen[-1]
    assert body["messages"] == CONVERSATIONS[1] and body["n"] == 2 and body["top_p"] == 0.9
    assert body["temperature"] == 0.7 and body["max_tokens"] == 32 and isinstance(body["seed"], int)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_vllm_backend_feeds_the_chat_template_token_ids(tiny, tmp_path, monkeypatch):
    """vLLM's offline API as documented (LLM(model=..., seed=...), get_tokenizer(), generate(prompts,
    SamplingParams, use_tqdm) -> outputs with text, token_ids and finish_reason), here a stand-in
    that records what it is given."""
    from transformers import AutoTokenizer

    build, texts = tiny
    path = resolve_model("tiny:3", texts=texts, build_dir=build)
    calls = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, model, **kw):
            calls["init"] = (model, kw)

        def get_tokenizer(self):
            return AutoTokenizer.from_pretrained(path)

        def generate(self, prompts, params, use_tqdm=True):
            calls["generate"] = (prompts, params.kw)
            out = types.SimpleNamespace
            return [out(outputs=[out(text=f" r{j} ", token_ids=[1, 2, 3], finish_reason="length" if j else "stop")
                                 for j in range(params.kw["n"])]) for _ in prompts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    pol = PolicySpec(name="v", model="tiny:3", backend="vllm")
    with pytest.raises(ConfigError, match="tiny:SEED"):
        pol.validate()
    pol = PolicySpec(name="v", model=path, backend="vllm", tensor_parallel_size=2)
    s = SamplingSettings(n=2, temperature=0.7, top_p=0.9, max_new_tokens=16, seed=3)
    df = generate_responses(prompts()[:2], pol, s, cache=tmp_path / "v.sqlite")
    assert df["response"].tolist() == ["r0", "r1", "r0", "r1"] and df["capped"].tolist() == [False, True] * 2
    model, kw = calls["init"]
    assert model == path and kw["tensor_parallel_size"] == 2 and kw["dtype"] == "auto"
    sent, params = calls["generate"]
    tok = AutoTokenizer.from_pretrained(path)
    want = tok(tok.apply_chat_template(CONVERSATIONS[1], tokenize=False, add_generation_prompt=True),
               add_special_tokens=False)["input_ids"]
    assert sent[1] == {"prompt_token_ids": want}
    assert params["n"] == 2 and params["temperature"] == 0.7 and params["top_p"] == 0.9 and params["max_tokens"] == 16
    monkeypatch.delitem(sys.modules, "vllm")
    monkeypatch.setattr("builtins.__import__", _no_vllm(__import__))
    with pytest.raises(ConfigError, match="needs the 'vllm' package"):
        generate_responses(prompts()[2:3], pol, s, cache=tmp_path / "v.sqlite")


def _no_vllm(real):
    def imp(name, *a, **k):
        if name == "vllm":
            raise ImportError("no vllm")
        return real(name, *a, **k)
    return imp
