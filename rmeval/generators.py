"""Pluggable text generators for the ``paraphrase`` and ``related`` prompt conditions.

A generator turns prompts into new prompt texts: ``generate(prompts, task, n) -> {prompt_id:
[text, ...]}`` with ``task`` one of ``"paraphrase"`` (the same request reworded, same meaning)
or ``"related"`` (a different request on the same topic). Backends:

- ``FileGenerator``: texts written beforehand, jsonl rows ``{"prompt_id", "variant", "text"}``;
- ``HFGenerator``: a local or Hub causal LM prompted with ``INSTRUCTIONS[task]``;
- ``OpenAIGenerator``: any OpenAI-compatible ``/chat/completions`` endpoint, through the ``openai``
  client (extra ``openai``), whose retries with exponential backoff handle rate limits (429) and
  transient server errors.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmcore.data.schema import PromptRecord
from rmcore.errors import ConfigError, DataError

TASKS = ("paraphrase", "related")

# Instruction templates; {prompt} is the prompt's last user turn.
INSTRUCTIONS = {
    "paraphrase": ("Rewrite the following request in different words. Keep its meaning, constraints and "
                   "details exactly; do not answer it. Reply with the rewritten request only.\n\n"
                   "Request: {prompt}"),
    "related": ("Write a new request on the same topic as the following one that asks for something "
                "different, so that an answer to the original would not answer it. Do not answer either. "
                "Reply with the new request only.\n\nRequest: {prompt}"),
}


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ConfigError(f"generator task must be one of {TASKS}, got '{task}'")


def clean_generation(text: str) -> str:
    """Strip whitespace, wrapping quotes and a 'Request:' echo from a generated prompt."""
    for _ in range(2):  # quotes around a "Request: ..." echo, or the other way round
        text = text.strip()
        for prefix in ("Request:", "Rewritten request:", "New request:"):
            if text.lower().startswith(prefix.lower()):
                text = text[len(prefix):].strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
            text = text[1:-1].strip()
    return text


class Generator(ABC):
    kind = "generator"

    @abstractmethod
    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4) -> dict[str, list[str]]:
        """New prompt texts per prompt_id (at most ``n`` each; a file may hold fewer)."""


class FileGenerator(Generator):
    """Pre-written texts. Rows ``{"prompt_id": str, "variant": int, "text": str}``; variants are
    ordered by ``variant``. A row naming a prompt that is not in the rating set is an error."""

    kind = "file"

    def __init__(self, path: str | os.PathLike) -> None:
        from rmcore.io import read_jsonl_rows

        self.path = Path(path)
        self.rows: list[tuple[int, str, int, str]] = []  # (line, prompt_id, variant, text)
        for line_no, row in read_jsonl_rows(self.path, "generator file", ("prompt_id", "text")):
            if not isinstance(row["text"], str) or not row["text"].strip():
                raise DataError("text must be a non-empty string", file=str(self.path), row=line_no, field="text")
            self.rows.append((line_no, str(row["prompt_id"]), int(row.get("variant", 0)), row["text"]))

    def generate(self, prompts: list[PromptRecord], task: str, n: int | None = None) -> dict[str, list[str]]:
        _check_task(task)
        known = {p.prompt_id for p in prompts}
        per: dict[str, list[tuple[int, str]]] = {}
        for line_no, pid, variant, text in self.rows:
            if pid not in known:
                raise DataError(f"unknown prompt_id '{pid}' (not in the rating set)", file=str(self.path),
                                row=line_no, field="prompt_id")
            per.setdefault(pid, []).append((variant, text))
        out = {pid: [t for _, t in sorted(v, key=lambda x: x[0])] for pid, v in per.items()}
        return {pid: (v[:n] if n else v) for pid, v in out.items()}


class HFGenerator(Generator):
    """A causal LM (local path or Hub id). Greedy for one variant; sampled (seeded) for several,
    since greedy decoding would return the same text n times. A model loaded from a path runs
    where ``placement`` says (else ``device``/``dtype``, ``auto`` when None: rmcore.device)."""

    kind = "hf"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.8, top_p: float = 0.95, do_sample: bool | None = None, seed: int = 0,
                 device: str | None = None, dtype: str | None = None, batch_size: int = 8,
                 placement: Any | None = None) -> None:
        from rmcore.device import Placement
        from rmcore.modeling import load_causal_lm

        if isinstance(model, (str, os.PathLike)):
            self.model, self.tokenizer = load_causal_lm(
                model, placement or Placement(device=device or "auto", dtype=dtype or "auto"))
        else:
            if tokenizer is None:
                raise ValueError("an in-memory model needs its tokenizer")
            self.model, self.tokenizer = model, tokenizer
            if device is not None:
                self.model.to(device)
        self.model.eval()
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.do_sample, self.seed, self.batch_size = do_sample, seed, batch_size

    def instruction(self, prompt: PromptRecord, task: str) -> str:
        return self.wrap(INSTRUCTIONS[task].format(prompt=prompt.last_user_text))

    def wrap(self, text: str) -> str:
        """A user message as the model's input: its chat template, else the plain layout."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                      add_generation_prompt=True)
        return f"User: {text}\n\nAssistant:"

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4) -> dict[str, list[str]]:
        _check_task(task)
        outs = self.complete([INSTRUCTIONS[task].format(prompt=p.last_user_text) for p in prompts], n)
        return {p.prompt_id: o for p, o in zip(prompts, outs)}

    def complete(self, instructions: list[str], n: int = 1, max_new_tokens: int | None = None) -> list[list[str]]:
        """Up to ``n`` cleaned, non-empty replies per instruction (a user message), in input order."""
        import torch

        sample = self.do_sample if self.do_sample is not None else n > 1
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        torch.manual_seed(self.seed)
        out: list[list[str]] = []
        from rmcore.device import input_device

        device = input_device(self.model)
        for i in range(0, len(instructions), self.batch_size):
            texts = [self.wrap(t) for t in instructions[i:i + self.batch_size]]
            enc = [tok(t, add_special_tokens=not getattr(tok, "chat_template", None))["input_ids"] for t in texts]
            width = max(len(e) for e in enc)  # left padding so every row continues from its own end
            ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc], device=device)
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=device)
            kw: dict[str, Any] = {"max_new_tokens": max_new_tokens or self.max_new_tokens, "do_sample": sample,
                                  "num_return_sequences": n if sample else 1, "pad_token_id": pad}
            if sample:
                kw.update(temperature=self.temperature, top_p=self.top_p)
            with torch.inference_mode():
                gen = self.model.generate(input_ids=ids, attention_mask=mask, **kw)
            new = gen[:, width:]
            per_row = n if sample else 1
            for j in range(len(texts)):
                outs = [clean_generation(tok.decode(new[j * per_row + k], skip_special_tokens=True))
                        for k in range(per_row)]
                out.append([t for t in outs if t])
        return out


