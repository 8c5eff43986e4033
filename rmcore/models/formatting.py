"""How a (conversation, response) becomes model input. Training and scoring share this module,
so a checkpoint is always scored on the same text layout it was trained on.

Three layouts, chosen from the tokenizer:
- chat template (Qwen, Llama, ...): the conversation plus the response as the assistant turn;
- sentence pair (BERT-like encoders, no template): segment A is the plain-format conversation,
  segment B the response;
- plain (causal tokenizers without a template): the plain-format conversation followed by the
  response in one sequence.
The plain format is ``User: <text>\\n\\nAssistant: <text>\\n\\n...`` ending with ``Assistant:``.
When the input is longer than ``max_length`` the *prompt* is cut from the left, so the response
(and the turns nearest to it) survive; the response itself is cut only if it alone does not fit.

``encode_example(..., cut_long=True)`` (the reward server) first cuts a text far longer than
``max_length`` tokens by characters, at a word break, so a 20 MB text is not tokenised whole only
for all but ``max_length`` of its tokens to be dropped (``_ids_within``); the ids it keeps are the
ids a whole-text tokenisation keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from rmcore.data.schema import Message

ROLE_NAMES = {"system": "System", "user": "User", "assistant": "Assistant"}


def plain_prompt(messages: list[Message]) -> str:
    """Documented plain layout of a conversation, ending with the cue for the reply."""
    parts = [f"{ROLE_NAMES.get(m['role'], m['role'].title())}: {m['content']}" for m in messages]
    return "\n\n".join(parts + ["Assistant:"])


def layout(tokenizer: Any) -> str:
    if getattr(tokenizer, "chat_template", None):
        return "chat"
    if tokenizer.num_special_tokens_to_add(pair=True) > tokenizer.num_special_tokens_to_add(pair=False):
        return "pair"
    return "plain"


@dataclass
class Encoded:
    input_ids: list[int]
    token_type_ids: list[int] | None
    prompt_truncated: bool
    response_truncated: bool

    def __len__(self) -> int:
        return len(self.input_ids)


def _ids(tokenizer: Any, text: str) -> list[int]:
    # verbose=False: long prompts are cut below, the "longer than max length" warning is noise
    return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]


# Cutting a long text by characters before tokenising it (``_ids_within``). A tokenisation changes
# only near a cut made at a word break: the break character, the word next to it, the pieces of a
# special token the cut splits -- a handful of tokens. CUT_MARGIN tokens beyond those kept keep
# them clear of it, and a cut is taken only where the piece really holds them.
CUT_MARGIN = 64
# The first cut allows this many characters per token needed: natural text averages 3-5 in common
# tokenizers (about 1.5 in CJK). A text of longer tokens (runs of spaces or '=') fails the check and
# is cut again at twice the length. The longest vocabulary entry would bound it in one step, but it
# is 16-256 characters in real vocabularies: every first cut would be that many times longer.
CUT_CHARS_PER_TOKEN = 8
CUT_WORD = 32  # the longest word a cut may lie next to: the tokens it may change stay few
# A cut that keeps the start ends after a short word followed by a non-word character; one that
# keeps the end starts at a non-word character (whitespace, punctuation) before a short word.
_KEEP_START_BREAK = re.compile(rf"\W\w{{1,{CUT_WORD}}}(?=\W)")
_KEEP_END_BREAK = re.compile(rf"\W(?=\w{{1,{CUT_WORD}}}(?:\W|\Z))")


def _piece(text: str, bound: int, keep: str) -> str:
    """At least ``bound`` characters (at most about twice that) at the ``keep`` end of ``text``
    ("start" or "end"), cut at a word break within ``bound`` characters past the bound, else at the
    bound (``bound`` characters without a short word between breaks: not language, e.g. 'xxx...')."""
    if keep == "start":
        m = _KEEP_START_BREAK.search(text, bound, 2 * bound + CUT_WORD + 2)
        return text[: m.end() if m else bound]
    hi = len(text) - bound  # keep text[cut:] with cut <= hi; the break nearest hi keeps the least
    # the search ends CUT_WORD + 2 past hi so that a break at hi sees its word (the lookahead); a
    # match past hi may end its word at the search's end instead of a real break: not taken
    cut = hi
    for m in _KEEP_END_BREAK.finditer(text, max(hi - bound, 0), min(hi + CUT_WORD + 2, len(text))):
        if m.start() > hi:
            break
        cut = m.start()
    return text[cut:]


def _ids_within(tokenizer: Any, text: str, need: int, keep: str) -> list[int]:
    """``_ids(tokenizer, text)``, or for a text far longer than ``need`` tokens, its ids at the
    ``keep`` end ("start": the first, "end": the last) ``need + 1`` of them: as many as the caller
    keeps and one more, so it sees the text is over. Those are the whole text's ids: they come from a
    piece cut at a word break that holds ``CUT_MARGIN`` tokens more (see ``CUT_MARGIN``). The one
    exception: a piece cut inside a run without a word break (``_piece``), where a whole-text BPE
    may pair the run's characters differently."""
    bound = CUT_CHARS_PER_TOKEN * (need + CUT_MARGIN)
    while bound < len(text):
        ids = _ids(tokenizer, _piece(text, bound, keep))
        if len(ids) >= need + 1 + CUT_MARGIN:
            return ids[: need + 1] if keep == "start" else ids[-(need + 1):]
        bound *= 2  # longer tokens than allowed for, or characters the tokenizer drops (whitespace)
    return _ids(tokenizer, text)


