"""Stanford Human Preferences (``stanfordnlp/SHP``): Reddit posts with voted comments.

Each row is a PAIR of top-level comments to one post: ``post_id, domain, upvote_ratio, history,
c_root_id_A, c_root_id_B, created_at_utc_A, created_at_utc_B, score_A, score_B, human_ref_A,
human_ref_B, labels, seconds_difference, score_ratio`` (``labels`` = 1 when A is preferred). The
loader rebuilds each post's comment set: a post is a prompt (its ``history`` the user turn), each
distinct comment (by ``c_root_id``) a response rated ``votes`` (its score) and ``log_votes``
(log of it: vote counts are heavy-tailed), and every row a released preference.

Votes carry exposure: a comment that was up longer, under a post that drew more readers, collects
more votes regardless of quality. SHP releases no view counts, so the loader records a proxy in
``Response.meta["exposure"]``: the log of the hours between the comment's creation and the newest
comment in the file (how long it could collect votes before the data were taken). ``rmeval human``
reports the share of ``log_votes`` with and without that proxy regressed out; the vote share is
context, not a human reference (the study reports 0.49, 0.39 after its exposure adjustment).

Sources: the Hub id (``stanfordnlp/SHP`` with ``split``) or a local jsonl / jsonl.gz / parquet file.
Comments with a score below 1 have no log vote count: a DataError, or skipped and counted.
"""

from __future__ import annotations

import math
import os
from collections import Counter

from rmcore.data.generic import (
    coerce_rating,
    require_text,
    source_records,
)
from rmcore.data.schema import Preference, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import DataError

SHP_HUB_ID = "stanfordnlp/SHP"
SHP_ATTRIBUTES = ("log_votes", "votes")


def load_shp(path: str | os.PathLike = SHP_HUB_ID, split: str = "validation", *, limit: int | None = None,
             on_bad: str = "raise") -> RatingSet:
    """SHP posts (first ``limit`` posts in file order) with their comments, votes and preferences."""
    check_on_bad(on_bad)
    records, file = source_records(path, split)
    skipped: Counter = Counter()
    posts: dict[str, PromptRecord] = {}
    comments: dict[tuple[str, str], Response] = {}
    created: dict[tuple[str, str], float] = {}
    prefs: list[Preference] = []
    for row_no, row in records:
        try:
            post = str(require_text(row.get("post_id"), file=file, row=row_no, field="post_id"))
            history = require_text(row.get("history"), file=file, row=row_no, field="history")
            side: dict[str, tuple[str, str, float, float]] = {}
            for s in ("A", "B"):
                cid = str(require_text(row.get(f"c_root_id_{s}"), file=file, row=row_no, field=f"c_root_id_{s}"))
                text = require_text(row.get(f"human_ref_{s}"), file=file, row=row_no, field=f"human_ref_{s}")
                score = coerce_rating(row.get(f"score_{s}"), file=file, row=row_no, field=f"score_{s}")
                if score < 1:
                    raise DataError(f"a score below 1 ({score:g}) has no log vote count", file=file, row=row_no,
                                    field=f"score_{s}")
                t = coerce_rating(row.get(f"created_at_utc_{s}"), file=file, row=row_no, field=f"created_at_utc_{s}")
                side[s] = (cid, text, score, t)
            label = coerce_rating(row.get("labels"), file=file, row=row_no, field="labels")
            if label not in (0, 1):
                raise DataError(f"labels must be 0 or 1, got {label:g}", file=file, row=row_no, field="labels")
        except DataError as e:
            if on_bad == "raise":
                raise
            skipped[f"bad_{e.field or 'row'}"] += 1
            continue
        if post not in posts:
            if limit is not None and len(posts) >= limit:
                skipped["beyond_limit"] += 1
                continue
            posts[post] = PromptRecord(prompt_id=post, messages=[{"role": "user", "content": history}], responses=[],
                                       source="shp", meta={"domain": row.get("domain"), "source_file": file,
                                                           "source_row": row_no})
        rec = posts[post]
        for cid, text, score, t in side.values():
            if (post, cid) not in comments:
                r = Response(response_id=cid, text=text, ratings={"log_votes": math.log(score), "votes": score},
                             meta={"source_file": file, "source_row": row_no})
                comments[(post, cid)] = r
                created[(post, cid)] = t
                rec.responses.append(r)
        chosen, rejected = (side["A"][0], side["B"][0]) if label == 1 else (side["B"][0], side["A"][0])
        prefs.append(Preference(prompt_id=post, chosen_id=chosen, rejected_id=rejected, subset=row.get("domain"),
                                meta=(("source_row", row_no),)))
    newest = max(created.values()) if created else 0.0
    for key, r in comments.items():
        r.meta["exposure"] = math.log1p(max(newest - created[key], 0.0) / 3600.0)
    return RatingSet(prompts=list(posts.values()), name=f"shp-{split}", attributes=SHP_ATTRIBUTES,
                     preferences=prefs, skipped=skipped)


__all__ = ["SHP_ATTRIBUTES", "SHP_HUB_ID", "load_shp"]
