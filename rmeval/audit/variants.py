"""Prompt variants for the ``paraphrase`` and ``related`` conditions, end to end (``rmeval variants``):
generate them for every prompt of a rating set (``rmeval.backends.generators``), judge whether each
paraphrase keeps the original's meaning, write the variants file and count what was kept.

Related tasks come in the study's subtypes (``rmeval.backends.generators.RELATED_SUBTYPES``: ``different``,
the default and the study's three related tasks; ``contains``, a request that contains the
original; ``sub_question``, a part of it), one subtype per file, recorded in every row.

**Paraphrase validity.** A rewording that changes the request is not a paraphrase, and its score
shift measures something else. Each generated paraphrase is put to a judge (``validity_judge``:
``hf:MODEL`` read from its next-token logits, or ``openai:MODEL`` at an OpenAI-compatible
endpoint; the pairwise-judge protocol of ``rmeval.backends``) with ``VALIDITY_TEMPLATE``: the
original request (the prompt's last user turn, which the paraphrase replaces), the rewritten one,
and "does it keep the meaning? Yes or No". p_valid = p(Yes) / (p(Yes) + p(No)) over the two words'
next-token probabilities (an endpoint's reply: 1 for Yes, 0 for No); a paraphrase is valid when
p_valid >= ``threshold`` (0.5). An unreadable reply is not valid (``n_unreadable``). Every row is
kept in the file with ``valid`` and ``p_valid``; the condition reads only the valid ones, so a
prompt whose paraphrases are all invalid drops out of the paraphrase condition. The study: a 24B
judge rated 0.90 of 1,407 paraphrases valid, and 50 of 519 prompts had none (longer prompts,
median 113 words against 40, half of them multi-turn), which ``variant_counts`` reports the same
way: kept against dropped prompts' median words and multi-turn share.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.data.schema import RatingSet
from rmcore.io.files import atomic_write_json
from rmcore.models.device import Placement
from rmeval.audit.settings import PromptVariantSettings
from rmeval.backends import JudgeBackend, Question, Tokens
from rmeval.backends.generators import (
    DEFAULT_SUBTYPE,
    FileGenerator,
    Generator,
    instruction,
    write_variants,
)
from rmeval.backends.spec import OPENAI_API_URL, check_backend, check_local, make_backend, parse_backend_spec

VALIDITY_TEMPLATE = (
    "You check rewritten requests. A rewriting is valid when it asks for exactly the same thing as the original: "
    "the same task, meaning, constraints and details, in other words.\n\n"
    "[Original request]\n{original}\n\n[Rewritten request]\n{rewritten}\n\n"
)
VALIDITY_QUESTION = ("Question: does the rewritten request keep the meaning of the original? "
                     "Answer with a single word, Yes or No.\nAnswer:")


def make_text_generator(spec: str, *, base_url: str | None = None, seed: int = 0,
                        placement: Placement | None = None) -> Generator:
    """A backend kind that writes prompt variants (``rmeval.backends.spec``, capability ``variants``):
    ``simulated``, ``hf:MODEL`` (a local path, Hub id or ``pkg:`` model), ``openai:MODEL`` (at
    ``base_url``, else OpenAI's) or ``file:PATH`` (texts written before, all rows kept, to judge again)."""
    s = parse_backend_spec(spec, what="--generator", spelled={"base_url": "--base-url"},
                           defaults={"base_url": OPENAI_API_URL}, base_url=base_url)
    check_backend("variants", s)
    check_local(s)
    return make_backend("variants", s, seed=seed, placement=placement, include_invalid=True)


def make_judge_backend(spec: str, *, base_url: str | None = None, placement: Placement | None = None) -> JudgeBackend:
    """A backend kind that judges (``rmeval.backends.spec``, capability ``judge``): ``hf:MODEL`` (a
    local causal LM read from its next-token logits), ``openai:MODEL`` (an OpenAI-compatible
    endpoint at ``base_url``, greedy), ``openai_logprobs:MODEL`` (its first token's log-probabilities)."""
    s = parse_backend_spec(spec, what="--validity-judge", spelled={"base_url": "--judge-base-url"}, base_url=base_url)
    check_backend("judge", s)
    check_local(s)
    return make_backend("judge", s, placement=placement, reply_tokens=8)


class ValidityQuestion(Question):
    """Does a rewritten request keep the original's meaning? Items are (original, rewritten); the
    letters are the words "Yes" and "No". A local model reads the body then the question, the body
    cut from the left when the whole is longer than ``max_length`` (``n_truncated``)."""

    letters = ("Yes", "No")

    def __init__(self, max_length: int = 4096) -> None:
        self.max_length, self.n_truncated = max_length, 0

    def text(self, item: tuple[str, str]) -> str:
        return VALIDITY_TEMPLATE.format(original=item[0], rewritten=item[1]) + VALIDITY_QUESTION

    def encode(self, backend: Any, items: Sequence[tuple[str, str]]) -> list[Tokens]:
        head, tail = backend.chat_parts()
        suffix = backend.tokenizer(VALIDITY_QUESTION + tail, add_special_tokens=False)["input_ids"]
        out = []
        for original, rewritten in items:
            pre = backend.ids(head + VALIDITY_TEMPLATE.format(original=original, rewritten=rewritten))
            if len(pre) + len(suffix) > self.max_length:
                self.n_truncated += 1
                pre = pre[len(pre) + len(suffix) - self.max_length:]
            out.append(Tokens(pre, suffix))
        return out

    def parse(self, reply: str | None) -> str | None:
        words = (reply or "").strip().lstrip("*\"'([ ").split()
        first = words[0].strip(".,!:;*\"')]").lower() if words else ""
        return {"yes": "Yes", "no": "No"}.get(first)


def judge_validity(backend: JudgeBackend, pairs: list[tuple[str, str]], *, threshold: float = 0.5,
                   max_length: int = 4096, batch: int = 256,
                   question: ValidityQuestion | None = None) -> list[tuple[bool, float | None]]:
    """(valid, p_valid) per (original, rewritten) pair; p_valid None where the judge named neither
    word (not valid). ``question``: the one to ask (its ``n_truncated`` counts cut prompts)."""
    import torch

    question = question or ValidityQuestion(max_length)
    out: list[tuple[bool, float | None]] = []
    for i in range(0, len(pairs), batch):
        s = backend.letter_scores(question, pairs[i:i + batch])
        p = torch.softmax(s.double(), dim=-1)[:, 0].numpy() if len(s) else np.zeros(0)
        for v in p:
            out.append((False, None) if math.isnan(v) else (bool(v >= threshold), float(v)))
    return out


def _words(p: Any) -> int:
    return sum(len(m["content"].split()) for m in p.messages if m["role"] == "user")


def _group(prompts: list[Any]) -> dict[str, Any]:
    return {"n_prompts": len(prompts),
            "median_words": float(np.median([_words(p) for p in prompts])) if prompts else None,
            "share_multi_turn": float(np.mean([not p.single_turn for p in prompts])) if prompts else None}


def variant_counts(path: str | os.PathLike, rating_set: RatingSet) -> dict[str, Any]:
    """What a variants file holds for the prompts of ``rating_set``: texts and prompts covered, the
    related subtype, and for judged paraphrases the validity counts, with the prompts left without
    a valid paraphrase (dropped from the condition) against the kept ones by words and turns."""
    fg = FileGenerator(path, include_invalid=True)
    ids = {p.prompt_id for p in rating_set.prompts}
    rows = [r for r in fg.all_rows if r.prompt_id in ids]
    covered = {r.prompt_id for r in rows}
    out: dict[str, Any] = {"file": str(path), "n_prompts": len(rating_set), "n_texts": len(rows),
                           "n_prompts_with_texts": len(covered), "n_prompts_without_texts": len(ids - covered)}
    if fg.subtype is not None:
        out["subtype"] = fg.subtype
    judged = [r for r in rows if r.valid is not None]
    if judged:
        n_valid = sum(r.valid for r in judged)
        with_valid = {r.prompt_id for r in judged if r.valid}
        dropped = [p for p in rating_set.prompts if p.prompt_id in covered and p.prompt_id not in with_valid]
        kept = [p for p in rating_set.prompts if p.prompt_id in with_valid]
        out["validity"] = {
            "n_judged": len(judged), "n_valid": int(n_valid), "n_invalid": len(judged) - int(n_valid),
            "n_unreadable": sum(r.valid is False and r.p_valid is None for r in judged),
            "share_valid": n_valid / len(judged), "n_prompts_with_valid": len(with_valid),
            "n_prompts_without_valid": len(dropped), "kept_prompts": _group(kept), "dropped_prompts": _group(dropped)}
    return out


def write_prompt_variants(rating_set: RatingSet, settings: PromptVariantSettings,
                          out: str | os.PathLike) -> dict[str, Any]:
    """Generate ``settings.task`` variants of every prompt, judge paraphrases when a validity judge
    is set, write the variants file to ``out`` and its summary beside it (``<out>.summary.json``:
    the settings, the instruction and ``variant_counts``). Returns the summary."""
    settings.check()
    subtype = settings.subtype or (DEFAULT_SUBTYPE if settings.task == "related" else None)
    gen = make_text_generator(settings.generator, base_url=settings.base_url, seed=settings.seed,
                              placement=settings.placement)
    texts = gen.generate(rating_set.prompts, settings.task, settings.n, subtype)
    validity, n_judge_cut = None, 0
    if settings.validity_judge:
        originals = {p.prompt_id: p.last_user_text for p in rating_set.prompts}
        keys = [(pid, v) for pid, ts in texts.items() for v in range(len(ts))]
        backend = make_judge_backend(settings.validity_judge, base_url=settings.judge_base_url,
                                     placement=settings.placement)
        max_length = settings.judge_max_length or 4096  # an endpoint: not read
        if backend.reads_tokens:  # a model of token ids: never past its positions
            max_length = backend.fit_length(settings.judge_max_length)
        question = ValidityQuestion(max_length)
        try:
            verdicts = judge_validity(backend, [(originals[pid], texts[pid][v]) for pid, v in keys],
                                      threshold=settings.threshold, question=question)
        finally:
            backend.close()
        n_judge_cut = question.n_truncated
        validity = {pid: [] for pid in texts}
        for (pid, _), verdict in zip(keys, verdicts):
            validity[pid].append(verdict)
    path = write_variants(texts, out, subtype=subtype, validity=validity)
    summary = {"task": settings.task, "generator": settings.generator, "n_per_prompt": settings.n,
               "n_requests_cut": getattr(gen, "n_truncated", 0), "n_judge_prompts_cut": n_judge_cut,
               "seed": settings.seed, "instruction": instruction(settings.task, subtype),
               "validity_judge": settings.validity_judge,
               "validity_threshold": settings.threshold if settings.validity_judge else None,
               **variant_counts(path, rating_set)}
    atomic_write_json(summary_path(path), summary)
    return summary


def summary_path(variants_file: str | os.PathLike) -> Path:
    p = Path(variants_file)
    return p.with_name(p.name + ".summary.json")


def summary_line(summary: dict[str, Any]) -> str:
    """One line for the console: what was written, and what the validity judge kept."""
    kind = f"related ({summary['subtype']})" if summary.get("subtype") else summary["task"]
    line = (f"wrote {summary['n_texts']} {kind} texts for {summary['n_prompts_with_texts']} prompts to "
            f"{summary['file']} ({summary['n_prompts_without_texts']} prompts got none)")
    v = summary.get("validity")
    if v:
        line += (f"; {v['n_valid']} of {v['n_judged']} judged to keep the meaning ({v['share_valid']:.2f}), "
                 f"{v['n_prompts_without_valid']} prompts left without a valid paraphrase")
    return line