def split_chat(tokenizer: Any, messages: list[Message], response: str) -> tuple[str, str]:
    """(prompt text, response text) of the chat template applied to the conversation plus the
    assistant's ``response``: the prompt is the template's generation prompt where the full text
    starts with it, else everything before the response's last occurrence."""
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        list(messages) + [{"role": "assistant", "content": response}], tokenize=False
    )
    if full.startswith(prompt):
        return prompt, full[len(prompt):]
    # Some templates rewrite the final assistant turn (e.g. thinking tags); split at the response.
    cut = full.rfind(response) if response else len(full)
    return full[:cut], full[cut:]


def encode_example(tokenizer: Any, messages: list[Message], response: str, max_length: int, *,
                   cut_long: bool = False) -> Encoded:
    """Token ids for one (conversation, response); prompt truncated from the left. ``cut_long``: cut
    a text far over ``max_length`` by characters before tokenising it (same ids, see ``_ids_within``)."""
    kind = layout(tokenizer)
    if kind == "chat":
        prompt_text, resp_text = split_chat(tokenizer, messages, response)
        n_special = 0
    else:
        prompt_text, resp_text = plain_prompt(messages), (response if kind == "pair" else " " + response)
        n_special = tokenizer.num_special_tokens_to_add(pair=(kind == "pair"))
    budget = max_length - n_special
    if cut_long:  # neither side keeps more than budget tokens: the prompt's end, the response's start
        need = max(budget, 1)
        p_ids = _ids_within(tokenizer, prompt_text, need, "end")
        r_ids = _ids_within(tokenizer, resp_text, need, "start")
    else:
        p_ids, r_ids = _ids(tokenizer, prompt_text), _ids(tokenizer, resp_text)
    resp_trunc = len(r_ids) > budget - 1
    if resp_trunc:  # keep at least one prompt token; keep the response's beginning
        r_ids = r_ids[: max(budget - 1, 1)]
    keep = budget - len(r_ids)
    prompt_trunc = len(p_ids) > keep
    if prompt_trunc:
        p_ids = p_ids[len(p_ids) - keep:] if keep > 0 else []
    if kind == "pair":
        cls = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        sep = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        ids = cls + p_ids + sep + r_ids + sep
        tt = [0] * (len(cls) + len(p_ids) + len(sep)) + [1] * (len(r_ids) + len(sep))
        if len(ids) != len(p_ids) + len(r_ids) + n_special:  # tokenizer with other specials
            enc = tokenizer(tokenizer.decode(p_ids), tokenizer.decode(r_ids))
            ids, tt = enc["input_ids"], enc.get("token_type_ids")
        return Encoded(ids, tt, prompt_trunc, resp_trunc)
    ids = p_ids + r_ids
    if kind == "plain" and n_special:
        bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        ids = bos + ids
    return Encoded(ids, None, prompt_trunc, resp_trunc)


MARKERS = ("bos", "eos")


def drop_markers(encoded: Encoded, tokenizer: Any, which: tuple[str, ...] | list[str]) -> Encoded:
    """``encoded`` without its begin- and/or end-of-sequence markers (a scoring-robustness check:
    how much of a score is read off the markers). ``bos``: the first token when it is the
    tokenizer's BOS or CLS token. ``eos``: everything from the first special token of the trailing
    run of special and whitespace-only tokens after the response (``<|im_end|>\\n``,
    ``<|eot_id|>``, a BERT pair's final ``[SEP]``); whitespace the response itself ends with is kept.
    Token types are cut alike; at least one token is always kept."""
    unknown = sorted(set(which) - set(MARKERS))
    if unknown:
        raise ValueError(f"unknown marker(s) {unknown}; known: {', '.join(MARKERS)}")
    ids = list(encoded.input_ids)
    start, stop = 0, len(ids)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    if "eos" in which:
        i, first_special = len(ids), None
        while i > 1:
            t = ids[i - 1]
            if t in special:
                first_special = i - 1
            elif tokenizer.decode([t]).strip():
                break
            i -= 1
        if first_special is not None:
            stop = first_special
    if "bos" in which and ids:
        starts = {tokenizer.bos_token_id, tokenizer.cls_token_id} - {None}
        if ids[0] in starts:
            start = 1
    if stop - start < 1:
        return encoded
    tt = encoded.token_type_ids[start:stop] if encoded.token_type_ids is not None else None
    return Encoded(ids[start:stop], tt, encoded.prompt_truncated, encoded.response_truncated)


def pad_batch(encoded: list[Encoded], pad_id: int, padding_side: str = "right") -> dict[str, torch.Tensor]:
    """Dynamic padding to the longest sequence in the batch."""
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    has_tt = encoded[0].token_type_ids is not None
    tt = torch.zeros((len(encoded), width), dtype=torch.long) if has_tt else None
    for i, e in enumerate(encoded):
        n = len(e)
        sl = slice(0, n) if padding_side == "right" else slice(width - n, width)
        ids[i, sl] = torch.tensor(e.input_ids)
        mask[i, sl] = 1
        if tt is not None:
            tt[i, sl] = torch.tensor(e.token_type_ids)
    out = {"input_ids": ids, "attention_mask": mask}
    if tt is not None:
        out["token_type_ids"] = tt
    return out
