"""Rewriters for the stylized perturbations, pluggable over the generator backends, and a cache.

A rewriter turns response texts into their stylized version for a code of ``RESPONSE_PERTURBATIONS``:
``rewrite(code, requests) -> [text | None]`` where None means the rewrite failed (the backend raised,
or returned an empty text); the suite counts those, it never drops them silently.

- ``RuleRewriter``: the codes with a ``rule`` (``ST`` and ``SP``: ``rmeval.perturbations.stylized``), no model;
- ``LMRewriter``: any generator backend with ``complete`` (``rmeval.backends.generators.HFGenerator``, a local
  Hugging Face causal LM; ``OpenAIGenerator``, an OpenAI-compatible endpoint) prompted with the
  code's ``instruction``;
- ``FileRewriter``: rewrites written beforehand, jsonl rows
  ``{"item_id", "perturbation", "side": "chosen"|"rejected", "text"}``.

``CachedRewriter`` keeps every finished rewrite (and every empty answer) in one SQLite file keyed by
sha256(rewriter fingerprint, code, language, text), in the content-addressed cache the scores use
(``rmcore.io.cache``): a rewrite is never asked for twice, and an interrupted run resumes from the last
committed chunk. Backend errors are
not cached, so a later run retries them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.errors import ConfigError, DataError
from rmcore.io.cache import SqliteCache, content_key
from rmeval.backends.spec import OPENAI_API_URL, check_backend, make_backend, offering, parse_backend_spec
from rmeval.perturbations.controlled import (
    DEFAULT_LANGUAGE,
    RESPONSE_PERTURBATIONS,
    STYLE_INSTRUCTIONS,
    item_seed,
    rule_codes,
)

log = logging.getLogger(__name__)

SIDES = ("chosen", "rejected")


@dataclass(frozen=True)
class RewriteRequest:
    item_id: str
    side: str  # "chosen" | "rejected"
    text: str


class Rewriter(ABC):
    kind = "rewriter"

    @property
    def codes(self) -> tuple[str, ...]:
        """The stylized codes it rewrites: every one registered (``RESPONSE_PERTURBATIONS``)."""
        return tuple(RESPONSE_PERTURBATIONS)

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Stable id of the backend and every setting that changes a rewrite."""

    @abstractmethod
    def rewrite(self, code: str, requests: list[RewriteRequest]) -> list[str | None]:
        """The rewritten text per request, None where the rewrite failed."""

    def check(self, code: str) -> None:
        if code not in self.codes:
            raise ConfigError(f"the {self.kind} rewriter cannot do '{code}'; it does {', '.join(self.codes)}")


class RuleRewriter(Rewriter):
    """Rule-based ``ST``/``SP``; ST's word choice is seeded per (item, side)."""

    kind = "rule"

    def __init__(self, seed: int = 0, st_rate: float = 0.5) -> None:
        """``st_rate``: the ``rate`` of a rule that takes one (ST's share of words replaced)."""
        self.seed, self.st_rate = seed, st_rate

    @property
    def codes(self) -> tuple[str, ...]:
        """The codes with a rule (``ResponsePerturbation.rule``)."""
        return tuple(rule_codes())

    @property
    def fingerprint(self) -> str:
        return f"rule:seed={self.seed}:st_rate={self.st_rate}"

    def rewrite(self, code: str, requests: list[RewriteRequest]) -> list[str | None]:
        self.check(code)
        p = RESPONSE_PERTURBATIONS.lookup(code)
        assert p.rule is not None  # (check: a code with a rule)
        opts = {"rate": self.st_rate} if "rate" in p.options else {}
        return [p.rule(r.text, np.random.default_rng(item_seed(self.seed, f"{code}:{r.side}", r.item_id)), **opts)
                or None for r in requests]


class LMRewriter(Rewriter):
    """A generator backend asked, per text, ``STYLE_INSTRUCTIONS[code]`` followed by the text."""

    kind = "lm"

    def __init__(self, generator: Any, *, language: str = DEFAULT_LANGUAGE, max_new_tokens: int = 1024,
                 batch_size: int = 8) -> None:
        if not hasattr(generator, "complete"):
            raise ConfigError(f"generator {type(generator).__name__} cannot complete free instructions")
        self.generator, self.language = generator, language
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    @property
    def fingerprint(self) -> str:
        g = self.generator
        model = getattr(g, "model", None)
        ident = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "?")
        return json.dumps({"kind": getattr(g, "kind", "?"), "model": str(ident),
                           "base_url": getattr(g, "base_url", None), "max_new_tokens": self.max_new_tokens,
                           "temperature": getattr(g, "temperature", None), "seed": getattr(g, "seed", None),
                           "instructions": STYLE_INSTRUCTIONS}, sort_keys=True)

    def instruction(self, code: str, text: str) -> str:
        template = RESPONSE_PERTURBATIONS.lookup(code).instruction
        return f"{template.format(language=self.language)}\n\nText:\n{text}"

    def cache_parts(self, code: str) -> tuple[str, ...]:
        """What a cached rewrite of ``code`` is keyed by beyond the fingerprint: a registered code's
        instruction (the fingerprint holds the built-in ones, ``STYLE_INSTRUCTIONS``)."""
        return () if code in STYLE_INSTRUCTIONS else (RESPONSE_PERTURBATIONS.lookup(code).instruction,)

    def rewrite(self, code: str, requests: list[RewriteRequest]) -> list[str | None]:
        self.check(code)
        out: list[str | None] = []
        for i in range(0, len(requests), self.batch_size):
            chunk = requests[i:i + self.batch_size]
            try:
                replies = self.generator.complete([self.instruction(code, r.text) for r in chunk], 1,
                                                  max_new_tokens=self.max_new_tokens)
            except Exception as e:  # noqa: BLE001 -- any backend failure is a counted failed rewrite
                log.warning("%s rewrite of %d texts failed: %s", code, len(chunk), e)
                out += [None] * len(chunk)
                continue
            out += [(rep[0] if rep and rep[0].strip() else "") for rep in replies]
        return out


