"""Pluggable text generators for the ``paraphrase`` and ``related`` prompt conditions.

A generator turns prompts into new prompt texts: ``generate(prompts, task, n, subtype) ->
{prompt_id: [text, ...]}`` with ``task`` one of ``"paraphrase"`` (the same request reworded, same
meaning) or ``"related"`` (another request close to the original), and for related tasks one of
the study's subtypes (``RELATED_SUBTYPES``, each with its own instruction):

- ``different``: a different request on the same topic, so that an answer to the original would
  not answer it (the study's three related tasks per prompt; the default);
- ``contains``: a larger request that contains the original one and asks for more;
- ``sub_question``: a narrower request that asks only one part of the original.

Backends:

- ``FileGenerator``: texts written beforehand, jsonl rows ``{"prompt_id", "variant", "text"}``,
  optionally ``"subtype"`` (a related task's subtype; one subtype per file, so a condition never
  mixes them) and ``"valid"`` (a paraphrase judged not to keep the original's meaning is
  ``false`` and is left out, and counted in ``n_invalid``; ``rmeval.audit.variants``);
- ``HFGenerator``: a local or Hub causal LM prompted with ``INSTRUCTIONS[task]``;
- ``OpenAIGenerator``: any OpenAI-compatible ``/chat/completions`` endpoint, through the ``openai``
  client (extra ``openai``), whose retries with exponential backoff handle rate limits (429) and
  transient server errors.

The model backends also answer whole conversations (``sample``: the replies as decoded, with their
token counts and whether they stopped at the cap), which is how ``rmeval.experiments.responses`` generates
policy responses on the same backends.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.data.schema import Message, PromptRecord, RatingSet
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_text
from rmcore.models.device import Placement, input_device

TASKS = ("paraphrase", "related")

# Instruction templates; {prompt} is the prompt's last user turn.
RELATED_SUBTYPES = {
    "different": ("Write a new request on the same topic as the following one that asks for something "
                  "different, so that an answer to the original would not answer it. Do not answer either. "
                  "Reply with the new request only.\n\nRequest: {prompt}"),
    "contains": ("Write a new, larger request that contains the following request as one of its parts and "
                 "also asks for something more on the same topic, so that an answer to the original alone "
                 "would not fully answer it. Do not answer either. Reply with the new request only.\n\n"
                 "Request: {prompt}"),
    "sub_question": ("Write a narrower request that asks about only one part of the following request (a "
                     "sub-question of it), so that an answer to the original would cover it but an answer to "
                     "it would not answer the whole original. Do not answer either. Reply with the new "
                     "request only.\n\nRequest: {prompt}"),
}
DEFAULT_SUBTYPE = "different"
INSTRUCTIONS = {
    "paraphrase": ("Rewrite the following request in different words. Keep its meaning, constraints and "
                   "details exactly; do not answer it. Reply with the rewritten request only.\n\n"
                   "Request: {prompt}"),
    "related": RELATED_SUBTYPES[DEFAULT_SUBTYPE],
}


def _check_task(task: str, subtype: str | None = None) -> None:
    if task not in TASKS:
        raise ConfigError(f"generator task must be one of {TASKS}, got '{task}'")
    if subtype is not None and (task != "related" or subtype not in RELATED_SUBTYPES):
        raise ConfigError(f"a subtype is for related tasks, one of {', '.join(RELATED_SUBTYPES)}; "
                          f"got task '{task}', subtype '{subtype}'")


def instruction(task: str, subtype: str | None = None) -> str:
    """The instruction template of ``task`` (and a related task's ``subtype``; default ``different``)."""
    _check_task(task, subtype)
    return RELATED_SUBTYPES[subtype or DEFAULT_SUBTYPE] if task == "related" else INSTRUCTIONS[task]


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


@dataclass(frozen=True)
class Completion:
    """One reply as decoded (not cleaned): its text, its new tokens (None when the backend does not
    say) and whether it stopped at the token cap rather than at an end of turn."""

    text: str
    n_tokens: int | None
    capped: bool


class Generator(ABC):
    kind = "generator"

    @abstractmethod
    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4,
                 subtype: str | None = None) -> dict[str, list[str]]:
        """New prompt texts per prompt_id (at most ``n`` each; a file may hold fewer); ``subtype``:
        a related task's (``RELATED_SUBTYPES``; None: ``different``)."""


