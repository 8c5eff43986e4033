"""Sequence-classifier reward model scorer (any local or Hub checkpoint, or an in-memory model).

Text layout is exactly the training layout (``rmcore.models.formatting.encode_example``): the chat
template where the tokenizer has one; otherwise a sentence pair (BERT-like: plain-format
conversation | response) or one plain sequence (``User: ...\\n\\nAssistant: <response>``). The prompt
is cut from the left when the text exceeds ``max_length``; every truncation is counted in
``self.truncation`` and ``self.last_flags``. Batches are sorted by length (``score_encoded``), so
padding is small and the scores do not depend on the batch size.

A checkpoint on disk or on the Hub is loaded by its reward-model loader (``rmeval.scoring.loaders``:
a classifier, a remote-code model, a backbone with a value head; ``--reward-head`` picks one output
of several) and placed as its ``Placement`` says (``auto``: the GPU in bfloat16 where there is one,
the CPU in float32 where there is not); a checkpoint without a trained head is refused.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

import numpy as np
import torch

from rmcore.models.device import Placement, describe, dtype_name, input_device
from rmcore.models.formatting import Encoded, drop_markers, encode_example, layout
from rmcore.models.modeling import ensure_pad_token, first_logit, resolve_max_length, score_encoded
from rmcore.models.prefix_scoring import classifier_scores, conversation_key, supports_prefix_scoring
from rmeval.scoring.base import ScoreItem, Scorer, fingerprint_of, model_identity
from rmeval.scoring.loaders import load_reward


class SeqClassifierScorer(Scorer):
    kind = "seq_classifier"
    reads = frozenset({"reward_head", "loader", "drop_special"})

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, max_length: int | None = None,
                 batch_size: int = 32, max_tokens: int | None = None, device: str | None = None,
                 dtype: str | None = None, padding_side: str = "right", trust_remote_code: bool = False,
                 shared_prompt: bool = True, placement: Placement | None = None, reward_head: str | int | None = None,
                 loader: str | None = None, drop_special: tuple[str, ...] = ()) -> None:
        """``model`` is a path / Hub id, or an already loaded model (then pass ``tokenizer``).
        ``placement`` (else one from ``device``, ``dtype`` and ``trust_remote_code``, each ``auto``
        when None): where a loaded model runs; an in-memory model is moved only when ``device`` is
        given. ``reward_head``/``loader``: see ``rmeval.scoring.loaders``.
        ``max_length`` None: the model's own limit (position embeddings, tokenizer maximum).
        ``shared_prompt``: decoder models encode each prompt once (rmcore.models.prefix_scoring); same scores.
        ``drop_special``: markers left out of every input, ``bos`` and/or ``eos``
        (``rmcore.models.formatting.drop_markers``); ``markers_dropped`` counts the texts that had one."""
        super().__init__()
        self.read, self.prefix_head, self.loader, self.head = first_logit, 0, "classifier", None
        if isinstance(model, (str, os.PathLike)):
            self.model_id = str(model)
            placement = placement or Placement(device=device or "auto", dtype=dtype or "auto",
                                               trust_remote_code=trust_remote_code)
            rm = load_reward(self.model_id, placement, reward_head=reward_head, loader=loader)
            self.model, self.tokenizer, self.read = rm.model, rm.tokenizer, rm.read
            self.prefix_head, self.loader, self.head, self._record = rm.prefix_head, rm.loader, rm.head, rm.record()
            self._owned = True
        else:
            if tokenizer is None:
                raise ValueError("an in-memory model needs its tokenizer")
            self.model, self.tokenizer = model, tokenizer
            self.model_id = getattr(getattr(model, "config", None), "_name_or_path", "") or "<in-memory>"
            self._owned = False
            # the trainer's pad-token rule, never EOS (a decoder would read the score one token
            # early); an in-memory model is not resized, so a tokenizer without pad or unk is an error
            ensure_pad_token(self.tokenizer)
            if getattr(self.model, "config", None) is not None:
                self.model.config.pad_token_id = self.tokenizer.pad_token_id
            if device is not None:
                self.model.to(device)
            self._record = {}
        self.device = input_device(self.model)
        self.max_length = resolve_max_length(max_length, self.model, self.tokenizer)
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.padding_side = padding_side
        self.dtype = dtype_name(next(self.model.parameters()).dtype)
        self.shared_prompt = shared_prompt
        self.drop_special = tuple(sorted(set(drop_special)))
        self.markers_dropped = {m: 0 for m in self.drop_special}
        # the reward server turns this on: a text far over max_length is cut by characters before
        # it is tokenised (rmcore.models.formatting.encode_example), so a 20 MB text costs what 20 kB does
        self.cut_long = False
        self.layout = layout(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id

    def describe(self) -> dict[str, Any]:
        return self._record or {**describe(self.model), "loader": self.loader, "reward_head": self.head}

    @property
    def name(self) -> str:
        return f"seq_classifier:{os.path.basename(self.model_id.rstrip('/')) or self.model_id}"

    @property
    def fingerprint(self) -> str:
        # padding side and batching do not change scores, so they are not part of the identity;
        # an in-memory model (e.g. mid-training) is only identical to itself within this process
        ident = model_identity(self.model_id) if self._owned else f"in-memory:{id(self.model)}"
        how = ({"loader": self.loader, "reward_head": self.head}
               if (self.loader, self.head) != ("classifier", None) else {})
        settings = {"model": ident, "max_length": self.max_length, "layout": self.layout, "dtype": self.dtype, **how}
        if self.drop_special:  # only then: scores of the full input keep their cache keys
            settings["drop_special"] = list(self.drop_special)
        return fingerprint_of(self.kind, settings)

    @classmethod
    def from_settings(cls, settings: Any, **common: Any) -> SeqClassifierScorer:
        return cls(model=settings.model, reward_head=settings.reward_head, loader=settings.loader,
                   drop_special=tuple(settings.drop_special), **common)

    def input_keys(self, items: list[Any]) -> list[Hashable]:
        """The token ids (and token types) it reads of each item: chat template, truncation and all."""
        return [(tuple(e.input_ids), tuple(e.token_type_ids or ())) for e in self.encode(items)]

    def encode(self, items: list[ScoreItem]) -> list[Encoded]:
        enc = [encode_example(self.tokenizer, list(m), r, self.max_length, cut_long=self.cut_long) for m, r in items]
        for marker in self.drop_special:
            cut = [drop_markers(e, self.tokenizer, (marker,)) for e in enc]
            self.markers_dropped[marker] += sum(len(c) < len(e) for c, e in zip(cut, enc))
            enc = cut
        return enc

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        return self.score_encodings(self.encode(items), [m for m, _ in items])

    def score_encodings(self, enc: list[Encoded], conversations: list[Any]) -> np.ndarray:
        """``score`` for items already encoded by ``encode`` (the reward server encodes each request
        as it arrives and scores many requests in one forward)."""
        flags = np.array([[e.prompt_truncated, e.response_truncated] for e in enc], dtype=bool).reshape(-1, 2)
        if self.shared_prompt and self.prefix_head is not None and supports_prefix_scoring(self.model):
            scores = classifier_scores(self.model, enc, [conversation_key(m) for m in conversations],
                                       pad_id=self.pad_id, batch_size=self.batch_size, max_tokens=self.max_tokens,
                                       device=self.device, padding_side=self.padding_side, head=self.prefix_head)
        else:
            scores = score_encoded(self.model, enc, pad_id=self.pad_id, batch_size=self.batch_size,
                                   max_tokens=self.max_tokens, device=self.device, padding_side=self.padding_side,
                                   read=self.read)
        self._record_flags(flags)
        return scores

    def close(self) -> None:
        if self._owned:
            del self.model
            self.model = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
