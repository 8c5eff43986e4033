"""The attribute inventory: name, family and a one-line definition of "which response has more X".

The shipped inventory (``attributes.yaml``, package data) has 96 attributes in 14 families,
including the 20 core attributes of the JudgeProfile study. Users replace or extend it with their
own YAML file in the same format.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rmcore.errors import DataError

# The reliability-selected core set of the study (order consistency and detection rate both at
# least their across-attribute medians); kept here so a custom inventory can still name it.
CORE_ATTRIBUTES = (
    "breadth", "completeness", "conceptual_complexity", "decomposition_quality", "depth", "detail_level",
    "example_use", "explanatory_depth", "informativeness", "justification_quality", "linguistic_complexity",
    "organization", "qualification", "reasoning_completeness", "relevance", "rigor", "robustness",
    "specificity", "strategy_quality", "terminological_precision",
)
OVERALL = "overall"  # the attribute name under which the overall verdict is stored
_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


@dataclass(frozen=True)
class Attribute:
    name: str
    family: str
    definition: str


def _parse(raw: object, file: str) -> list[Attribute]:
    rows = raw.get("attributes") if isinstance(raw, dict) else raw
    if not isinstance(rows, list):
        raise DataError("an attribute file must be a list or a mapping with an 'attributes' list", file=file)
    out: list[Attribute] = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataError("each attribute must be a mapping", file=file, row=i)
        for key in ("name", "family", "definition"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise DataError("missing or empty", file=file, row=i, field=key)
        name = row["name"].strip()
        if not _NAME.match(name) or name == OVERALL:
            raise DataError(f"bad attribute name '{name}' (lower-case identifier; '{OVERALL}' is reserved)",
                            file=file, row=i, field="name")
        out.append(Attribute(name, row["family"].strip(), row["definition"].strip()))
    seen: set[str] = set()
    for i, a in enumerate(out, start=1):
        if a.name in seen:
            raise DataError(f"duplicate attribute '{a.name}'", file=file, row=i, field="name")
        seen.add(a.name)
    return out


def default_inventory() -> list[Attribute]:
    import yaml

    text = resources.files("rmeval.judges").joinpath("attributes.yaml").read_text(encoding="utf-8")
    return _parse(yaml.safe_load(text), "rmeval/judges/attributes.yaml")


def load_inventory(path: str | os.PathLike | None = None, *, extend: bool = False,
                   names: list[str] | None = None) -> list[Attribute]:
    """The shipped inventory, a user's file instead of it, or (``extend``) both, the user's entries
    overriding shipped ones of the same name. ``names`` keeps only those attributes (in that order;
    ``core`` expands to the 20 core attributes)."""
    import yaml

    attrs = default_inventory() if (path is None or extend) else []
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such attribute file")
        try:
            user = _parse(yaml.safe_load(p.read_text(encoding="utf-8")), str(p))
        except yaml.YAMLError as e:
            raise DataError(f"invalid YAML ({e})", file=str(p)) from None
        mine = {a.name for a in user}
        attrs = [a for a in attrs if a.name not in mine] + user
    if names:
        wanted = [n for name in names for n in (CORE_ATTRIBUTES if name == "core" else (name,))]
        by = {a.name: a for a in attrs}
        missing = [n for n in wanted if n not in by]
        if missing:
            raise DataError(f"unknown attribute(s) {', '.join(missing)}", field="attributes")
        attrs = [by[n] for n in dict.fromkeys(wanted)]
    return attrs
