"""A pairwise judge run locally: a Hugging Face causal LM read from its next-token logits.

The score of a letter after a prompt is the log-sum-exp of the logits of every single-token
spelling of it (bare, after a space, the SentencePiece/BPE space markers), so a tokenizer that
writes " A" after "Verdict:" is read as well as one that writes "A"; nothing is sampled. Batches
are left-padded with explicit position ids, so a padded row sees exactly what it would see alone.
With ``prefix_reuse`` the items of one ``Tokens.group`` run their shared prefix once and only their
suffixes per item: the prefix's KV cache is repeated over the batch of suffixes (right-padded;
causal attention never looks at the padding), the same token ids as a full forward, so the same
scores up to float rounding.
"""

from __future__ import annotations

import inspect
import os
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rmcore.errors import ConfigError
from rmcore.models.batching import length_sorted_batches
from rmcore.models.device import Placement, dtype_name, input_device, resolve_device
from rmcore.models.modeling import load_causal_lm, resolve_max_length, resolve_model_path
from rmeval.backends import JudgeBackend, Question


def single_token_ids(tokenizer: Any, text: str) -> list[int]:
    """Ids of every single-token spelling of ``text`` (bare, after a space, SentencePiece/BPE
    space markers); empty when the tokenizer has none."""
    ids: set[int] = set()
    for t in (text, " " + text):
        enc = tokenizer(t, add_special_tokens=False)["input_ids"]
        if len(enc) == 1:
            ids.add(enc[0])
        elif len(enc) == 2 and tokenizer.decode([enc[0]]).strip() == "":
            ids.add(enc[1])  # space encoded as its own token: the text follows
    vocab = tokenizer.get_vocab()
    for spelling in (text, "Ġ" + text, "▁" + text):
        if spelling in vocab:
            ids.add(vocab[spelling])
    return sorted(ids)


def load_causal_judge(model: str | os.PathLike | Any, *, tokenizer: Any | None = None, device: str | None = None,
                      dtype: str | None = None, trust_remote_code: bool = False,
                      placement: Placement | None = None) -> tuple[Any, Any, str]:
    """(model in eval mode, tokenizer, model id) for a checkpoint path / Hub id or an in-memory model.
    A directory holding a PEFT adapter (adapter_config.json) is loaded on its base model. A model
    loaded here is placed as ``placement`` says (else ``device``/``dtype``, ``auto`` when None:
    rmcore.models.device); an in-memory one is moved only when ``device`` is given."""
    if isinstance(model, (str, os.PathLike)):
        model_id = str(model)
        placement = placement or Placement(device=device or "auto", dtype=dtype or "auto",
                                           trust_remote_code=trust_remote_code)
        lm, tok = load_causal_lm(model_id, placement)
    else:
        if tokenizer is None:
            raise ValueError("an in-memory model needs its tokenizer")
        lm, tok = model, tokenizer
        model_id = getattr(model.config, "_name_or_path", "") or "<in-memory>"
        if device is not None:
            lm.to(resolve_device(device))
    lm.eval()
    return lm, tok, model_id


