"""Pairwise elicitation: for each item (query, response A, response B), judge and attribute, one
call in each presentation order, mapped back to the original A/B.

Prompt layout puts the item first and the question last (``ITEM_TEMPLATE`` then ``*_QUESTION``):
the item -- query and both responses in one order -- is the long part of every call and the same
for every attribute, so a local model computes its KV cache once and runs only the short question
per attribute (``LocalPairJudge(prefix_reuse=True)``), and an endpoint such as vLLM reuses it
through its own prefix cache.

A judge (a backend of the pairwise-judge protocol, ``rmeval.backends``) answers, per call, the letter it
names: +1 the first-shown response ("A"), -1 the second
("B"), 0 no resolved direction, NaN a malformed answer (counted; it becomes direction 0, never a
direction). The runner maps letters back: in order BA the first-shown response is the original B.

Work is sharded (item i goes to shard i mod n), every answered chunk is committed to a SQLite score
cache (``rmeval.scoring.cache``) before the next starts, and a shard's judgments are written
atomically from the cache at the end, as one int8 array (``rmeval.judges.store``: a ``.npz`` per
shard; ``merge_shards`` places the shards in one judgment store): a killed run restarts where it
stopped, with nothing lost, duplicated or asked twice.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rmcore.console.progress import Progress
from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json
from rmcore.io.tables import atomic_write_table
from rmcore.models.device import Placement
from rmeval.backends import JudgeBackend, Question, Tokens
from rmeval.backends.endpoint import EndpointBackend
from rmeval.backends.local import LocalBackend
from rmeval.backends.spec import make_backend, parse_backend_spec
from rmeval.scoring.base import fingerprint_of, model_identity
from rmeval.scoring.cache import ScoreCache, cache_key
from rmeval.scoring.judge import conversation_text

from .inventory import OVERALL, Attribute
from .store import (
    JudgmentStore,
    concat_stores,
    load_store,
    read_shard,
    store_to_table,
    write_shard,
    write_store,
)
from .tables import ORDERS, load_items

ITEM_TEMPLATE = ("You are comparing two responses to the same query.\n\n[Query]\n{query}\n\n"
                 "[Response A]\n{first}\n\n[Response B]\n{second}\n\n")
ATTRIBUTE_QUESTION = ("Question: which response has more of this attribute -- {definition}? This asks which has "
                      "more of it, not which is better. Answer with a single letter, A or B.\nAnswer:")
OVERALL_QUESTION = ("Question: which response is better overall as a reply to the query? "
                    "Answer with a single letter, A or B.\nAnswer:")
RUBRIC_QUESTION = ("Question: which response is better overall as a reply to the query? Judge it by these "
                   "criteria: {criteria}. Answer with a single letter, A or B.\nAnswer:")


def questions_for(attributes: list[Attribute], *, overall: bool = True,
                  overall_question: str = OVERALL_QUESTION) -> dict[str, str]:
    """attribute name -> question text (``overall`` last)."""
    q = {a.name: ATTRIBUTE_QUESTION.format(definition=a.definition) for a in attributes}
    if overall:
        q[OVERALL] = overall_question
    return q


def rubric_question(attributes: list[Attribute]) -> str:
    """The overall question with ``attributes`` named as criteria (the rubric-prompting baseline)."""
    return RUBRIC_QUESTION.format(criteria="; ".join(a.definition for a in attributes))


@dataclass(frozen=True)
class Call:
    item_id: str
    attribute: str
    order: str  # AB or BA
    prefix: str  # the item in this order
    question: str

    def rendered(self) -> str:
        return json.dumps([self.prefix, self.question], ensure_ascii=False)


def item_prefix(row: Any, order: str) -> str:
    first, second = (row.response_a, row.response_b) if order == "AB" else (row.response_b, row.response_a)
    return ITEM_TEMPLATE.format(query=row.query, first=first, second=second)


def build_calls(items: pd.DataFrame, questions: dict[str, str]) -> list[Call]:
    """Item by item, order by order, every question: calls sharing a prefix are adjacent."""
    return [Call(row.item_id, attr, order, item_prefix(row, order), q)
            for row in items.itertuples(index=False) for order in ORDERS for attr, q in questions.items()]


class CallQuestion(Question):
    """Elicitation calls as a question of the pairwise-judge protocol (``rmeval.backends``): the item
    then the question, one user turn. For a local model the item (head of the chat template + the
    item) and the question (+ the template's tail) are tokenised apart, so every question on an item
    shares its token ids and its KV cache (``Tokens.group``: the item in this order); a call longer
    than ``max_length`` keeps the end of the item, next to the question (``n_truncated`` counts
    them). An endpoint's reply is read by ``rmeval.backends.read_letter``."""

    letters = ("A", "B")

    def __init__(self, max_length: int = 4096) -> None:
        self.max_length, self.n_truncated = max_length, 0
        self._prefix_ids: dict[str, list[int]] = {}

    def text(self, call: Call) -> str:
        return call.prefix + call.question

    def encode_one(self, backend: Any, call: Call) -> tuple[list[int], list[int]]:
        """(prefix ids, question ids); the concatenation is the full call for both code paths."""
        head, tail = backend.chat_parts()
        if call.prefix not in self._prefix_ids:
            if len(self._prefix_ids) > 64:
                self._prefix_ids.clear()
            self._prefix_ids[call.prefix] = backend.ids(head + call.prefix)
        pre = self._prefix_ids[call.prefix]
        suf = backend.tokenizer(call.question + tail, add_special_tokens=False)["input_ids"]
        if len(pre) + len(suf) > self.max_length:  # keep the end of the item, next to the question
            self.n_truncated += 1
            pre = pre[len(pre) + len(suf) - self.max_length:]
        return pre, suf

    def encode(self, backend: Any, calls: Sequence[Call]) -> list[Tokens]:
        return [Tokens(*self.encode_one(backend, c), group=c.prefix) for c in calls]


class PairJudge:
    """An elicitation judge on any judge backend: ``answer(calls)`` -> per call +1 (first-shown), -1
    (second), 0 (no resolved direction), NaN (a reply naming neither; counted, kept as direction 0).
    The direction is resolved when ``|p(A | A or B) - 0.5| > margin``, with p = σ(s_A − s_B) from the
    backend's letter scores (an endpoint's named letter: p = 1 or 0; a tie: ½)."""

    kind = "pair_judge"

    def __init__(self, backend: JudgeBackend, question: CallQuestion, *, name: str, margin: float = 0.0) -> None:
        self.backend, self.question, self._name, self.margin = backend, question, name, margin
        if hasattr(backend, "letter_ids"):  # a tokenizer without single tokens for A and B: said now
            backend.letter_ids(question.letters)

    @property
    def name(self) -> str:
        return self._name

    @property
    def fingerprint(self) -> str:
        """Stable id of the backend and every setting that changes an answer (the cache's key space):
        the backend's identity, the prompt's token budget where the backend reads token ids, the
        margin where its scores are graded (``JudgeBackend.reads_tokens``, ``graded``)."""
        fields = self.backend.identity(model_identity)
        if self.backend.reads_tokens:
            fields["max_length"] = self.question.max_length
        if self.backend.graded:
            fields["margin"] = self.margin
        return fingerprint_of(f"pair_judge_{self.backend.kind}", fields)

    @property
    def n_calls(self) -> int:
        return self.backend.n_calls

    @property
    def n_truncated(self) -> int | None:
        """Calls cut to ``max_length`` (None: the backend reads whole texts)."""
        return self.question.n_truncated if self.backend.reads_tokens else None

    @property
    def n_generated(self) -> int | None:
        """Tokens the backend generated (an endpoint's ``usage``; None where it does not say)."""
        return getattr(self.backend, "n_generated", None)

    @property
    def n_malformed(self) -> int | None:
        return getattr(self.backend, "n_malformed", None)

    def p_first(self, calls: list[Call]) -> np.ndarray:
        """p("A" | "A" or "B") per call: the probability of naming the first-shown response."""
        s = self.backend.letter_scores(self.question, calls)
        return torch.sigmoid(s[:, 0] - s[:, 1]).double().numpy()

    def answer(self, calls: list[Call]) -> list[float]:
        return [math.nan if math.isnan(p) else 1.0 if p > 0.5 + self.margin else -1.0 if p < 0.5 - self.margin
                else 0.0 for p in self.p_first(calls).tolist()]

    def close(self) -> None:
        self.backend.close()


class LocalPairJudge(PairJudge):
    """A local Hugging Face causal LM (``rmeval.backends.local``), read from next-token
    probabilities: the mass of every single-token spelling of "A" against that of "B". With
    ``prefix_reuse`` the item's KV cache is computed once and shared by all questions on it;
    otherwise every call is one full forward (same token ids, so the same directions up to float
    rounding)."""

    kind = "hf"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, name: str | None = None,
                 batch_size: int = 32, max_length: int = 4096, device: str | None = None, dtype: str | None = None,
                 prefix_reuse: bool = True, margin: float = 0.0, trust_remote_code: bool = False,
                 attn_implementation: str | None = None, device_map: str | None = None) -> None:
        placement = Placement(device=device or "auto", dtype=dtype or "auto", attn_implementation=attn_implementation,
                              trust_remote_code=trust_remote_code, device_map=device_map)
        backend = LocalBackend(model, tokenizer=tokenizer, batch_size=batch_size, device=device, dtype=dtype,
                               prefix_reuse=prefix_reuse, trust_remote_code=trust_remote_code, placement=placement)
        super().__init__(backend, CallQuestion(max_length), name=name or Path(backend.model_id.rstrip("/")).name,
                         margin=margin)
        self.local: LocalBackend = backend
        self.letter_ids = backend.letter_ids(self.question.letters)
        # the dtype the judge runs in ("float32" for auto on the CPU), part of its fingerprint
        self.batch_size, self.max_length, self.dtype, self.prefix_reuse = (batch_size, max_length, backend.dtype,
                                                                           prefix_reuse)

    @property
    def model(self) -> Any:
        return self.local.model

    @property
    def tokenizer(self) -> Any:
        return self.local.tokenizer

    @property
    def model_id(self) -> str:
        return self.local.model_id

    @property
    def device(self) -> Any:
        return self.local.device

    @property
    def pad_id(self) -> int:
        return self.local.pad_id

    def encode(self, call: Call) -> tuple[list[int], list[int]]:
        """(prefix ids, question ids) of a call."""
        return self.question.encode_one(self.local, call)