@dataclass(frozen=True)
class VariantRow:
    """One row of a variants file."""

    line: int
    prompt_id: str
    variant: int
    text: str
    subtype: str | None = None  # a related task's subtype
    valid: bool | None = None  # a paraphrase's validity verdict; None: not judged
    p_valid: float | None = None  # the judge's probability that it keeps the meaning


class FileGenerator(Generator):
    """Pre-written texts. Rows ``{"prompt_id": str, "variant": int, "text": str}``, optionally
    ``"subtype"`` and ``"valid"``/``"p_valid"`` (see the module doc); variants are ordered by
    ``variant``. Rows judged invalid are left out (``n_invalid`` counts them; ``include_invalid``
    keeps them, to judge a file again). A row naming a prompt that is not in the rating set is an
    error, and so is a file mixing related subtypes."""

    kind = "file"

    def __init__(self, path: str | os.PathLike, *, include_invalid: bool = False) -> None:
        # pandas (rmcore.io.tables): the condition registry that names this class is read at --help
        from rmcore.io.tables import read_jsonl_rows

        self.path = Path(path)
        self.all_rows: list[VariantRow] = []
        for line_no, row in read_jsonl_rows(self.path, "generator file", ("prompt_id", "text")):
            if not isinstance(row["text"], str) or not row["text"].strip():
                raise DataError("text must be a non-empty string", file=str(self.path), row=line_no, field="text")
            sub = row.get("subtype")
            if sub is not None and sub not in RELATED_SUBTYPES:
                raise DataError(f"subtype must be one of {', '.join(RELATED_SUBTYPES)}, got {sub!r}",
                                file=str(self.path), row=line_no, field="subtype")
            valid = row.get("valid")
            if valid is not None and not isinstance(valid, bool):
                raise DataError(f"valid must be true, false or absent, got {valid!r}", file=str(self.path),
                                row=line_no, field="valid")
            p_valid = row.get("p_valid")
            self.all_rows.append(VariantRow(line_no, str(row["prompt_id"]), int(row.get("variant", 0)), row["text"],
                                            sub, valid, None if p_valid is None else float(p_valid)))
        self.subtypes = sorted({r.subtype for r in self.all_rows if r.subtype is not None})
        if len(self.subtypes) > 1:
            raise DataError(f"holds related tasks of several subtypes ({', '.join(self.subtypes)}); a condition "
                            "reads one: write one subtype per file", file=str(self.path), field="subtype")
        self.n_invalid = sum(r.valid is False for r in self.all_rows)
        kept = self.all_rows if include_invalid else [r for r in self.all_rows if r.valid is not False]
        self.rows: list[tuple[int, str, int, str]] = [(r.line, r.prompt_id, r.variant, r.text) for r in kept]

    @property
    def subtype(self) -> str | None:
        """The related subtype the file's rows record (None when they record none)."""
        return self.subtypes[0] if self.subtypes else None

    def generate(self, prompts: list[PromptRecord], task: str, n: int | None = None,
                 subtype: str | None = None) -> dict[str, list[str]]:
        _check_task(task, subtype)
        if task == "paraphrase" and self.subtype is not None:
            raise DataError(f"holds related tasks (subtype {self.subtype}), not paraphrases", file=str(self.path),
                            field="subtype")
        if subtype is not None and (self.subtype or DEFAULT_SUBTYPE) != subtype:
            raise DataError(f"holds related tasks of subtype {self.subtype or DEFAULT_SUBTYPE}, not {subtype}",
                            file=str(self.path), field="subtype")
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
    where ``placement`` says (else ``device``/``dtype``, ``auto`` when None: rmcore.models.device)."""

    kind = "hf"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.8, top_p: float = 0.95, do_sample: bool | None = None, seed: int = 0,
                 device: str | None = None, dtype: str | None = None, batch_size: int = 8,
                 chat_template_kwargs: dict[str, Any] | None = None, placement: Any | None = None) -> None:
        # torch: --help stays cheap
        from rmcore.models.modeling import load_causal_lm

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
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.n_truncated = 0  # inputs cut to fit the model's positions (generate, sample)

    def instruction(self, prompt: PromptRecord, task: str, subtype: str | None = None) -> str:
        return self.wrap(instruction(task, subtype).format(prompt=prompt.last_user_text))

    def wrap(self, text: str | list[Message]) -> str:
        """A user message (or a conversation ending in a user turn) as the model's input: its chat
        template, else the plain layout."""
        # torch: --help stays cheap
        from rmcore.models.formatting import plain_prompt

        messages = [{"role": "user", "content": text}] if isinstance(text, str) else list(text)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                      **self.chat_template_kwargs)
        return plain_prompt(messages)

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4,
                 subtype: str | None = None) -> dict[str, list[str]]:
        template = instruction(task, subtype)
        outs = self.complete([template.format(prompt=self.fit_request(template, p.last_user_text)) for p in prompts], n)
        return {p.prompt_id: o for p, o in zip(prompts, outs)}

    def fit_request(self, template: str, text: str) -> str:
        """``text`` cut at its end so that the wrapped instruction and ``max_new_tokens`` fit the
        model's positions (a longer input would crash the forward pass); ``n_truncated`` counts cuts."""
        # torch: --help stays cheap
        from rmcore.models.modeling import resolve_max_length

        tok = self.tokenizer
        ids = tok(text, add_special_tokens=False)["input_ids"]
        head = len(tok(self.wrap(template.format(prompt="")))["input_ids"])
        budget = resolve_max_length(None, self.model, tok) - self.max_new_tokens - head
        if len(ids) <= budget:
            return text
        self.n_truncated += 1
        return tok.decode(ids[:max(budget, 0)])

    def complete(self, instructions: list[str], n: int = 1, max_new_tokens: int | None = None) -> list[list[str]]:
        """Up to ``n`` cleaned, non-empty replies per instruction (a user message), in input order."""
        return [[t for t in (clean_generation(c.text) for c in row) if t]
                for row in self.sample(instructions, n, max_new_tokens)]

    def sample(self, inputs: list[str | list[Message]], n: int = 1, max_new_tokens: int | None = None,
               seed: int | None = None) -> list[list[Completion]]:
        """``n`` replies (one when greedy) per input, a user message or a conversation, in input
        order; sampling seeded with ``seed`` (default the generator's). An input longer than the
        model's positions less the reply's cap keeps its end (counted in ``n_truncated``)."""
        import torch

        # torch: --help stays cheap
        from rmcore.models.modeling import model_max_length

        sample = self.do_sample if self.do_sample is not None else n > 1
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        cap = max_new_tokens or self.max_new_tokens
        eos = self.model.generation_config.eos_token_id  # one id or several (Qwen's end of turn and text)
        stop = set(eos if isinstance(eos, list) else [eos if eos is not None else tok.eos_token_id])
        limit = model_max_length(self.model, tok)  # an input past the positions would crash the forward
        torch.manual_seed(self.seed if seed is None else seed)
        out: list[list[Completion]] = []
        device = input_device(self.model)
        for i in range(0, len(inputs), self.batch_size):
            texts = [self.wrap(t) for t in inputs[i:i + self.batch_size]]
            enc = [tok(t, add_special_tokens=not getattr(tok, "chat_template", None))["input_ids"] for t in texts]
            if limit and any(len(e) + cap > limit for e in enc):  # keep the end, next to the reply
                self.n_truncated += sum(len(e) + cap > limit for e in enc)
                enc = [e[-max(limit - cap, 1):] for e in enc]
            width = max(len(e) for e in enc)  # left padding so every row continues from its own end
            ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc], device=device)
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=device)
            kw: dict[str, Any] = {"max_new_tokens": cap, "do_sample": sample,
                                  "num_return_sequences": n if sample else 1, "pad_token_id": pad}
            if sample:
                kw.update(temperature=self.temperature, top_p=self.top_p)
            with torch.inference_mode():
                gen = self.model.generate(input_ids=ids, attention_mask=mask, **kw)
            new = gen[:, width:]
            per_row = n if sample else 1
            for j in range(len(texts)):
                row = []
                for k in range(per_row):
                    ids = new[j * per_row + k].tolist()
                    end = next((e for e, t in enumerate(ids) if t in stop), None)
                    row.append(Completion(tok.decode(ids, skip_special_tokens=True).strip(),
                                          len(ids) if end is None else end + 1, end is None and len(ids) >= cap))
                out.append(row)
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
        raise ConfigError("the OpenAI-compatible backend needs the 'openai' package: "
                          "pip install 'matchrm[openai]'") from None
    return openai.OpenAI(base_url=base_url.rstrip("/"), api_key=os.environ.get(api_key_env) or "EMPTY",
                         timeout=timeout, max_retries=max_retries)


