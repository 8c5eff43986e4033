"""Rule-based stylized rewrites of a response that need no model: ``ST`` and ``SP`` (the ``rule``
of their ``ResponsePerturbation``, ``rmeval.perturbations.controlled``).

- ``synonym_transform`` (ST): words found in the shipped synonym table (``data/synonyms.json``,
  same part of speech and inflection per entry) are replaced by a seeded choice among their
  synonyms, each with probability ``rate`` (at least one when any word is in the table); the
  capitalisation of the replaced word is kept. Fenced and inline code and URLs are left alone.
- ``structured_presentation`` (SP): the text laid out as Markdown -- a bold lead sentence under a
  heading, then the rest as a bulleted list of sentences (a paragraph that already is a list, a
  heading or code stays as it is). Deterministic: the same text always gives the same layout.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

import numpy as np

_PROTECTED = re.compile(r"```.*?```|`[^`\n]*`|https?://\S+", re.DOTALL)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_MARKDOWN_BLOCK = re.compile(r"^\s*(#{1,6}\s|[-*+]\s|\d+[.)]\s|>|\||```)")


@lru_cache(maxsize=1)
def synonym_table() -> dict[str, list[str]]:
    """lower-case word -> synonyms, from the shipped ``data/synonyms.json``."""
    raw = json.loads(resources.files("rmeval.perturbations").joinpath("data/synonyms.json").read_text("utf-8"))
    return {k: list(v) for k, v in raw.items() if not k.startswith("_")}


def _match_case(word: str, repl: str) -> str:
    if word.isupper() and len(word) > 1:
        return repl.upper()
    if word[0].isupper():
        return repl[0].upper() + repl[1:]
    return repl


def _spans(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, protected) pieces covering ``text``."""
    out, last = [], 0
    for m in _PROTECTED.finditer(text):
        if m.start() > last:
            out.append((last, m.start(), False))
        out.append((m.start(), m.end(), True))
        last = m.end()
    if last < len(text):
        out.append((last, len(text), False))
    return out


def synonym_transform(text: str, rng: np.random.Generator, rate: float = 0.5,
                      table: dict[str, list[str]] | None = None) -> str:
    table = synonym_table() if table is None else table
    hits = []  # (start, end, word)
    for a, b, protected in _spans(text):
        if not protected:
            hits += [(a + m.start(), a + m.end(), m.group()) for m in _WORD.finditer(text[a:b])
                     if m.group().lower() in table]
    if not hits:
        return text
    picked = [h for h in hits if rng.random() < rate] or [hits[int(rng.integers(len(hits)))]]
    out, last = [], 0
    for a, b, word in picked:
        options = table[word.lower()]
        out += [text[last:a], _match_case(word, options[int(rng.integers(len(options)))])]
        last = b
    out.append(text[last:])
    return "".join(out)


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph.strip()) if s.strip()]


def structured_presentation(text: str, heading: str = "Answer", details_heading: str = "Details") -> str:
    body = text.strip()
    if not body:
        return text
    # split into paragraphs, keeping fenced code blocks whole
    blocks: list[str] = []
    for a, b, protected in _spans(body):
        piece = body[a:b]
        if protected and piece.startswith("```"):
            blocks.append(piece)
        elif blocks and protected:  # inline code or a URL: part of the surrounding paragraph
            blocks[-1] += piece
        else:
            parts = re.split(r"\n\s*\n", piece)
            joins = blocks and not blocks[-1].startswith("```") and not re.match(r"[ \t]*\n\s*\n", piece)
            if joins:  # text right after inline code or a URL continues that paragraph
                blocks[-1] += parts.pop(0)
            blocks += parts
    blocks = [b.strip() for b in blocks if b.strip()]
    lead, rest = None, []
    for blk in blocks:
        if blk.startswith("```") or _MARKDOWN_BLOCK.match(blk) or "\n-" in blk or "\n*" in blk:
            rest.append(blk)
            continue
        sents = _sentences(blk.replace("\n", " "))
        if lead is None:
            lead, sents = sents[0], sents[1:]
        if sents:
            rest.append("\n".join(f"- {s}" for s in sents))
    out = [f"## {heading}", ""]
    if lead is not None:
        out += [f"**{lead}**", ""]
    if rest:
        out += [f"### {details_heading}", ""] + [x for blk in rest for x in (blk, "")]
    return "\n".join(out).rstrip() + "\n"