class FileRewriter(Rewriter):
    """Rewrites written beforehand; a missing (item, side) is a failed rewrite, a row naming an
    unknown perturbation or side is an error naming the file, row and field."""

    kind = "file"

    def __init__(self, path: str | os.PathLike) -> None:
        # pandas: --help stays cheap
        from rmcore.io.tables import read_jsonl_rows

        self.path = Path(path)
        self.rows: dict[tuple[str, str, str], str] = {}
        for line_no, row in read_jsonl_rows(self.path, "rewrite file", ("item_id", "perturbation", "side", "text")):
            code = str(row["perturbation"]).split("@")[0]
            if code not in RESPONSE_PERTURBATIONS:
                raise DataError(f"unknown stylized perturbation '{row['perturbation']}'", file=str(self.path),
                                row=line_no, field="perturbation")
            if row["side"] not in SIDES:
                raise DataError(f"side must be one of {SIDES}", file=str(self.path), row=line_no, field="side")
            key3 = (code, str(row["item_id"]), row["side"])
            if key3 in self.rows:
                raise DataError(f"duplicate rewrite of item '{row['item_id']}' ({row['side']}, {code})",
                                file=str(self.path), row=line_no, field="item_id")
            self.rows[key3] = row["text"] if isinstance(row["text"], str) else ""
        self._hash = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    @property
    def fingerprint(self) -> str:
        return f"file:{self.path.resolve()}#{self._hash}"

    def rewrite(self, code: str, requests: list[RewriteRequest]) -> list[str | None]:
        self.check(code)
        return [self.rows.get((code, r.item_id, r.side)) for r in requests]


class RewriteCache(SqliteCache):
    """key -> (code, rewritten text; '' for an empty answer): table ``rewrites``."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path, "rewrites", ("code TEXT", "text TEXT"))


class CachedRewriter(Rewriter):
    """Wraps a rewriter: texts already rewritten are served from the cache; identical texts within a
    call are asked once. ``asked`` counts texts sent to the backend."""

    def __init__(self, inner: Rewriter, cache: RewriteCache | str | os.PathLike, *, chunk_size: int = 64) -> None:
        self.inner = inner
        self.cache = cache if isinstance(cache, RewriteCache) else RewriteCache(cache)
        self.chunk_size, self.asked = chunk_size, 0
        self.kind = inner.kind

    @property
    def codes(self) -> tuple[str, ...]:
        return self.inner.codes

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def key(self, code: str, text: str) -> str:
        extra = self.inner.cache_parts(code) if isinstance(self.inner, LMRewriter) else ()
        return content_key(self.fingerprint, code, getattr(self.inner, "language", ""), text, *extra)

    def rewrite(self, code: str, requests: list[RewriteRequest]) -> list[str | None]:
        self.inner.check(code)

        def compute(chunk: list[RewriteRequest]) -> list[tuple[str, str] | None]:
            # errors (None) are not stored: a later run retries them
            return [None if t is None else (code, t.strip()) for t in self.inner.rewrite(code, chunk)]

        keys = [self.key(code, r.text) for r in requests]
        rows, fresh = self.cache.fill(keys, requests, compute, chunk_size=self.chunk_size)
        self.asked += len(fresh)
        return [(rows[k][1] or None) if k in rows else None for k in keys]

    def close(self) -> None:
        self.cache.close()


# the rewriter factories of the backend kinds `rule` and `file` (rmeval.backends.spec names them);
# every kind that answers instructions rewrites as an LMRewriter
def make_rule_rewriter(spec: Any, *, seed: int = 0, **_: Any) -> RuleRewriter:
    return RuleRewriter(seed=seed)


def make_file_rewriter(spec: Any, **_: Any) -> FileRewriter:
    return FileRewriter(spec.value)


def rewriter_kinds() -> list[str]:
    """The backend kinds a rewriter spec may name: those with a rewriter of their own, then those
    that answer instructions (a model rewriter)."""
    own = offering("rewriter")
    return own + [k for k in offering("generator") if k not in own]


def make_rewriter(spec: str, *, seed: int = 0, language: str = DEFAULT_LANGUAGE, base_url: str | None = None,
                  max_new_tokens: int = 1024, cache_path: str | os.PathLike | None = None) -> Rewriter:
    """``rule`` | ``file:PATH`` | a model: ``hf:MODEL``, ``openai:MODEL`` (at ``base_url``, else
    OpenAI's) or any backend kind that answers instructions (``rmeval.backends.spec``), asked greedily;
    model-backed rewriters are cached in ``cache_path`` when given."""
    s = parse_backend_spec(spec, what="--rewriter", spelled={"base_url": "--base-url"},
                           defaults={"base_url": OPENAI_API_URL}, base_url=base_url)
    backend = check_backend("rewriter", s, kinds=rewriter_kinds())
    if "rewriter" in backend.makes:
        return make_backend("rewriter", s, seed=seed)
    generator = make_backend("generator", s, seed=seed, greedy=True, max_new_tokens=max_new_tokens)
    rw: Rewriter = LMRewriter(generator, language=language, max_new_tokens=max_new_tokens)
    return CachedRewriter(rw, cache_path) if cache_path is not None else rw