class EndpointPairJudge(PairJudge):
    """An OpenAI-compatible chat endpoint (vLLM, TGI, OpenAI...; ``rmeval.backends.endpoint``).
    Greedy, a few tokens (``max_tokens``; a judge that reasons first, ``reasoning_tokens``: that
    budget, the letter read after its reasoning); a malformed reply is counted and left unresolved."""

    kind = "openai"

    def __init__(self, model: str, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", name: str | None = None,
                 max_tokens: int = 4, timeout: float = 60.0, max_retries: int = 5, concurrency: int = 8,
                 reasoning_tokens: int | None = None) -> None:
        max_tokens = reasoning_tokens or max_tokens
        backend = EndpointBackend(model, base_url=base_url, api_key_env=api_key_env, max_tokens=max_tokens,
                                  timeout=timeout, max_retries=max_retries, concurrency=concurrency,
                                  reasoning=reasoning_tokens is not None)
        super().__init__(backend, CallQuestion(), name=name or model.replace("/", "_"))
        self.endpoint: EndpointBackend = backend
        self.model, self.base_url, self.max_tokens = model, base_url, max_tokens


def make_pair_judge(spec: dict[str, Any]) -> PairJudge:
    """The judge of an elicitation job (``ElicitSettings.judge_spec``): ``{"kind": KIND, "model": ...}``
    of any backend kind that judges (``rmeval.backends.spec``: ``hf`` a local causal LM, ``openai``
    an OpenAI-compatible endpoint at ``base_url``, ``openai_logprobs``...), with the elicitation's
    settings (name, max_length, margin; a local one's batch_size, placement and prefix_reuse; an
    endpoint's api_key_env, concurrency and reasoning_tokens)."""
    opts = dict(spec)
    s = parse_backend_spec({"kind": opts.pop("kind", "hf"), "model": opts.pop("model", None),
                            "base_url": opts.pop("base_url", None), "api_key_env": opts.pop("api_key_env", None)},
                           what="judge", spelled={"base_url": "--endpoint"})
    name, margin, max_length = opts.pop("name", None), opts.pop("margin", 0.0), opts.pop("max_length", 4096)
    reasoning = opts.pop("reasoning_tokens", None)
    placement = Placement(device=opts.pop("device", None) or "auto", dtype=opts.pop("dtype", None) or "auto",
                          attn_implementation=opts.pop("attn_implementation", None),
                          trust_remote_code=opts.pop("trust_remote_code", False),
                          device_map=opts.pop("device_map", None))
    backend = make_backend("judge", s, placement=placement, batch_size=opts.pop("batch_size", 32),
                           prefix_reuse=opts.pop("prefix_reuse", True), reply_tokens=reasoning or 4,
                           reasoning=reasoning is not None, concurrency=opts.pop("concurrency", 8), **opts)
    return PairJudge(backend, CallQuestion(max_length), name=name or backend.label, margin=margin)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