@torch.inference_mode()
def next_token_logits(model: Any, seqs: list[list[int]], *, batch_size: int, pad_id: int,
                      device: Any, max_tokens: int | None = None) -> torch.Tensor:
    """(n, V) logits of the token after each sequence, in input order. Left padding with explicit
    position ids, so a padded row sees exactly what it would see alone."""
    out: list[torch.Tensor | None] = [None] * len(seqs)
    for idx in length_sorted_batches([len(s) for s in seqs], batch_size, max_tokens):
        width = max(len(seqs[i]) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, width - len(seqs[i]):] = torch.tensor(seqs[i])
            mask[row, width - len(seqs[i]):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kw = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": pos.to(device)}
        try:
            logits = model(**kw, logits_to_keep=1).logits[:, -1]
        except TypeError:  # older remote-code models without logits_to_keep
            logits = model(**kw).logits[:, -1]
        logits = logits.float().cpu()  # one copy per batch, not one per text
        for row, i in enumerate(idx):
            out[i] = logits[row]
    return torch.stack(out) if out else torch.zeros((0, 0))  # type: ignore[arg-type]


def as_user_turn(tokenizer: Any, text: str) -> str:
    """The judge prompt as one user turn of the tokenizer's chat template, where it has one."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)
    return text


class TokenizedJudge(JudgeBackend):
    """A judge backend whose questions are token ids of its own tokenizer (``reads_tokens``) and whose
    scores are log-scores of the letters' single-token spellings (``graded``): the prompt layout
    every such backend shares (the ``hf`` kind's ``LocalBackend``, the ``vllm`` kind's
    ``rmeval.backends.vllm.VLLMJudge``). A subclass sets ``tokenizer``, ``model_id``, ``dtype``,
    ``_letter_ids = {}`` and ``_chat_parts = None``, and says how long a prompt may be (``fit_length``)."""

    reads_tokens = graded = True
    tokenizer: Any
    model_id: str
    dtype: str
    _letter_ids: dict[tuple[str, ...], list[list[int]]]
    _chat_parts: tuple[str, str] | None

    @abstractmethod
    def fit_length(self, requested: int | None) -> int:
        """``requested`` tokens (None: the model's own limit), never past what the model can read."""

    @property
    def label(self) -> str:
        return Path(self.model_id.rstrip("/")).name

    def identity(self, model_id: Callable[[str], str] = str) -> dict[str, Any]:
        """The model (``model_id`` of its path), the dtype it runs in and its chat template around a
        user turn."""
        head, tail = self.chat_parts()
        return {"model": model_id(self.model_id), "dtype": self.dtype, "head": head, "tail": tail}

    def ids(self, text: str) -> list[int]:
        """Token ids of a whole prompt; BOS added only without a chat template (the template holds it)."""
        special = not getattr(self.tokenizer, "chat_template", None)
        return self.tokenizer(text, add_special_tokens=special)["input_ids"]

    def user_turn(self, text: str) -> str:
        return as_user_turn(self.tokenizer, text)

    def chat_parts(self) -> tuple[str, str]:
        """(head, tail) of the chat template around one user turn ("", "" without a template): a
        prompt split in two is ``head + first`` and ``second + tail``."""
        if self._chat_parts is None:
            if getattr(self.tokenizer, "chat_template", None):
                marker = "\x00MARK\x00"
                text = self.tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                                          add_generation_prompt=True)
                head, tail = text.split(marker)
                self._chat_parts = (head, tail)
            else:
                self._chat_parts = ("", "")
        return self._chat_parts

    def letter_ids(self, letters: Sequence[str]) -> list[list[int]]:
        """Per letter, the ids of its single-token spellings; an error when a letter has none or two
        letters share one."""
        key = tuple(letters)
        if key not in self._letter_ids:
            ids = [single_token_ids(self.tokenizer, c) for c in key]
            seen = [i for x in ids for i in x]
            if not all(ids) or len(seen) != len(set(seen)):
                raise ConfigError(f"judge {self.model_id}: tokenizer has no distinct single tokens for "
                                  + " and ".join(f"'{c}'" for c in key))
            self._letter_ids[key] = ids
        return self._letter_ids[key]


class LocalBackend(TokenizedJudge):
    """A local causal LM (a checkpoint path, a Hub id, a PEFT adapter directory, or an in-memory
    model with its tokenizer) as a judge backend. ``batch_size`` sequences (at most ``max_tokens``
    tokens) per forward."""

    kind = "hf"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, batch_size: int = 8,
                 max_tokens: int | None = None, device: str | None = None, dtype: str | None = None,
                 prefix_reuse: bool = False, trust_remote_code: bool = False,
                 placement: Placement | None = None) -> None:
        super().__init__()
        self.model, self.tokenizer, self.model_id = load_causal_judge(
            model, tokenizer=tokenizer, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
            placement=placement)
        self.device = input_device(self.model)
        # the dtype the model runs in ("float32" for auto on the CPU): part of a judge's identity
        self.dtype = dtype_name(next(self.model.parameters()).dtype)
        self.batch_size, self.max_tokens, self.prefix_reuse = batch_size, max_tokens, prefix_reuse
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._letter_ids: dict[tuple[str, ...], list[list[int]]] = {}
        self._chat_parts: tuple[str, str] | None = None

    def fit_length(self, requested: int | None) -> int:
        return resolve_max_length(requested, self.model, self.tokenizer)

    def next_token_logits(self, seqs: list[list[int]]) -> torch.Tensor:
        return next_token_logits(self.model, seqs, batch_size=self.batch_size, pad_id=self.pad_id,
                                 device=self.device, max_tokens=self.max_tokens)

    @torch.inference_mode()
    def generate(self, seqs: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Greedy continuations (new token ids, up to ``max_new_tokens``, cut after EOS) of each
        sequence, in input order; left-padded batches with their attention mask."""
        out: list[list[int]] = [[] for _ in seqs]
        eos = self.tokenizer.eos_token_id
        for idx in length_sorted_batches([len(s) for s in seqs], self.batch_size, self.max_tokens):
            width = max(len(seqs[i]) for i in idx)
            ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, width - len(seqs[i]):] = torch.tensor(seqs[i])
                mask[row, width - len(seqs[i]):] = 1
            gen = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                      max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=self.pad_id,
                                      **({"eos_token_id": eos} if eos is not None else {}))
            for row, i in enumerate(idx):
                new = gen[row, width:].tolist()
                if eos is not None and eos in new:
                    new = new[: new.index(eos)]
                out[i] = new
        return out

    def letter_scores(self, question: Question, items: Sequence[Any]) -> torch.Tensor:
        letter_ids = self.letter_ids(question.letters)
        if not items:
            return torch.zeros((0, len(letter_ids)))
        toks = question.encode(self, items)
        self.n_calls += len(items)

        def reduce(logits: torch.Tensor) -> torch.Tensor:
            return torch.stack([torch.logsumexp(logits[:, ids].float(), dim=-1) for ids in letter_ids], dim=-1)

        out = torch.zeros((len(items), len(letter_ids)))
        groups: dict[Any, list[int]] = {}
        plain = []
        for i, t in enumerate(toks):
            if self.prefix_reuse and t.group is not None:
                groups.setdefault(t.group, []).append(i)
            else:
                plain.append(i)
        if plain:
            out[plain] = reduce(self.next_token_logits([toks[i].prefix + toks[i].suffix for i in plain]))
        for idx in groups.values():
            out[idx] = reduce(self._prefix_logits(toks[idx[0]].prefix, [toks[i].suffix for i in idx]))
        return out

    @torch.inference_mode()
    def _prefix_logits(self, prefix: list[int], suffixes: list[list[int]]) -> torch.Tensor:
        """Next-token logits after prefix + each suffix, the prefix run once (KV cache repeated over
        the batch of suffixes, suffixes right-padded: causal attention never looks at the padding)."""
        # transformers >= 5.2x names the KV cache argument ``cache`` (``past_key_values`` before)
        core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model  # PEFT
        arg = "cache" if "cache" in inspect.signature(core.forward).parameters else "past_key_values"
        out = self.model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        n_pre = len(prefix)
        rows: list[torch.Tensor] = []
        for i in range(0, len(suffixes), self.batch_size):
            chunk = suffixes[i:i + self.batch_size]
            width = max(len(s) for s in chunk)
            ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            for r, s in enumerate(chunk):
                ids[r, :len(s)] = torch.tensor(s)
            cache.batch_repeat_interleave(len(chunk))
            logits = self.model(input_ids=ids.to(self.device),
                                attention_mask=torch.ones((len(chunk), n_pre + width), dtype=torch.long,
                                                          device=self.device),
                                position_ids=(n_pre + torch.arange(width, device=self.device)).expand(len(chunk), -1),
                                use_cache=True, **{arg: cache}).logits
            last = torch.tensor([len(s) - 1 for s in chunk], device=logits.device)
            rows.append(logits[torch.arange(len(chunk), device=logits.device), last].float().cpu())
            cache.crop(-width)  # back to the prefix, batch of one
            cache.batch_select_indices(torch.tensor([0], device=self.device))
        return torch.cat(rows)

    def close(self) -> None:
        self.model = None


def make_local_judge(spec: Any, *, placement: Placement | None = None, batch_size: int = 8, prefix_reuse: bool = False,
                     tokenizer: Any | None = None, **_: Any) -> LocalBackend:
    """The ``hf`` kind's judge (``rmeval.backends.spec``): ``spec.value`` a path, Hub id, ``pkg:``
    model (its package's path) or an in-memory model (with ``tokenizer``), placed as ``placement``
    says (``auto``)."""
    return LocalBackend(local_model(spec.value), tokenizer=tokenizer, batch_size=batch_size,
                        prefix_reuse=prefix_reuse, placement=placement)


def local_model(value: Any) -> Any:
    """A local kind's value as loadable: a ``pkg:`` model its package's path; anything else as it is."""
    return resolve_model_path(value) if isinstance(value, str) else value