class OpenAIGenerator(Generator):
    """OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, TGI, llama.cpp server...) through
    the ``openai`` client; the key comes from the environment variable ``api_key_env`` (may be unset
    for local servers)."""

    kind = "openai"

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1", api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.8, max_tokens: int = 256, timeout: float = 60.0, seed: int | None = 0,
                 max_retries: int = 5, top_p: float | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.model, self.base_url, self.api_key_env = model, base_url.rstrip("/"), api_key_env
        self.temperature, self.max_tokens, self.timeout, self.seed = temperature, max_tokens, timeout, seed
        self.top_p, self.chat_template_kwargs = top_p, dict(chat_template_kwargs or {})
        self.client = openai_client(self.base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries)

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4,
                 subtype: str | None = None) -> dict[str, list[str]]:
        template = instruction(task, subtype)
        outs = self.complete([template.format(prompt=p.last_user_text) for p in prompts], n)
        return {p.prompt_id: o for p, o in zip(prompts, outs)}

    def complete(self, instructions: list[str], n: int = 1, max_new_tokens: int | None = None) -> list[list[str]]:
        """Up to ``n`` cleaned, non-empty replies per instruction (a user message), in input order."""
        return [[t for t in (clean_generation(c.text) for c in row) if t][:n]
                for row in self.sample(instructions, n, max_new_tokens)]

    def sample(self, inputs: list[str | list[Message]], n: int = 1, max_new_tokens: int | None = None,
               seed: int | None = None) -> list[list[Completion]]:
        """The endpoint's ``n`` replies per input (a user message or a conversation), in input order;
        ``chat_template_kwargs`` go in the request body (vLLM's server reads them)."""
        out: list[list[Completion]] = []
        for text in inputs:
            kw: dict[str, Any] = {}
            if (self.seed if seed is None else seed) is not None:
                kw["seed"] = self.seed if seed is None else seed
            if self.top_p is not None:
                kw["top_p"] = self.top_p
            if self.chat_template_kwargs:
                kw["extra_body"] = {"chat_template_kwargs": self.chat_template_kwargs}
            messages = [{"role": "user", "content": text}] if isinstance(text, str) else list(text)
            resp = self.client.chat.completions.create(
                model=self.model, n=n, temperature=self.temperature, max_tokens=max_new_tokens or self.max_tokens,
                messages=messages, **kw)
            out.append([Completion((c.message.content or "").strip(), None, c.finish_reason == "length")
                        for c in resp.choices])
        return out


