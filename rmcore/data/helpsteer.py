"""HelpSteer2 and HelpSteer loaders (NVIDIA, CC-BY-4.0).

Rows: ``prompt, response, helpfulness, correctness, coherence, complexity, verbosity`` (ints 0-4).
Consecutive rows with the same prompt are the responses to one prompt (2 in HelpSteer2, up to 4 in
HelpSteer); only *consecutive* identical prompts are grouped, as in the release, so a prompt that
reappears later becomes a separate record. Multi-turn prompts hold the earlier turns inline::

    {user turn 1}
    <extra_id_1>Assistant
    {assistant turn 1}
    <extra_id_1>User
    {user turn 2}

and are parsed into alternating user/assistant messages ending with a user turn.

HelpSteer2's released preference annotations (``preference/preference.jsonl.gz`` in the Hub repo:
``split, prompt, response_1, response_2, preference_strength, preference_statement,
preference_elaboration, three_most_similar_preferences, all_preferences_unprocessed``;
strength -3..3, negative = response_1 better) are matched to the loaded prompts by exact text and
attached as ``Preference(prompt_id, chosen_id, rejected_id, strength=|strength|)``. Strength 0 is a
tie: skipped and counted (``skipped["preference_tie"]``), as are labels whose texts match no loaded
prompt/response pair (``skipped["preference_unmatched"]``).

Sources: a Hub id (``nvidia/HelpSteer2`` with ``split``) or a local jsonl / jsonl.gz / parquet file.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

from rmcore.data.generic import (
    Record,
    coerce_rating,
    is_missing,
    read_records,
    require_text,
    source_records,
)
from rmcore.data.schema import DEFAULT_ATTRIBUTES, Message, Preference, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import DataError

HELPSTEER2_HUB_ID = "nvidia/HelpSteer2"
HELPSTEER_HUB_ID = "nvidia/HelpSteer"
PREFERENCE_FILE = "preference/preference.jsonl.gz"  # inside the HelpSteer2 Hub repo
HELPSTEER_ATTRIBUTES = DEFAULT_ATTRIBUTES

# a separator line; tolerant of surrounding spaces and \r\n line ends
_SEP = re.compile(r"^[ \t]*<extra_id_1>[ \t]*(Assistant|User)[ \t]*\r?$", re.MULTILINE)


def parse_helpsteer_prompt(prompt: str) -> list[Message]:
    """Split a HelpSteer prompt into chat messages (user first, alternating, ending with user).

    Raises ValueError when the separators do not alternate or the conversation ends with an
    assistant turn."""
    parts = _SEP.split(prompt)
    # parts = [user1, "Assistant", a1, "User", u2, ...]
    msgs: list[Message] = [{"role": "user", "content": parts[0].strip("\n")}]
    for i in range(1, len(parts), 2):
        role = "assistant" if parts[i] == "Assistant" else "user"
        if role == msgs[-1]["role"]:
            raise ValueError(f"two consecutive {role} turns")
        msgs.append({"role": role, "content": parts[i + 1].strip("\n")})
    if msgs[-1]["role"] != "user":
        raise ValueError("conversation ends with an assistant turn")
    return msgs


def _load_helpsteer_rows(path: str | os.PathLike, split: str, *, name: str, source: str,
                         limit: int | None, on_bad: str) -> RatingSet:
    check_on_bad(on_bad)
    records, file = source_records(path, split)
    skipped: Counter = Counter()
    prompts: list[PromptRecord] = []
    last_prompt: str | None = None
    for row_no, row in records:
        try:
            prompt = require_text(row.get("prompt"), file=file, row=row_no, field="prompt")
            text = require_text(row.get("response"), file=file, row=row_no, field="response")
            ratings = {a: coerce_rating(row.get(a), file=file, row=row_no, field=a) for a in HELPSTEER_ATTRIBUTES}
            if prompt != last_prompt:
                try:
                    msgs = parse_helpsteer_prompt(prompt)
                except ValueError as e:
                    raise DataError(f"malformed multi-turn prompt ({e})", file=file, row=row_no,
                                    field="prompt") from None
        except DataError as e:
            if on_bad == "raise":
                raise e.skippable() from None
            skipped[f"bad_{e.field or 'row'}"] += 1
            continue
        if prompt != last_prompt:
            if limit is not None and len(prompts) >= limit:
                break
            pid = f"{split}-{len(prompts):05d}"
            prompts.append(PromptRecord(prompt_id=pid, messages=msgs, responses=[], source=source,
                                        meta={"split": split, "source_file": file, "source_row": row_no,
                                              "raw_prompt": prompt}))
            last_prompt = prompt
        rec = prompts[-1]
        rec.responses.append(Response(response_id=f"{rec.prompt_id}:r{len(rec.responses)}", text=text,
                                      ratings=ratings, meta={"source_file": file, "source_row": row_no}))
    return RatingSet(prompts=prompts, name=name, attributes=HELPSTEER_ATTRIBUTES, skipped=skipped)


def load_helpsteer2(path: str | os.PathLike = HELPSTEER2_HUB_ID, split: str = "train", *,
                    preference_path: str | os.PathLike | None = None, limit: int | None = None,
                    on_bad: str = "raise") -> RatingSet:
    """HelpSteer2 ratings; with `preference_path` also its released preference labels.

    `preference_path` may be a local preference jsonl(.gz)/parquet, or "hub" to download
    ``preference/preference.jsonl.gz`` from ``nvidia/HelpSteer2``. `limit` keeps the first prompts."""
    rs = _load_helpsteer_rows(path, split, name=f"helpsteer2-{split}", source="helpsteer2",
                              limit=limit, on_bad=on_bad)
    if preference_path is not None:
        attach_helpsteer2_preferences(rs, preference_path, split=split, on_bad=on_bad)
    return rs


def load_helpsteer(path: str | os.PathLike = HELPSTEER_HUB_ID, split: str = "train", *,
                   limit: int | None = None, on_bad: str = "raise") -> RatingSet:
    """HelpSteer (v1): same columns as HelpSteer2, up to 4 responses per prompt, no preference file."""
    return _load_helpsteer_rows(path, split, name=f"helpsteer-{split}", source="helpsteer",
                                limit=limit, on_bad=on_bad)


def read_helpsteer2_preferences(preference_path: str | os.PathLike) -> tuple[list[Record], str]:
    """Rows of the preference file; "hub" (or the HelpSteer2 repo id) downloads it from the Hub."""
    p = str(preference_path)
    if p in ("hub", HELPSTEER2_HUB_ID):
        from huggingface_hub import hf_hub_download

        local = hf_hub_download(repo_id=HELPSTEER2_HUB_ID, filename=PREFERENCE_FILE, repo_type="dataset")
        return read_records(local), f"{HELPSTEER2_HUB_ID}/{PREFERENCE_FILE}"
    return read_records(preference_path), p


def _split_name(split: str) -> str:
    """The preference file may name the Hub's 'validation' split 'val'."""
    return "validation" if str(split) in ("val", "valid", "validation") else str(split)


