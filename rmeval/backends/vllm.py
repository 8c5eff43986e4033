"""Models run by vLLM in this process (the ``vllm`` kind of ``rmeval.backends.spec``), on the same
prompt layout and token ids as the ``hf`` kind (the tokenizer's chat template, applied here). Needs
the ``vllm`` package (GPU machines); without it, ``vllm serve MODEL`` and the ``openai`` kinds.

- ``VLLMGenerator``: policy responses and model rewrites (``generator``), sampled by vLLM in
  batches with a seed (greedy at temperature 0).
- ``VLLMJudge``: a judge (``judge``) read, as the ``hf`` kind is, at the next token after the
  question: each letter's score is log Σ_t p(t | prompt) over its single-token spellings t. vLLM
  returns the log-probability of every prompt token (``prompt_logprobs=0``), so each spelling is
  appended to the prompt and read back at the last position; the prompts of one item share their
  prefix (vLLM's prefix cache runs it once). These are log-probabilities where the ``hf`` kind's are
  logits: the two differ by the same normaliser for every letter, so p(A | A or B) = σ(s_A − s_B)
  and the verdict are the same.

Settings read (the engine's, ``vllm.LLM``): ``dtype``, ``seed``, ``trust_remote_code``,
``tensor_parallel_size``, ``gpu_memory_utilization``, ``max_model_len``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rmcore.data.schema import Message
from rmcore.errors import ConfigError
from rmeval.backends import Question
from rmeval.backends.generators import Completion, HFGenerator
from rmeval.backends.local import TokenizedJudge

MISSING = ("backend vllm needs the 'vllm' package (pip install vllm, on a GPU machine); without it, serve the "
           "model with `vllm serve MODEL` and use backend openai")


def vllm_engine(model: str, *, dtype: str = "auto", seed: int = 0, trust_remote_code: bool = False,
                tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                max_model_len: int | None = None) -> Any:
    """``vllm.LLM`` of ``model`` with the engine settings; one line (``ConfigError``) without vllm."""
    try:
        from vllm import LLM
    except ImportError:
        raise ConfigError(MISSING) from None
    return LLM(model=model, dtype=dtype, seed=seed, trust_remote_code=trust_remote_code,
               tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
               **({"max_model_len": max_model_len} if max_model_len else {}))


class VLLMGenerator(HFGenerator):
    """A model run by vLLM in this process: the same prompt layout and token ids as the ``hf``
    backend (the tokenizer's chat template, applied here), vLLM's batched sampling with a seed per
    request batch. Needs the ``vllm`` package (GPU machines)."""

    kind = "vllm"

    def __init__(self, model: str, *, max_new_tokens: int, temperature: float, top_p: float, seed: int = 0,
                 dtype: str = "auto", chat_template_kwargs: dict[str, Any] | None = None,
                 trust_remote_code: bool = False, tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, max_model_len: int | None = None) -> None:
        self.llm = vllm_engine(model, dtype=dtype, seed=seed, trust_remote_code=trust_remote_code,
                               tensor_parallel_size=tensor_parallel_size,
                               gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len)
        self.model = model  # its name: what identifies it (a rewriter's cache key), as an endpoint's model
        self.tokenizer = self.llm.get_tokenizer()
        self.max_new_tokens, self.temperature, self.top_p, self.seed = max_new_tokens, temperature, top_p, seed
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.n_truncated = 0

    def sample(self, inputs: list[str | list[Message]], n: int = 1, max_new_tokens: int | None = None,
               seed: int | None = None) -> list[list[Completion]]:
        from vllm import SamplingParams

        tok = self.tokenizer
        special = not getattr(tok, "chat_template", None)  # a chat template already holds BOS
        prompts = [{"prompt_token_ids": tok(self.wrap(x), add_special_tokens=special)["input_ids"]} for x in inputs]
        greedy = self.temperature == 0
        params = SamplingParams(n=1 if greedy else n, temperature=self.temperature, top_p=1.0 if greedy else self.top_p,
                                max_tokens=max_new_tokens or self.max_new_tokens,
                                seed=self.seed if seed is None else seed)
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [[Completion(o.text.strip(), len(o.token_ids), o.finish_reason == "length") for o in r.outputs]
                for r in outs]

    def close(self) -> None:
        self.llm = None


class VLLMJudge(TokenizedJudge):
    """A causal LM run by vLLM in this process as a judge backend (module doc): the ``hf`` kind's
    questions and token ids, each letter read from vLLM's prompt log-probabilities."""

    kind = "vllm"

    def __init__(self, model: str, **engine: Any) -> None:
        super().__init__()
        self.llm = vllm_engine(model, **engine)
        self.tokenizer = self.llm.get_tokenizer()
        self.model_id = model
        config = self.llm.llm_engine.model_config
        self.max_model_len = int(config.max_model_len)
        self.dtype = str(config.dtype).removeprefix("torch.")  # the dtype it runs in: part of its identity
        self._letter_ids: dict[tuple[str, ...], list[list[int]]] = {}
        self._chat_parts: tuple[str, str] | None = None

    def fit_length(self, requested: int | None) -> int:
        # one position is the letter appended to the prompt
        limit = self.max_model_len - 1
        return limit if requested is None else min(int(requested), limit)

    def letter_scores(self, question: Question, items: Sequence[Any]) -> Any:
        import torch
        from vllm import SamplingParams

        letter_ids = self.letter_ids(question.letters)
        if not items:
            return torch.zeros((0, len(letter_ids)))
        toks = question.encode(self, items)
        self.n_calls += len(items)
        asked = [(i, j, t) for i in range(len(items)) for j, spellings in enumerate(letter_ids) for t in spellings]
        prompts = [{"prompt_token_ids": toks[i].prefix + toks[i].suffix + [t]} for i, _, t in asked]
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        per: list[list[list[float]]] = [[[] for _ in letter_ids] for _ in items]
        for (i, j, t), out in zip(asked, outs):
            per[i][j].append(float(out.prompt_logprobs[-1][t].logprob))
        return torch.tensor([[float(np.logaddexp.reduce(v)) for v in row] for row in per], dtype=torch.float32)

    def close(self) -> None:
        self.llm = None


def make_vllm_generator(spec: Any, *, seed: int = 0, max_new_tokens: int | None = None,
                        temperature: float | None = None, top_p: float | None = None, greedy: bool | None = None,
                        dtype: str = "auto", chat_template_kwargs: dict[str, Any] | None = None,
                        trust_remote_code: bool = False, tensor_parallel_size: int = 1,
                        gpu_memory_utilization: float = 0.9, max_model_len: int | None = None,
                        **_: Any) -> VLLMGenerator:
    """The ``vllm`` kind's generator: ``spec.value`` a local path or Hub id; greedy (temperature 0)
    unless a temperature is given, ``greedy`` forcing it (a rewriter's)."""
    temperature = 0.0 if greedy or temperature is None else temperature
    top_p = 1.0 if top_p is None else top_p
    return VLLMGenerator(spec.value, max_new_tokens=max_new_tokens or 2048, temperature=temperature, top_p=top_p,
                         seed=seed, dtype=dtype, chat_template_kwargs=chat_template_kwargs,
                         trust_remote_code=trust_remote_code, tensor_parallel_size=tensor_parallel_size,
                         gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len)


def make_vllm_judge(spec: Any, *, placement: Any | None = None, seed: int | None = 0, tensor_parallel_size: int = 1,
                    gpu_memory_utilization: float = 0.9, max_model_len: int | None = None, **_: Any) -> VLLMJudge:
    """The ``vllm`` kind's judge: ``spec.value`` a local path or Hub id, in ``placement``'s dtype
    (``auto``: the checkpoint's) with its remote code if allowed; vLLM places it on the GPUs."""
    dtype = getattr(placement, "dtype", "auto") or "auto"
    return VLLMJudge(str(spec.value), dtype=dtype, seed=seed or 0,
                     trust_remote_code=bool(getattr(placement, "trust_remote_code", False)),
                     tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                     max_model_len=max_model_len)