class SimulatedGenerator(Generator):
    """Variants of the shipped simulated rating set's prompts, written from the simulator's own
    templates (it knows each prompt's topic and difficulty): the demo's offline stand-in for an
    instruction model."""

    kind = "simulated"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def generate(self, prompts: list[PromptRecord], task: str, n: int = 4,
                 subtype: str | None = None) -> dict[str, list[str]]:
        # scipy: --help stays cheap
        from rmcore.data.simulated import prompt_features, simulated_prompt_variants

        _check_task(task, subtype)
        for p in prompts:  # its variants come from the simulator's own templates
            try:
                prompt_features(p)
            except ValueError:
                raise ConfigError(f"the simulated generator writes variants of the simulated set only; prompt "
                                  f"'{p.prompt_id}' is not one of its prompts: use hf:MODEL or openai:MODEL") from None
        if subtype in ("contains", "sub_question"):
            return self._subtype(prompts, subtype, n)
        out: dict[str, list[str]] = {}
        for row in simulated_prompt_variants(RatingSet(list(prompts)), task, n, self.seed):
            out.setdefault(row["prompt_id"], []).append(row["text"])
        return out

    def _subtype(self, prompts: list[PromptRecord], subtype: str, n: int) -> dict[str, list[str]]:
        """``contains``: the original request followed by a related question on its subject;
        ``sub_question``: one of the subject's specific points (a part of how to do the task)."""
        import numpy as np

        # scipy: --help stays cheap
        from rmcore.data.simulated import RELATED, TOPICS, prompt_features

        rng = np.random.default_rng([self.seed, 1 if subtype == "contains" else 2])
        out: dict[str, list[str]] = {}
        for p in prompts:
            subject, task, tips, _ = TOPICS[prompt_features(p).topic]
            if subtype == "contains":
                bodies = [f"{p.last_user_text} {t.format(subject=subject)}" for t in RELATED]
            else:
                bodies = [f"When I {task}, why should I {tip}?" for tip in tips]
            out[p.prompt_id] = [bodies[i] for i in rng.permutation(len(bodies))[:n]]
        return out


