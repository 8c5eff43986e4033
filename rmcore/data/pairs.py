"""Preference pairs for the Bradley-Terry arms, and prompt-level train/held-out splits.

Rule (`build_pairs`): when the set carries released preference labels (and `use_released`), the
pairs are exactly those labels, whatever the ratings say (a label may even run against the rating
order: its `gap` is then negative). Otherwise every within-prompt pair of responses becomes a pair
ordered by the attribute rating; equal ratings carry no direction and are dropped and counted, as
are pairs with an unrated response.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from rmcore.data.schema import RatingSet
from rmcore.errors import ConfigError


@dataclass(frozen=True)
class Pair:
    prompt_id: str
    chosen_id: str
    rejected_id: str
    gap: float | None  # rating(chosen) - rating(rejected) on the target attribute; None without ratings
    label_source: str  # "preference" | "rating"
    strength: float | None = None  # released strength, or |gap| for rating pairs


@dataclass
class PairSet:
    pairs: list[Pair]
    attribute: str
    label_source: str  # "preference" | "rating"
    n_ties_dropped: int = 0
    n_unrated_dropped: int = 0  # rating pairs with an unrated response
    n_single_response_prompts: int = 0
    n_prompts_without_pairs: int = 0
    n_dangling_dropped: int = 0  # released labels naming an unknown prompt/response

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self):
        return iter(self.pairs)

    @property
    def prompt_ids(self) -> list[str]:
        return list(dict.fromkeys(p.prompt_id for p in self.pairs))

    def subset(self, prompt_ids: Iterable[str]) -> PairSet:
        keep = set(prompt_ids)
        return PairSet([p for p in self.pairs if p.prompt_id in keep], self.attribute, self.label_source)

    def summary(self) -> dict[str, int | str]:
        return {"n_pairs": len(self.pairs), "attribute": self.attribute, "label_source": self.label_source,
                "n_ties_dropped": self.n_ties_dropped, "n_unrated_dropped": self.n_unrated_dropped,
                "n_single_response_prompts": self.n_single_response_prompts,
                "n_prompts_without_pairs": self.n_prompts_without_pairs,
                "n_dangling_dropped": self.n_dangling_dropped}


def _rating(ratings: dict[str, float], attribute: str) -> float | None:
    x = ratings.get(attribute)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def build_pairs(rs: RatingSet, attribute: str = "helpfulness", use_released: bool = True) -> PairSet:
    """Pairs from released labels where the set has them, else from within-prompt rating order."""
    n_single = sum(1 for p in rs.prompts if len(p.responses) < 2)
    if use_released and rs.preferences:
        return _released_pairs(rs, attribute, n_single)
    if attribute not in rs.attributes:
        raise ConfigError(f"{rs.name}: no released preferences and no ratings for attribute {attribute!r} "
                          f"(rated attributes: {list(rs.attributes)})")
    out = PairSet([], attribute, "rating", n_single_response_prompts=n_single)
    for p in rs.prompts:
        before = len(out.pairs)
        for a, b in combinations(p.responses, 2):
            ra, rb = _rating(a.ratings, attribute), _rating(b.ratings, attribute)
            if ra is None or rb is None:
                out.n_unrated_dropped += 1
                continue
            if ra == rb:
                out.n_ties_dropped += 1
                continue
            hi, lo, gap = (a, b, ra - rb) if ra > rb else (b, a, rb - ra)
            out.pairs.append(Pair(p.prompt_id, hi.response_id, lo.response_id, gap, "rating", gap))
        out.n_prompts_without_pairs += len(out.pairs) == before
    return out


def _released_pairs(rs: RatingSet, attribute: str, n_single: int) -> PairSet:
    out = PairSet([], attribute, "preference", n_single_response_prompts=n_single)
    ratings = {p.prompt_id: {r.response_id: r.ratings for r in p.responses} for p in rs.prompts}
    rated = attribute in rs.attributes  # an undeclared attribute gives gap None, not stray values
    for q in rs.preferences:
        resp = ratings.get(q.prompt_id)
        if resp is None or q.chosen_id not in resp or q.rejected_id not in resp:
            out.n_dangling_dropped += 1
            continue
        rc, rr = _rating(resp[q.chosen_id], attribute), _rating(resp[q.rejected_id], attribute)
        gap = rc - rr if rated and rc is not None and rr is not None else None
        out.pairs.append(Pair(q.prompt_id, q.chosen_id, q.rejected_id, gap, "preference", q.strength))
    labelled = {p.prompt_id for p in out.pairs}
    out.n_prompts_without_pairs = sum(1 for p in rs.prompts if p.prompt_id not in labelled)
    return out


def split_by_prompt(prompt_ids: Iterable[str], heldout_fraction: float,
                    seed: int) -> tuple[list[str], list[str]]:
    """(train_ids, heldout_ids), both sorted. A prompt is never split; the result depends only on the
    set of ids and the seed (ids are de-duplicated and sorted before shuffling)."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    ids = sorted(set(prompt_ids))
    n_held = int(round(heldout_fraction * len(ids)))
    if heldout_fraction > 0 and len(ids) >= 2:
        n_held = min(max(n_held, 1), len(ids) - 1)  # both sides non-empty when possible
    order = np.random.default_rng(seed).permutation(len(ids))
    held = sorted(ids[i] for i in order[:n_held])
    held_set = set(held)
    return [i for i in ids if i not in held_set], held
