"""The perturbed RM-Bench files Reward Auditor publishes (``datasets/`` of hggzjx/RewardAuditor), so a
suitability audit runs on exactly the paper's perturbations (``CODE@auditor`` in
``rmeval.perturbations.suite``).

Layout: for each of the five tasks (chat, code, math, safety-accept, safety-refuse; RM-Bench's
chat, code, math, safety-response and safety-refuse, every item) two JSON lists,
``{task}_filtered_prompt_disturbance.json`` with rows ``{id, subset, prompt: [6], chosen, rejected}``
(the prompt as [original, EF, PH, IU, IW, CN]; chosen and rejected one string each) and
``{task}_filtered_response_disturbance.json`` with rows ``{id, subset, prompt, chosen: [6],
rejected: [6]}`` (the same originals as the prompt file). Rows also carry RM-Bench's item fields:
``error_key`` and ``error`` (chat), ``language`` and ``task_id`` (code), ``unique_id`` (math). Ids
are RM-Bench's (integers) and repeat across tasks. The response versions are, by their content,
[original, LE, SP, ST, LC, SLC]: versions 0, 1 and 2 are RM-Bench's style levels 0 (concise), 1
(detailed plain text) and 2 (detailed Markdown) verbatim, so LE is RM-Bench's 0 → 1 and SP its
0 → 2 (in chat level 1 is level 2's text without the Markdown; in the safety tasks RM-Bench's levels
1 and 2 are separately written responses); version 3 rewrites the concise response with synonyms
(ST), version 4 translates it into Chinese (LC), version 5 is a Chinese version of the detailed
response (SLC). The released audit script names the columns in file order ST, LE, SP, LC, SLC;
``labels="script"`` reads them that way, to reproduce its response tables. (For the prompt file the
script takes ``chosen[0]`` and ``rejected[0]`` of these strings, their first character, as the
responses; this importer reads the whole responses.)

Each id becomes one prompt ``{task}-{id}`` with the original prompt, the original chosen and
rejected responses and one Preference; the perturbed versions are kept in
``PromptRecord.meta["perturbed"]`` as ``{code: {"prompt": text}}`` (controlled) or
``{code: {"chosen": text, "rejected": text}}`` (stylized), ``meta["domain"]`` names the task and
RM-Bench's item fields present in the row are kept in ``meta`` under their names. A path is one file
(that file alone) or a directory (every task whose files it holds; ``task`` picks some: a list, or
names joined by ``+``, as in the spec string ``reward_auditor:DIR,task=chat+safety-refuse``). When a task
has both files, the original prompt and responses must agree. A version that is empty is left out
(its twin counts as failed); a malformed row raises a DataError naming file, row and field, or with
``on_bad="skip"`` is dropped and counted in ``RatingSet.skipped``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from rmcore.data.generic import is_missing, read_records
from rmcore.data.schema import Preference, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import ConfigError, DataError

REPO_URL = "https://github.com/hggzjx/RewardAuditor/tree/main/datasets"
PROMPT_CODES = ("EF", "PH", "IU", "IW", "CN")
RESPONSE_CODES = {"content": ("LE", "SP", "ST", "LC", "SLC"), "script": ("ST", "LE", "SP", "LC", "SLC")}
ITEM_FIELDS = ("error_key", "error", "language", "task_id", "unique_id")  # RM-Bench's, kept in meta
_FILE = re.compile(r"^(?P<task>.+)_filtered_(?P<kind>prompt|response)_disturbance\.json$")


def task_files(path: str | os.PathLike, task: str | list[str] | None = None) -> dict[str, dict[str, Path]]:
    """task -> {"prompt": file, "response": file} (whichever exist) for a file or a directory."""
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        raise FileNotFoundError(f"{p}: not found. Reward Auditor's perturbed RM-Bench files are on GitHub "
                                f"({REPO_URL}); download them and pass the file or the folder.")
    files = sorted(p.glob("*_disturbance.json")) if p.is_dir() else [p]
    out: dict[str, dict[str, Path]] = {}
    for f in files:
        m = _FILE.match(f.name)
        if not m:
            raise DataError("not a Reward Auditor file (expected TASK_filtered_prompt_disturbance.json or "
                            "TASK_filtered_response_disturbance.json)", file=str(f))
        out.setdefault(m["task"], {})[m["kind"]] = f
    if not out:
        raise DataError("no Reward Auditor files (*_filtered_{prompt,response}_disturbance.json) here", file=str(p))
    if task:
        wanted = [t.strip() for t in (re.split(r"[,+]", task) if isinstance(task, str) else task) if t.strip()]
        missing = [t for t in wanted if t not in out]
        if missing:
            raise ConfigError(f"reward_auditor: no files for task(s) {missing} in {p}; found {sorted(out)}")
        out = {t: out[t] for t in wanted}
    return out


def _texts(value: Any, n: int, *, file: str, row: int, field: str) -> list[str | None]:
    """A list of ``n`` versions; an empty version is None (its twin fails), anything else an error."""
    if not isinstance(value, list) or len(value) != n:
        raise DataError(f"expected a list of {n} versions", file=file, row=row, field=field)
    out: list[str | None] = []
    for i, v in enumerate(value):
        if v is not None and not isinstance(v, str):
            raise DataError(f"version {i} is not text", file=file, row=row, field=f"{field}[{i}]")
        out.append(None if is_missing(v) else v)
    if out[0] is None:
        raise DataError("empty original", file=file, row=row, field=f"{field}[0]")
    return out


def _one(value: Any, *, file: str, row: int, field: str) -> str:
    """The original response of a prompt file: a string (or a list whose first entry is it)."""
    v = value[0] if isinstance(value, list) and value else value
    if is_missing(v) or not isinstance(v, str):
        raise DataError("empty or missing text", file=file, row=row, field=field)
    return v


def _fields(r: dict) -> dict[str, Any]:
    return {k: r[k] for k in ITEM_FIELDS if not is_missing(r.get(k))}


def _read_task(task: str, files: dict[str, Path], labels: str, limit: int | None,
               bad: Any) -> dict[Any, dict[str, Any]]:
    """id -> {prompt, chosen, rejected, subset, fields, perturbed, where} for one task."""
    rows: dict[Any, dict[str, Any]] = {}
    dropped: set[Any] = set()  # ids of prompt-file rows dropped as malformed (on_bad skip)
    if "prompt" in files:
        f = str(files["prompt"])
        for row_no, r in read_records(files["prompt"])[:limit]:
            try:
                if is_missing(r.get("id")):
                    raise DataError("missing id", file=f, row=row_no, field="id")
                prompts = _texts(r.get("prompt"), 1 + len(PROMPT_CODES), file=f, row=row_no, field="prompt")
                rec = {"prompt": prompts[0], "chosen": _one(r.get("chosen"), file=f, row=row_no, field="chosen"),
                       "rejected": _one(r.get("rejected"), file=f, row=row_no, field="rejected"),
                       "subset": r.get("subset"), "fields": _fields(r),
                       "where": {"source_file": f, "source_row": row_no},
                       "perturbed": {c: {"prompt": t} for c, t in zip(PROMPT_CODES, prompts[1:]) if t is not None}}
                if r["id"] in rows:
                    raise DataError(f"duplicate id {r['id']!r}", file=f, row=row_no, field="id")
            except DataError as e:
                bad("reward_auditor_malformed", e)
                if not is_missing(r.get("id")):
                    dropped.add(r["id"])
                continue
            rows[r["id"]] = rec
    if "response" in files:
        f = str(files["response"])
        codes = RESPONSE_CODES[labels]
        seen: set[Any] = set()
        for row_no, r in read_records(files["response"])[:limit]:
            try:
                if is_missing(r.get("id")):
                    raise DataError("missing id", file=f, row=row_no, field="id")
                if r["id"] in seen:
                    raise DataError(f"duplicate id {r['id']!r}", file=f, row=row_no, field="id")
                seen.add(r["id"])
                prompt = r.get("prompt")
                if is_missing(prompt) or not isinstance(prompt, str):
                    raise DataError("empty or missing text", file=f, row=row_no, field="prompt")
                ch = _texts(r.get("chosen"), 1 + len(codes), file=f, row=row_no, field="chosen")
                rj = _texts(r.get("rejected"), 1 + len(codes), file=f, row=row_no, field="rejected")
                rec = rows.get(r["id"]) if "prompt" in files else None
                if rec is not None:
                    for field, mine, theirs in (("prompt", prompt, rec["prompt"]), ("chosen[0]", ch[0], rec["chosen"]),
                                                ("rejected[0]", rj[0], rec["rejected"])):
                        if mine != theirs:
                            raise DataError(f"differs from the prompt file's original ({files['prompt'].name})",
                                            file=f, row=row_no, field=field)
                    rec["fields"] = {**_fields(r), **rec["fields"]}
                elif "prompt" in files:
                    if r["id"] in dropped or limit is not None:
                        continue  # dropped from the prompt file (and counted there), or cut by limit
                    raise DataError(f"id {r['id']!r} has no row in {files['prompt'].name}", file=f, row=row_no,
                                    field="id")
                else:
                    rec = rows[r["id"]] = {"prompt": prompt, "chosen": ch[0], "rejected": rj[0],
                                           "subset": r.get("subset"), "fields": _fields(r), "perturbed": {},
                                           "where": {"source_file": f, "source_row": row_no}}
                rec["perturbed"].update({c: {"chosen": a, "rejected": b} for c, a, b in zip(codes, ch[1:], rj[1:])
                                         if a is not None and b is not None})
            except DataError as e:
                bad("reward_auditor_malformed", e)
    return rows


def load_reward_auditor(path: str | os.PathLike, *, task: str | list[str] | None = None, labels: str = "content",
                        limit: int | None = None, on_bad: str = "raise") -> RatingSet:
    """Reward Auditor's perturbed RM-Bench files as a preference set (module doc); ``limit``: the
    first rows of each file."""
    check_on_bad(on_bad)
    if labels not in RESPONSE_CODES:
        raise ConfigError(f"reward_auditor: labels must be 'content' or 'script', got {labels!r}")
    skipped: Counter = Counter()

    def bad(reason: str, err: DataError) -> None:
        if on_bad == "raise":
            raise err.skippable()
        skipped[reason] += 1

    tasks = task_files(path, task)
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    for t, files in tasks.items():
        for id_, r in _read_task(t, files, labels, limit, bad).items():
            pid = f"{t}-{id_}"
            subset = r["subset"] if isinstance(r["subset"], str) and r["subset"] else None
            meta = {**r["fields"], "subset": subset, "domain": t, "id": id_, "perturbed": r["perturbed"],
                    **r["where"]}
            prompts.append(PromptRecord(pid, [{"role": "user", "content": r["prompt"]}], [
                Response(f"{pid}:chosen", r["chosen"], meta={"label": "chosen", **r["where"]}),
                Response(f"{pid}:rejected", r["rejected"], meta={"label": "rejected", **r["where"]})],
                source="reward_auditor", meta=meta))
            prefs.append(Preference(pid, f"{pid}:chosen", f"{pid}:rejected", subset=subset))
    name = "reward_auditor-" + "+".join(tasks)
    return RatingSet(prompts=prompts, name=name, attributes=(), preferences=prefs, skipped=skipped)