def write_variants(generated: dict[str, list[str]], path: str | os.PathLike, *, subtype: str | None = None,
                   validity: dict[str, list[tuple[bool, float | None]]] | None = None) -> Path:
    """Generated texts as a FileGenerator jsonl (``{prompt_id, variant, text}``, plus ``subtype``
    and ``valid``/``p_valid`` when given), atomically, so an expensive generation is done once and
    reused by every audit."""
    lines = []
    for pid, texts in generated.items():
        for v, t in enumerate(texts):
            row: dict[str, Any] = {"prompt_id": pid, "variant": v, "text": t}
            if subtype is not None:
                row["subtype"] = subtype
            if validity is not None:
                row["valid"], row["p_valid"] = validity[pid][v]
            lines.append(json.dumps(row, ensure_ascii=False))
    return atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def _given(**options: Any) -> dict[str, Any]:
    """The options a site gave (None: not given, the class's default holds)."""
    return {k: v for k, v in options.items() if v is not None}


def make_hf_generator(spec: Any, *, seed: int = 0, placement: Placement | None = None,
                      max_new_tokens: int | None = None, temperature: float | None = None, top_p: float | None = None,
                      greedy: bool | None = None, batch_size: int | None = None,
                      chat_template_kwargs: dict[str, Any] | None = None, tokenizer: Any | None = None,
                      **_: Any) -> HFGenerator:
    """The ``hf`` kind's generator (``rmeval.backends.spec``): ``spec.value`` a path, Hub id, ``pkg:``
    model or an in-memory model (with ``tokenizer``); ``greedy`` None: sampled for several variants."""
    from rmcore.models.modeling import resolve_model_path  # torch: --help stays cheap

    model = resolve_model_path(spec.value) if isinstance(spec.value, str) else spec.value
    return HFGenerator(model, seed=seed, **_given(
        placement=placement, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
        do_sample=None if greedy is None else not greedy, batch_size=batch_size,
        chat_template_kwargs=chat_template_kwargs, tokenizer=tokenizer))


def make_openai_generator(spec: Any, *, seed: int | None = 0, max_new_tokens: int | None = None,
                          temperature: float | None = None, top_p: float | None = None, greedy: bool | None = None,
                          chat_template_kwargs: dict[str, Any] | None = None, timeout: float | None = None,
                          **_: Any) -> OpenAIGenerator:
    """The ``openai`` kind's generator: ``spec.value`` the served model's name, at ``base_url``."""
    if temperature is None and greedy:
        temperature = 0.0  # an endpoint is greedy at temperature 0
    return OpenAIGenerator(spec.value, base_url=spec.need("base_url"), seed=seed, **_given(
        api_key_env=spec.setting("api_key_env"), temperature=temperature, max_tokens=max_new_tokens, top_p=top_p,
        chat_template_kwargs=chat_template_kwargs, timeout=timeout))


def make_simulated_generator(spec: Any, *, seed: int = 0, **_: Any) -> SimulatedGenerator:
    """The ``simulated`` kind: variants of the shipped simulated set's prompts."""
    return SimulatedGenerator(seed=seed)


def make_file_generator(spec: Any, *, include_invalid: bool = False, **_: Any) -> FileGenerator:
    """The ``file`` kind's variants: a jsonl file written before (``include_invalid``: rows judged
    invalid kept too, to judge the file again)."""
    return FileGenerator(spec.value, include_invalid=include_invalid)