@dataclass
class ShardStats:
    judge: str
    shard: int
    n_shards: int
    n_items: int = 0
    n_cells: int = 0  # (item, attribute, order) cells in the shard
    n_cached: int = 0  # answered by an earlier run
    n_made: int = 0  # calls sent to the backend by this run
    n_malformed: int = 0  # malformed answers among all cells (kept as direction 0)
    n_unresolved: int = 0  # direction 0 among all cells (malformed included)
    seconds: float = 0.0
    table: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def shard_items(items: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    if not 0 <= shard < n_shards:
        raise ConfigError(f"shard {shard} out of range for {n_shards} shards")
    return items.iloc[shard::n_shards]


def elicit_shard(items: pd.DataFrame, judge: PairJudge, questions: dict[str, str], out: str | os.PathLike, *,
                 shard: int = 0, n_shards: int = 1, chunk_items: int = 2, progress: bool = True,
                 name: str | None = None) -> ShardStats:
    """Elicit one shard into ``out/shards/<judge>.shard-<i>-of-<n>.npz`` (``rmeval.judges.store``)
    through the score cache in ``out/cache/``. Answers already in any cache file of this judge are
    not asked again. ``name`` overrides the judge's name in the table (a rubric-prompted variant of
    the same model)."""
    out = Path(out)
    t0 = time.perf_counter()
    sub = shard_items(items, shard, n_shards)
    judge_name = name or judge.name
    slug = _slug(judge_name)
    cache_dir = out / "cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = ScoreCache(cache_dir / f"{slug}.shard-{shard:05d}-of-{n_shards:05d}.sqlite")
    # other shardings of the same judge (a rerun with another --n-shards) are read, never written
    others = [ScoreCache(p) for p in sorted(cache_dir.glob(f"{slug}.shard-*.sqlite")) if p != cache.path]
    fp = judge.fingerprint
    stats = ShardStats(judge_name, shard, n_shards, n_items=len(sub))
    per_item = 2 * len(questions)
    stats.n_cells = len(sub) * per_item
    # every answer lands in one array as its chunk is answered (calls run item by item, order by
    # order, question by question), so a shard never holds its calls or answers as Python objects
    letters = np.empty(stats.n_cells, dtype=float)
    # a bar on a terminal, a line every half minute on any other stderr (rmcore.console.progress)
    bar = Progress(f"{judge_name} shard {shard + 1}/{n_shards}", stats.n_cells, unit="call", enabled=progress)

    def ask(todo: list[Call]) -> list[tuple[Any, ...]]:
        return [ScoreCache.row(fp, a, False, False) for a in judge.answer(todo)]

    try:
        for first in range(0, len(sub), chunk_items):
            calls = build_calls(sub.iloc[first:first + chunk_items], questions)
            keys = [cache_key(fp, c.rendered()) for c in calls]
            have = cache.get_many(keys)
            for o in others:
                missing = [k for k in keys if k not in have]
                if missing:
                    got = o.get_many(missing)
                    have.update(got)
                    if got:  # copy into this shard's file so it is self-contained
                        cache.put_many([(k, *v) for k, v in got.items()])
            # asked in one batch, committed before the next chunk: a kill loses at most this chunk
            answered, fresh = cache.fill(keys, calls, ask, chunk_size=len(calls))
            made = sum(1 for k in keys if k in fresh)
            stats.n_cached += len(calls) - made
            stats.n_made += made
            letters[first * per_item:first * per_item + len(calls)] = [ScoreCache.value(answered[k])[0] for k in keys]
            bar.update(len(calls))
    finally:
        bar.close()
    malformed = np.isnan(letters)
    stats.n_malformed = int(malformed.sum())
    d = np.where(malformed, 0, letters).astype(np.int8).reshape(len(sub), len(ORDERS), len(questions))
    d[:, 1] *= -1  # first-shown in BA is the original B
    stats.n_unresolved = int(np.count_nonzero(d == 0))
    table = write_shard(out / "shards" / f"{slug}.shard-{shard:05d}-of-{n_shards:05d}.npz", judge_name,
                        [str(i) for i in sub["item_id"]], list(questions), d.transpose(0, 2, 1))
    stats.table, stats.seconds = str(table), round(time.perf_counter() - t0, 3)
    for key, attr in (("n_truncated", "n_truncated"), ("generated_tokens", "n_generated")):
        extra = getattr(judge, attr, None)
        if extra is not None:
            stats.extra[key] = int(extra)
    for c in [cache, *others]:
        c.close()
    atomic_write_json(out / "shards" / f"{slug}.shard-{shard:05d}-of-{n_shards:05d}.stats.json", stats.__dict__)
    return stats


SHARD_NAME = re.compile(r"^(.*)\.shard-(\d+)-of-(\d+)\.(npz|jsonl|parquet)$")


def _read_shard(path: Path) -> JudgmentStore:
    """A shard's judgments: the ``.npz`` this module writes, or a long table an earlier version wrote."""
    return read_shard(path) if path.suffix == ".npz" else load_store(path)


def merge_shards(out: str | os.PathLike, *, judges: list[str] | None = None, name: str = "judgments",
                 table: str | None = None) -> Path:
    """Place the finished shards of every judge (or ``judges``) in one judgment store ``out/<name>``
    (``rmeval.judges.store``; items in order of first appearance over the shards, judge by judge).
    A judge elicited under several shard counts contributes its newest complete set; a judge without
    a complete set is an error naming the missing shards (never a silently smaller store), and so is
    a cell read twice. A shard written as a long table by an earlier version is read too (an
    ``.npz`` beside it wins). ``table``: also write the long table ``out/<table>`` (jsonl or
    parquet) for inspection."""
    out = Path(out)
    groups: dict[str, dict[int, dict[int, Path]]] = {}
    for t in sorted((out / "shards").glob("*.shard-*")):
        m = SHARD_NAME.match(t.name)
        if m:
            by_shard = groups.setdefault(m.group(1), {}).setdefault(int(m.group(3)), {})
            if int(m.group(2)) not in by_shard or t.suffix == ".npz":
                by_shard[int(m.group(2))] = t
    if judges is not None:
        groups = {k: v for k, v in groups.items() if k in {_slug(j) for j in judges}}
    if not groups:
        raise FileNotFoundError(f"{out / 'shards'}: no shard tables to merge")
    shards = []
    for slug, by_n in groups.items():
        newest = sorted(by_n.items(), key=lambda kv: -max(p.stat().st_mtime for p in kv[1].values()))
        chosen, missing = None, []
        for n, paths in newest:
            if set(paths) >= set(range(n)):
                chosen = [paths[i] for i in sorted(paths)]
                break
            missing = missing or [f"{i} of {n}" for i in sorted(set(range(n)) - set(paths))]
        if chosen is None:
            raise ConfigError(f"judge {slug}: shard(s) {', '.join(missing)} not finished; rerun them before merging")
        shards += [_read_shard(p) for p in chosen]
    store = concat_stores(shards)
    if table:
        atomic_write_table(out / table, store_to_table(store))
    return write_store(out / name, store)


@dataclass
class ElicitJob:
    """One shard as a picklable callable (for submitit): the backend is built inside the job, so a
    SLURM task loads its own model or talks to its own endpoint."""

    items_path: str
    judge_spec: dict[str, Any]
    questions: dict[str, str]
    out: str
    shard: int = 0
    n_shards: int = 1
    chunk_items: int = 2
    progress: bool = True

    def __call__(self) -> dict[str, Any]:
        items = load_items(self.items_path)
        judge = make_pair_judge(self.judge_spec)
        try:
            return elicit_shard(items, judge, self.questions, self.out, shard=self.shard, n_shards=self.n_shards,
                                chunk_items=self.chunk_items, progress=self.progress).__dict__
        finally:
            judge.close()


def items_from_rating_set(rs: Any, source: str, *, limit: int | None = None, seed: int = 0) -> pd.DataFrame:
    """A preference set (rmtrain RatingSet with ``preferences``) as an items table: the chosen
    response goes to A or B by a seeded coin flip, and the label names it."""
    rng = np.random.default_rng(seed)
    by_id = {p.prompt_id: p for p in rs.prompts}
    rows = []
    for pref in rs.preferences[:limit] if limit else rs.preferences:
        p = by_id[pref.prompt_id]
        texts = {r.response_id: r.text for r in p.responses}
        chosen, rejected = texts[pref.chosen_id], texts[pref.rejected_id]
        a_chosen = bool(rng.random() < 0.5)
        rows.append({"item_id": f"{source}:{pref.prompt_id}:{pref.chosen_id}>{pref.rejected_id}", "source": source,
                     "query": conversation_text(p.messages), "response_a": chosen if a_chosen else rejected,
                     "response_b": rejected if a_chosen else chosen, "label": "A" if a_chosen else "B"})
    return pd.DataFrame(rows)
