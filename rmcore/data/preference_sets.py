"""Released preference sets without ratings: Anthropic HH-RLHF and RM-Bench.

HH-RLHF rows hold two full transcripts (``chosen``, ``rejected``) of ``"\\n\\nHuman: ..."`` /
``"\\n\\nAssistant: ..."`` turns that share every turn but the last assistant turn. Each row becomes
a PromptRecord (the shared turns as messages, two responses ``{pid}:chosen`` / ``{pid}:rejected``)
plus one Preference. A bad row raises a DataError naming file, row and field (``on_bad="raise"``,
the default, as for every loader); with ``on_bad="skip"`` it is skipped and counted by reason in
``RatingSet.skipped``. Bad means: a
transcript is malformed (``hh_malformed``: no turns, text before the first turn, turns that do not
alternate Human/Assistant, or no final assistant turn), the two do not share the prefix
(``hh_prefix_mismatch``), a final response is empty (``hh_empty_response``) or both final
responses are identical (``hh_identical_responses``).

RM-Bench (Liu et al., ICLR 2025; JSON files from its GitHub repository) rows are
``{id, prompt, subset, chosen[3], rejected[3], error_key?, error?}``; index = style level
(0 concise, 1 detailed plain, 2 detailed Markdown). Each prompt gets six responses
``{id}:chosen:{i}`` / ``{id}:rejected:{i}`` (meta ``{"style": i, "label": ...}``) and nine
Preferences, every chosen style i against every rejected style j.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from rmcore.data.generic import Record, hub_records, is_missing, read_records, require_text
from rmcore.data.schema import Message, Preference, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import DataError
from rmcore.io.files import is_hub_id

HH_RLHF_HUB_ID = "Anthropic/hh-rlhf"
RM_BENCH_URL = "https://github.com/THU-KEG/RM-Bench/tree/main/data"

_HH_TURN = re.compile(r"\n\n(Human|Assistant):[ ]?")


def parse_hh_transcript(text: str) -> list[Message]:
    """``"\\n\\nHuman: a\\n\\nAssistant: b"`` -> messages. Raises ValueError when malformed."""
    parts = _HH_TURN.split(text)
    if parts[0].strip():
        raise ValueError("text before the first turn")
    if len(parts) < 3:
        raise ValueError("no Human/Assistant turns")
    msgs: list[Message] = []
    for i in range(1, len(parts), 2):
        role = "user" if parts[i] == "Human" else "assistant"
        expected = "user" if not msgs or msgs[-1]["role"] == "assistant" else "assistant"
        if role != expected:
            raise ValueError(f"turn {len(msgs) + 1} is {parts[i]}, expected the other role")
        msgs.append({"role": role, "content": parts[i + 1].strip()})
    if msgs[-1]["role"] != "assistant":
        raise ValueError("no final assistant turn")
    return msgs


def load_hh_rlhf(path: str | os.PathLike = HH_RLHF_HUB_ID, split: str = "test", *,
                 data_dir: str | None = "harmless-base", limit: int | None = None,
                 on_bad: str = "raise") -> RatingSet:
    """HH-RLHF as prompts with a chosen and a rejected response; `limit` keeps the first rows.

    A Hub id loads ``load_dataset("Anthropic/hh-rlhf", data_dir=data_dir, split=split)``; a local
    jsonl(.gz) is read directly. Prompt ids are ``hh-{row:05d}`` (row = line number) so they stay
    stable whichever rows are skipped."""
    if is_hub_id(path):
        records: list[Record] = hub_records(str(path), split, **({"data_dir": data_dir} if data_dir else {}))
        file, subset = f"{path}/{data_dir or ''}[{split}]", data_dir or "hh-rlhf"
    else:
        records, file = read_records(path), str(path)
        subset = Path(path).name.split(".")[0].removesuffix(f"_{split}")
    check_on_bad(on_bad)
    skipped: Counter = Counter()
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []

    def bad(reason: str, msg: str, row_no: int, field: str) -> None:
        if on_bad == "raise":
            raise DataError(msg, file=file, row=row_no, field=field).skippable()
        skipped[reason] += 1

    for row_no, row in records[:limit] if limit is not None else records:
        parsed = {}
        for field in ("chosen", "rejected"):
            if is_missing(row.get(field)):
                bad("hh_malformed", "missing transcript", row_no, field)
                break
            try:
                parsed[field] = parse_hh_transcript(row[field])
            except ValueError as e:
                bad("hh_malformed", f"malformed transcript ({e})", row_no, field)
                break
        if len(parsed) < 2:
            continue
        chosen, rejected = parsed["chosen"], parsed["rejected"]
        if chosen[:-1] != rejected[:-1]:
            bad("hh_prefix_mismatch", "chosen and rejected do not share the turns before the last", row_no,
                "rejected")
            continue
        a, b = chosen[-1]["content"], rejected[-1]["content"]
        if not a or not b:
            bad("hh_empty_response", "empty final response", row_no, "chosen" if not a else "rejected")
            continue
        if a == b:
            bad("hh_identical_responses", "chosen and rejected final responses are identical", row_no, "rejected")
            continue
        pid = f"hh-{row_no:05d}"
        where = {"source_file": file, "source_row": row_no}
        prompts.append(PromptRecord(
            prompt_id=pid, messages=chosen[:-1], source="hh_rlhf", meta={"subset": subset, **where},
            responses=[Response(f"{pid}:chosen", a, meta={"label": "chosen", **where}),
                       Response(f"{pid}:rejected", b, meta={"label": "rejected", **where})]))
        prefs.append(Preference(pid, f"{pid}:chosen", f"{pid}:rejected", subset=subset))
    return RatingSet(prompts=prompts, name=f"hh_rlhf-{subset}", attributes=(), preferences=prefs,
                     skipped=skipped)


# RM-Bench subsets -> section, for rows whose file name does not say it
_RMB_SECTIONS = {"alpacaeval": "chat", "refusals-dangerous": "safety", "refusals-offensive": "safety",
                 "xstest-should-refuse": "safety", "xstest-should-respond": "safety",
                 "donotanswer": "safety", "math-prm": "math"}


def rm_bench_section(file_name: str | None, subset: str | None) -> str:
    """"chat" / "safety" / "math" / "code" from the file name (``safety-refuse_filtered.json`` ->
    "safety"), else from the subset, else "unknown"."""
    if file_name:
        stem = Path(file_name).name.split(".")[0].removesuffix("_filtered")
        head = stem.split("-")[0].split("_")[0].lower()
        if head in ("chat", "safety", "math", "code"):
            return head
    if subset:
        if subset in _RMB_SECTIONS:
            return _RMB_SECTIONS[subset]
        if subset.startswith("hep-"):
            return "code"
    return "unknown"


def load_rm_bench(path: str | os.PathLike, *, limit: int | None = None) -> RatingSet:
    """RM-Bench JSON file, or a directory of them (all ``*.json`` in name order).

    RM-Bench is distributed as JSON on GitHub, not as a Hub dataset: pass a local path."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file. RM-Bench is distributed as JSON files on GitHub "
                                f"({RM_BENCH_URL}); download one and pass its path.")
    files = sorted(p.glob("*.json")) if p.is_dir() else [p]
    if not files:
        raise DataError(f"rm_bench: no files matching *.json found in the folder {p} (RM-Bench is distributed as "
                        f"JSON files on GitHub: {RM_BENCH_URL})")
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    seen: set[str] = set()
    for f in files:
        for row_no, row in read_records(f):
            if limit is not None and len(prompts) >= limit:
                break
            rec, rec_prefs = _rm_bench_row(row, file=str(f), row_no=row_no)
            if rec.prompt_id in seen:
                raise DataError(f"duplicate id {rec.prompt_id!r}", file=str(f), row=row_no, field="id")
            seen.add(rec.prompt_id)
            prompts.append(rec)
            prefs.extend(rec_prefs)
    name = "rm_bench" if p.is_dir() else f"rm_bench-{p.name.split('.')[0].removesuffix('_filtered')}"
    return RatingSet(prompts=prompts, name=name, attributes=(), preferences=prefs)


