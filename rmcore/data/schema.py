"""The one rating-set model every loader produces.

A rating set is a list of prompts; each prompt holds its conversation (chat messages, multi-turn
kept) and its responses; each response carries ratings on named attributes. Released preference
labels (HelpSteer2's preference files, HH-RLHF, RM-Bench) are kept beside the ratings, because the
Bradley-Terry arms train on them when they exist.

Every figure that reads the human ratings reads ONE attribute; ``pick_attribute`` is the one rule
that chooses it when none is asked for: helpfulness (the attribute reward models are trained on)
when it is rated, else the first rated attribute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rmcore.errors import ConfigError

if TYPE_CHECKING:  # the tables are built in two methods: the settings that read these types load no pandas
    import pandas as pd

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}

DEFAULT_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
MAIN_ATTRIBUTE = "helpfulness"
# columns of a ratings table that are not rated attributes
RATINGS_KEY_COLUMNS = ("prompt_id", "response_id", "single_turn", "response_length")


# One switch, one vocabulary, in run configs and data specs alike: what to do with a bad row.
ON_BAD = ("raise", "skip")


def check_on_bad(on_bad: str) -> None:
    if on_bad not in ON_BAD:
        raise ConfigError(f"on_bad must be 'raise' or 'skip', got {on_bad!r}")


def pick_attribute(attributes: Sequence[str], requested: str | None = None) -> str:
    """The attribute a rating-based figure reads: the requested one; else helpfulness when it is
    rated or nothing is (a preference set), else the first rated attribute."""
    if requested:
        return requested
    return MAIN_ATTRIBUTE if MAIN_ATTRIBUTE in attributes or not attributes else attributes[0]


def table_attributes(ratings: pd.DataFrame) -> list[str]:
    """The rated attributes of a ratings table: every column that is not a key column."""
    return [c for c in ratings.columns if c not in RATINGS_KEY_COLUMNS]


def skipped_note(skipped: dict[str, int] | Counter) -> str:
    """What loading skipped (``on_bad: skip``), by reason, in words: "bad score 2, too few
    responses 1"; "" when nothing was."""
    return ", ".join(f"{reason.replace('_', ' ')} {n:,}" for reason, n in sorted(skipped.items()) if n)


@dataclass
class Response:
    response_id: str
    text: str
    ratings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. RM-Bench style level


@dataclass
class PromptRecord:
    prompt_id: str
    messages: list[Message]  # ends with a user turn
    responses: list[Response]
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. subset

    @property
    def turns(self) -> int:
        """Number of user turns in the conversation."""
        return sum(1 for m in self.messages if m["role"] == "user")

    @property
    def single_turn(self) -> bool:
        return self.turns <= 1

    @property
    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m["role"] == "user":
                return m["content"]
        return ""


@dataclass(frozen=True)
class Preference:
    """A released preference label: `chosen_id` preferred over `rejected_id` for `prompt_id`."""

    prompt_id: str
    chosen_id: str
    rejected_id: str
    strength: float | None = None
    subset: str | None = None
    meta: tuple[tuple[str, Any], ...] = ()  # hashable extras, e.g. (("chosen_style", 0), ...)

    def meta_dict(self) -> dict[str, Any]:
        return dict(self.meta)


@dataclass
class RatingSet:
    prompts: list[PromptRecord]
    name: str = ""
    attributes: tuple[str, ...] = ()
    preferences: list[Preference] = field(default_factory=list)
    # reason -> number of rows skipped while loading; nothing is dropped silently.
    skipped: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for p in self.prompts:
            if p.prompt_id in seen:
                raise ValueError(f"{self.name}: duplicate prompt_id '{p.prompt_id}'")
            seen.add(p.prompt_id)

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def n_responses(self) -> int:
        return sum(len(p.responses) for p in self.prompts)

    def by_id(self) -> dict[str, PromptRecord]:
        return {p.prompt_id: p for p in self.prompts}

    def subset(self, prompt_ids: list[str] | set[str]) -> RatingSet:
        keep = set(prompt_ids)
        return RatingSet(
            prompts=[p for p in self.prompts if p.prompt_id in keep],
            name=self.name,
            attributes=self.attributes,
            preferences=[q for q in self.preferences if q.prompt_id in keep],
            skipped=Counter(self.skipped),
        )

    def sample(self, n: int | None, seed: int = 0) -> RatingSet:
        """A seeded sample of ``n`` prompts, input order kept (the whole set when it has no more,
        or n is None): the same seed draws the same prompts."""
        if n is None or len(self) <= n:
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), size=n, replace=False))
        return self.subset([self.prompts[i].prompt_id for i in keep])

    def ratings_table(self, tokenizer: Any | None = None) -> pd.DataFrame:
        """One row per response: prompt_id, response_id, one column per attribute, single_turn,
        and response_length in tokens when a tokenizer is given."""
        import pandas as pd  # pandas: the types above are read by settings modules at --help

        rows = []
        for p in self.prompts:
            for r in p.responses:
                row: dict[str, Any] = {"prompt_id": p.prompt_id, "response_id": r.response_id}
                for a in self.attributes:
                    row[a] = r.ratings.get(a, float("nan"))
                row["single_turn"] = p.single_turn
                if tokenizer is not None:  # a count, not a model input: no "longer than the maximum" warning
                    row["response_length"] = len(tokenizer(r.text, add_special_tokens=False,
                                                           verbose=False)["input_ids"])
                rows.append(row)
        return pd.DataFrame(rows)

    def preferences_table(self) -> pd.DataFrame | None:
        """One row per released preference label: prompt_id, chosen_id, rejected_id, strength,
        subset, section and the styles of the two responses (RM-Bench), columns with no value left
        out; None when the set has no labels."""
        if not self.preferences:
            return None
        import pandas as pd  # pandas: the types above are read by settings modules at --help

        meta = {p.prompt_id: p.meta for p in self.prompts}
        rows = []
        for q in self.preferences:
            m = q.meta_dict()
            rows.append({"prompt_id": q.prompt_id, "chosen_id": q.chosen_id, "rejected_id": q.rejected_id,
                         "strength": q.strength, "subset": q.subset or meta.get(q.prompt_id, {}).get("subset"),
                         "section": meta.get(q.prompt_id, {}).get("section"),
                         "chosen_style": m.get("chosen_style"), "rejected_style": m.get("rejected_style")})
        return pd.DataFrame(rows).dropna(axis=1, how="all")

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n_prompts": len(self.prompts),
            "n_responses": self.n_responses,
            "n_multi_turn": sum(1 for p in self.prompts if not p.single_turn),
            "n_preferences": len(self.preferences),
            "attributes": list(self.attributes),
            "skipped": dict(self.skipped),
        }
