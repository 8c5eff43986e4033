"""HelpSteer2's per-annotator ratings (``disagreements/disagreements.jsonl.gz`` in ``nvidia/HelpSteer2``).

Schema: ``prompt, response, helpfulness, correctness, coherence, complexity, verbosity``, where
each attribute is a LIST of the individual annotators' ratings (ints 0-4; usually 3, 2 to 5). The
file holds train and validation rows without a split column. ``load_helpsteer2_annotations``
returns a long table (prompt_id, response_id, attribute, value, annotator), one row per rating:

* with ``rating_set`` the rows are matched to that set's responses by exact prompt and response
  text (HelpSteer2 inline prompt format), so the annotations carry its ids; rows that match no
  response are skipped and counted (``skipped["unmatched"]``: e.g. the other split's rows);
* without, consecutive rows with the same prompt form a prompt, as in the rating files.

A row whose lists are not lists of numbers raises a DataError naming file, row and field, or with
``on_bad="skip"`` is dropped and counted.
"""

from __future__ import annotations

import os
from collections import Counter

import pandas as pd

from rmcore.data.generic import coerce_rating, is_missing, read_records, require_text
from rmcore.data.helpsteer import HELPSTEER2_HUB_ID, HELPSTEER_ATTRIBUTES, raw_prompt
from rmcore.data.schema import RatingSet, check_on_bad
from rmcore.errors import DataError

ANNOTATIONS_FILE = "disagreements/disagreements.jsonl.gz"


def _local(path: str | os.PathLike) -> tuple[str, str]:
    p = str(path)
    if p in ("hub", HELPSTEER2_HUB_ID):
        from huggingface_hub import hf_hub_download

        return hf_hub_download(repo_id=HELPSTEER2_HUB_ID, filename=ANNOTATIONS_FILE, repo_type="dataset"), \
            f"{HELPSTEER2_HUB_ID}/{ANNOTATIONS_FILE}"
    return p, p


def load_helpsteer2_annotations(path: str | os.PathLike, rating_set: RatingSet | None = None, *,
                                on_bad: str = "raise") -> tuple[pd.DataFrame, Counter]:
    """(long table of individual ratings, skipped counts); see module doc. ``path`` may be "hub"."""
    check_on_bad(on_bad)
    local, file = _local(path)
    records = read_records(local)
    index: dict[tuple[str, str], tuple[str, str]] = {}
    if rating_set is not None:
        for rec in rating_set.prompts:
            raw = raw_prompt(rec)
            for r in rec.responses:
                index.setdefault((raw, r.text), (rec.prompt_id, r.response_id))
    skipped: Counter = Counter()
    rows: list[dict] = []
    last_prompt, n_prompts, n_in_prompt = None, 0, 0
    for row_no, row in records:
        try:
            prompt = require_text(row.get("prompt"), file=file, row=row_no, field="prompt")
            text = require_text(row.get("response"), file=file, row=row_no, field="response")
            ratings: dict[str, list[float]] = {}
            for a in HELPSTEER_ATTRIBUTES:
                v = row.get(a)
                if is_missing(v) or not isinstance(v, (list, tuple)) or not v:
                    raise DataError(f"expected a non-empty list of annotator ratings, got {v!r}", file=file,
                                    row=row_no, field=a)
                ratings[a] = [coerce_rating(x, file=file, row=row_no, field=a) for x in v]
        except DataError as e:
            if on_bad == "raise":
                raise
            skipped[f"bad_{e.field or 'row'}"] += 1
            continue
        if rating_set is not None:
            ids = index.get((prompt, text))
            if ids is None:
                skipped["unmatched"] += 1
                continue
        else:
            if prompt != last_prompt:
                n_prompts, n_in_prompt, last_prompt = n_prompts + 1, 0, prompt
            pid = f"ann-{n_prompts - 1:05d}"
            ids = (pid, f"{pid}:r{n_in_prompt}")
            n_in_prompt += 1
        for a, vals in ratings.items():
            rows += [{"prompt_id": ids[0], "response_id": ids[1], "attribute": a, "value": x, "annotator": j}
                     for j, x in enumerate(vals)]
    cols = ["prompt_id", "response_id", "attribute", "value", "annotator"]
    return pd.DataFrame(rows, columns=cols), skipped


__all__ = ["ANNOTATIONS_FILE", "load_helpsteer2_annotations"]