def openai_client(base_url: str, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0,
                  max_retries: int = 5) -> Any:
    """An ``openai.OpenAI`` client for an OpenAI-compatible endpoint (OpenAI, vLLM, TGI, llama.cpp
    server...). The key comes from ``api_key_env``; local servers usually need none, so a dummy is sent.
    The client retries 408/409/429/5xx answers and connection errors with exponential backoff,
    honouring the server's Retry-After."""
    try:
        import openai
    except ImportError:
        raise ConfigError("the OpenAI-compatible backend needs the 'openai' package: pip install 'matchrm[openai]'") from None
    return openai.OpenAI(base_url=base_url.rstrip("/"), api_key=os.environ.get(api_key_env) or "EMPTY",
                         timeout=timeout, max_retries=max_retries)


class OpenAIGenerator(Generator):
    """OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, TGI, llama.cpp server...) through
    the ``openai`` client; the key comes from the environment variable ``api_key_env`` (may be unset
    for local servers)."""

    kind = "openai"

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1", api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.8, max_tokens: int = 256, timeout: float = 60.0, seed: int | None = 0,
                 max_retries: int = 5) -> None:
        self.model, self.base_url, self.api_key_env = model, base_url.rstrip("/"), api_key_env
        self.temperature, self.max_tokens, self.timeout, self.seed = temperature, max_tokens, timeout, seed
        self.client = openai_client(self.base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries)

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4) -> dict[str, list[str]]:
        _check_task(task)
        outs = self.complete([INSTRUCTIONS[task].format(prompt=p.last_user_text) for p in prompts], n)
        return {p.prompt_id: o for p, o in zip(prompts, outs)}

    def complete(self, instructions: list[str], n: int = 1, max_new_tokens: int | None = None) -> list[list[str]]:
        """Up to ``n`` cleaned, non-empty replies per instruction (a user message), in input order."""
        out: list[list[str]] = []
        for text in instructions:
            kw: dict[str, Any] = {"seed": self.seed} if self.seed is not None else {}
            resp = self.client.chat.completions.create(
                model=self.model, n=n, temperature=self.temperature, max_tokens=max_new_tokens or self.max_tokens,
                messages=[{"role": "user", "content": text}], **kw)
            texts = [clean_generation(c.message.content or "") for c in resp.choices]
            out.append([t for t in texts if t][:n])
        return out


class SimulatedGenerator(Generator):
    """Variants of the shipped simulated rating set's prompts, written from the simulator's own
    templates (it knows each prompt's topic and difficulty): the demo's offline stand-in for an
    instruction model."""

    kind = "simulated"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4) -> dict[str, list[str]]:
        from rmcore.data.schema import RatingSet
        from rmcore.data.simulated import simulated_prompt_variants

        _check_task(task)
        out: dict[str, list[str]] = {}
        for row in simulated_prompt_variants(RatingSet(list(prompts)), task, n, self.seed):
            out.setdefault(row["prompt_id"], []).append(row["text"])
        return out


def write_variants(generated: dict[str, list[str]], path: str | os.PathLike) -> Path:
    """Generated texts as a FileGenerator jsonl (``{prompt_id, variant, text}``), atomically, so
    an expensive generation is done once and reused by every audit."""
    from rmcore.io import atomic_write_text

    lines = [json.dumps({"prompt_id": pid, "variant": v, "text": t}, ensure_ascii=False)
             for pid, texts in generated.items() for v, t in enumerate(texts)]
    return atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


GENERATORS: dict[str, Callable[..., Generator]] = {
    "file": FileGenerator,
    "hf": HFGenerator,
    "openai": OpenAIGenerator,
    "simulated": SimulatedGenerator,
}


def make_generator(kind: str, **kwargs: Any) -> Generator:
    if kind not in GENERATORS:
        raise ConfigError(f"unknown generator '{kind}'; known: {', '.join(sorted(GENERATORS))}")
    return GENERATORS[kind](**kwargs)