def attach_helpsteer2_preferences(rs: RatingSet, preference_path: str | os.PathLike, *,
                                  split: str | None = None, on_bad: str = "raise") -> RatingSet:
    """Match preference rows to `rs` by prompt and response text and append Preferences (in place).

    Rows of another `split` are ignored (the released file holds train and validation)."""
    check_on_bad(on_bad)
    records, file = read_helpsteer2_preferences(preference_path)
    # index: raw prompt text -> records; response text -> id within each record
    by_prompt: dict[str, list[PromptRecord]] = {}
    for rec in rs.prompts:
        by_prompt.setdefault(raw_prompt(rec), []).append(rec)
    for row_no, row in records:
        if split is not None and not is_missing(row.get("split")) and _split_name(row["split"]) != _split_name(split):
            rs.skipped["preference_other_split"] += 1
            continue
        try:
            for f in ("prompt", "response_1", "response_2"):
                require_text(row.get(f), file=file, row=row_no, field=f)
            strength = coerce_rating(row.get("preference_strength"), file=file, row=row_no,
                                     field="preference_strength")
            if strength not in (-3, -2, -1, 0, 1, 2, 3):
                raise DataError(f"preference_strength must be an integer in -3..3, got {strength}",
                                file=file, row=row_no, field="preference_strength")
        except DataError as e:
            if on_bad == "raise":
                raise e.skippable() from None
            rs.skipped[f"bad_preference_{e.field or 'row'}"] += 1
            continue
        if strength == 0:  # "about the same": no direction to learn
            rs.skipped["preference_tie"] += 1
            continue
        match = _match(by_prompt.get(row["prompt"], []), row["response_1"], row["response_2"])
        if match is None:
            rs.skipped["preference_unmatched"] += 1
            continue
        rec, id1, id2 = match
        chosen, rejected = (id1, id2) if strength < 0 else (id2, id1)
        rs.preferences.append(Preference(prompt_id=rec.prompt_id, chosen_id=chosen, rejected_id=rejected,
                                          strength=abs(strength), subset=row.get("split") or split,
                                          meta=(("source_row", row_no),)))
    return rs


def raw_prompt(rec: PromptRecord) -> str:
    """The prompt in HelpSteer's inline format: as loaded, else re-serialised from the messages."""
    if isinstance(rec.meta.get("raw_prompt"), str):
        return rec.meta["raw_prompt"]
    out = rec.messages[0]["content"]
    for m in rec.messages[1:]:
        out += f"\n<extra_id_1>{'Assistant' if m['role'] == 'assistant' else 'User'}\n{m['content']}"
    return out


def _match(candidates: list[PromptRecord], r1: str, r2: str) -> tuple[PromptRecord, str, str] | None:
    for rec in candidates:
        ids = {}
        for r in rec.responses:
            ids.setdefault(r.text, r.response_id)
        if r1 in ids and r2 in ids and ids[r1] != ids[r2]:
            return rec, ids[r1], ids[r2]
    return None


def helpsteer_rows_from(rs: RatingSet) -> list[dict[str, Any]]:
    """Inverse of the loader (HelpSteer row format); handy for writing test/fixture files."""
    rows = []
    for rec in rs.prompts:
        for r in rec.responses:
            rows.append({"prompt": raw_prompt(rec), "response": r.text,
                         **{a: r.ratings.get(a) for a in HELPSTEER_ATTRIBUTES}})
    return rows


__all__ = [
    "HELPSTEER2_HUB_ID", "HELPSTEER_HUB_ID", "PREFERENCE_FILE", "attach_helpsteer2_preferences",
    "helpsteer_rows_from", "load_helpsteer", "load_helpsteer2", "parse_helpsteer_prompt",
    "read_helpsteer2_preferences",
]
