"""The vllm kind (rmeval.backends.vllm) on the CPU: a fake ``vllm`` module in sys.modules records
what the engine is built with and asked, and answers as vLLM does (a judge's prompt log-probabilities
computed here by the same tiny model through transformers); without vllm, one line and exit 2."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest
import torch

from rmcore.errors import ConfigError
from rmcore.models.tiny import tiny_causal_lm

TEXTS = ["Which answer is better, A or B?", "A is better.", "B is better.", "Tell me about the sea."] * 8


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("vllm") / "lm", TEXTS, "qwen2", vocab_size=300, seed=0)


class FakeLLM:
    """vllm.LLM as far as rmeval.backends.vllm uses it; ``calls`` records every call's arguments."""

    calls: list[tuple[str, dict]] = []

    def __init__(self, **kwargs):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        FakeLLM.calls.append(("LLM", kwargs))
        self.tok = AutoTokenizer.from_pretrained(kwargs["model"])
        self.lm = AutoModelForCausalLM.from_pretrained(kwargs["model"]).eval()
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=64, dtype=torch.bfloat16))

    def get_tokenizer(self):
        return self.tok

    @torch.inference_mode()
    def generate(self, prompts, params, use_tqdm=True):
        FakeLLM.calls.append(("generate", {"prompts": prompts, "params": params.kwargs, "use_tqdm": use_tqdm}))
        if params.kwargs.get("prompt_logprobs") == 0:  # each prompt token's log-probability, the last one read
            out = []
            for p in prompts:
                ids = p["prompt_token_ids"]
                logp = torch.log_softmax(self.lm(torch.tensor([ids[:-1]])).logits[0, -1].double(), -1)
                last = {ids[-1]: SimpleNamespace(logprob=float(logp[ids[-1]]))}
                out.append(SimpleNamespace(prompt_logprobs=[None] * (len(ids) - 1) + [last]))
            return out
        n = params.kwargs["n"]
        return [SimpleNamespace(outputs=[SimpleNamespace(text=f" answer {i}.{j} ", token_ids=[1, 2, 3],
                                                         finish_reason="length" if j else "stop")
                                         for j in range(n)]) for i in range(len(prompts))]


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM = FakeLLM
    mod.SamplingParams = lambda **kw: SimpleNamespace(kwargs=kw)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    FakeLLM.calls = []
    return FakeLLM.calls


def test_policy_responses_from_the_engine_with_the_policy_s_settings(fake_vllm, tiny_lm):
    from rmeval.experiments.responses import load_generator
    from rmeval.experiments.settings import PolicySpec, SamplingSettings

    policy = PolicySpec(name="p", model=str(tiny_lm), backend="vllm", dtype="bfloat16", tensor_parallel_size=2,
                        gpu_memory_utilization=0.5, max_model_len=512)
    gen = load_generator(policy, SamplingSettings(n=2, temperature=0.7, top_p=0.9, max_new_tokens=33, seed=5))
    outs = gen.sample(["Tell me about the sea."], n=2)
    assert fake_vllm[0] == ("LLM", {"model": str(tiny_lm), "dtype": "bfloat16", "seed": 5, "trust_remote_code": False,
                                    "tensor_parallel_size": 2, "gpu_memory_utilization": 0.5, "max_model_len": 512})
    _, call = fake_vllm[1]
    assert call["params"] == {"n": 2, "temperature": 0.7, "top_p": 0.9, "max_tokens": 33, "seed": 5}
    assert call["use_tqdm"] is False
    # the hf kind's prompt layout: the chat template, applied here, its ids handed over
    tok = gen.tokenizer
    want = tok(tok.apply_chat_template([{"role": "user", "content": "Tell me about the sea."}], tokenize=False,
                                       add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    assert call["prompts"] == [{"prompt_token_ids": want}]
    assert [(c.text, c.n_tokens, c.capped) for c in outs[0]] == [("answer 0.0", 3, False), ("answer 0.1", 3, True)]


def test_a_rewriter_on_vllm_is_greedy(fake_vllm, tiny_lm):
    from rmeval.perturbations.rewriters import make_rewriter

    rw = make_rewriter(f"vllm:{tiny_lm}", seed=3, max_new_tokens=17)
    gen = rw.generator
    gen.sample(["Rewrite: hello"])
    assert fake_vllm[-1][1]["params"] == {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 17, "seed": 3}


def test_the_judge_reads_the_same_letters_as_the_hf_kind(fake_vllm, tiny_lm):
    """σ(s_A − s_B) of the vllm judge (prompt log-probabilities of each spelling appended) equals the
    hf kind's (next-token logits through transformers): the same prompt ids, the same letters."""
    from rmcore.models.device import Placement
    from rmeval.backends.spec import make_backend, parse_backend_spec
    from rmeval.experiments.winrate import VerdictQuestion

    items = [("Which is better?", "A is better.", "B is better."), ("Tell me about the sea.", "Sea.", "Waves.")]
    spec = parse_backend_spec(f"vllm:{tiny_lm}")
    judge = make_backend("judge", spec, placement=Placement(dtype="bfloat16"), max_model_len=64)
    hf = make_backend("judge", parse_backend_spec(f"hf:{tiny_lm}"), placement=Placement(device="cpu",
                                                                                        dtype="float32"))
    assert fake_vllm[0][1]["dtype"] == "bfloat16" and fake_vllm[0][1]["max_model_len"] == 64
    assert judge.fit_length(None) == 63 and judge.fit_length(40) == 40 and judge.fit_length(4096) == 63
    q = VerdictQuestion(judge.fit_length(4096))
    s_vllm, s_hf = judge.letter_scores(q, items), hf.letter_scores(VerdictQuestion(63), items)
    ids = [judge.letter_ids(q.letters)]
    asked = fake_vllm[-1][1]["prompts"]
    assert len(asked) == len(items) * sum(len(x) for x in ids[0])  # one prompt per item and spelling
    assert fake_vllm[-1][1]["params"] == {"max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    d_vllm = s_vllm[:, :, None] - s_vllm[:, None, :]
    d_hf = s_hf[:, :, None] - s_hf[:, None, :]
    assert torch.allclose(d_vllm, d_hf.float(), atol=1e-4)
    assert judge.identity()["dtype"] == "bfloat16" and judge.reads_tokens and judge.graded


def test_without_vllm_one_line_and_exit_2(monkeypatch, tmp_path, capsys, tiny_lm):
    from rmeval.cli import main
    from rmeval.experiments.responses import load_generator
    from rmeval.experiments.settings import PolicySpec, SamplingSettings

    monkeypatch.setitem(sys.modules, "vllm", None)  # as when it is not installed
    with pytest.raises(ConfigError, match=r"^backend vllm needs the 'vllm' package \(pip install vllm, on a GPU "
                                          r"machine\); without it, serve the model with `vllm serve MODEL` and use "
                                          r"backend openai$"):
        load_generator(PolicySpec(name="p", model=str(tiny_lm), backend="vllm"), SamplingSettings())
    out = tmp_path / "v.jsonl"
    assert main(["variants", "--data", "simulated:n_prompts=4,seed=0", "--task", "paraphrase",
                 "--validity-judge", f"vllm:{tiny_lm}", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("backend vllm needs the 'vllm' package (pip install vllm, on a GPU machine); without it, "
                        "serve the model with `vllm serve MODEL` and use backend openai") and "\n" not in err
    assert not out.exists()