def _rm_bench_row(row: dict, *, file: str, row_no: int) -> tuple[PromptRecord, list[Preference]]:
    if is_missing(row.get("id")):
        raise DataError("missing id", file=file, row=row_no, field="id")
    pid = str(row["id"])
    prompt = require_text(row.get("prompt"), file=file, row=row_no, field="prompt")
    subset = row.get("subset") or None
    where = {"source_file": file, "source_row": row_no}
    responses: list[Response] = []
    for label in ("chosen", "rejected"):
        texts = row.get(label)
        if not isinstance(texts, list) or len(texts) != 3:
            raise DataError("expected a list of 3 responses (style levels 0-2)", file=file, row=row_no,
                            field=label)
        for i, t in enumerate(texts):
            require_text(t, file=file, row=row_no, field=f"{label}[{i}]")
            responses.append(Response(f"{pid}:{label}:{i}", t, meta={"style": i, "label": label, **where}))
    meta = {"subset": subset, "section": rm_bench_section(file, subset), **where}
    for k in ("error_key", "error"):
        if not is_missing(row.get(k)):
            meta[k] = row[k]
    rec = PromptRecord(pid, [{"role": "user", "content": prompt}], responses, source="rm_bench", meta=meta)
    prefs = [Preference(pid, f"{pid}:chosen:{i}", f"{pid}:rejected:{j}", subset=subset,
                        meta=(("chosen_style", i), ("rejected_style", j)))
             for i in range(3) for j in range(3)]
    return rec, prefs
