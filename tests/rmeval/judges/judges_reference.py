"""A plain-Python reading of a judgments table, written from the paper's definitions without the
panel arrays: the independent reference the JudgeProfile control tests compare against."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

OVERALL = "overall"


class Reads:
    """(judge, item, attribute) -> {order: direction}, with the stable and single-read protocols."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.r: dict[tuple[str, str, str], dict[str, int]] = {}
        for row in table.itertuples(index=False):
            self.r.setdefault((row.judge, row.item_id, row.attribute), {})[row.order] = int(row.direction)
        self.judges = sorted({k[0] for k in self.r})
        self.items = list(dict.fromkeys(table["item_id"]))
        self.attributes = sorted({k[2] for k in self.r} - {OVERALL})

    def get(self, protocol: str, judge: str, item: str, attribute: str) -> int | None:
        """The direction under ``protocol``; None where the protocol's reads are missing."""
        reads = self.r.get((judge, item, attribute), {})
        if protocol == "single_read":
            return reads.get("AB")
        if "AB" not in reads or "BA" not in reads:
            return None
        ab, ba = reads["AB"], reads["BA"]
        return ab if ab == ba and ab != 0 else 0

    def pairs(self) -> list[tuple[str, str]]:
        return list(itertools.combinations(self.judges, 2))

    def verdicts(self, protocol: str, j: str, k: str, item: str) -> tuple[int, int] | None:
        """Both verdicts when both are definite, else None."""
        vj, vk = self.get(protocol, j, item, OVERALL), self.get(protocol, k, item, OVERALL)
        return (vj, vk) if vj and vk else None

    def joint(self, protocol: str, j: str, k: str, item: str, attributes: list[str] | None = None
              ) -> list[tuple[int, int]]:
        """(d_j, d_k) of the jointly resolved attribute cells of an item."""
        out = []
        for a in attributes or self.attributes:
            dj, dk = self.get(protocol, j, item, a), self.get(protocol, k, item, a)
            if dj and dk:
                out.append((dj, dk))
        return out


def mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
