"""The lists of names written in the docs and the README are the registries' built-ins: the arms
(and how many there are), the --scorer kinds, the perturbation codes, the backend kinds and their
capabilities, the registries of docs/extending.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def _text(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def _codes(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_arms_of_the_readme_and_training_md_are_the_registry_s():
    from rmtrain.arms import ARMS

    arms = set(ARMS.names())
    readme, training, index = _text("README.md"), _text("docs/training.md"), _text("docs/index.md")
    listed = re.search(r"The (\w+) arms are ((?:`\w+`(?:,|\s|and)*)+)", readme)
    assert listed and set(_codes(listed.group(2))) == arms and NUMBERS[listed.group(1)] == len(arms)
    heading = re.search(r"^## The (\w+) arms$", training, re.M)
    assert heading and NUMBERS[heading.group(1)] == len(arms)
    section = training[heading.end():].split("\n## ")[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert sorted(rows) == sorted(arms)
    # every "the N arms" / "the N losses" / "the N matched arms" of these pages counts them
    for text in (readme, training, index):
        for word in re.findall(r"\b[Tt]he (\w+) (?:matched )?(?:arms|losses)\b", text):
            if word.lower() in NUMBERS:
                assert NUMBERS[word.lower()] == len(arms), word


def test_the_scorer_kinds_of_audit_md_are_the_registry_s():
    from rmeval.scoring import SCORERS

    m = re.search(r"`--scorer ([\w|]+)`", _text("docs/audit.md"))
    assert m and m.group(1).split("|") == SCORERS.names()


def test_the_perturbation_codes_of_suitability_md_and_policy_md_are_the_registries():
    from rmeval.perturbations import PROMPT_PERTURBATIONS, RESPONSE_PERTURBATIONS
    from rmeval.perturbations.controlled import rule_codes

    section = _text("docs/suitability.md").split("## Perturbations", 1)[1]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    prompt, with_rule, with_model = (_codes(r) for r in rows[:3])
    assert prompt == PROMPT_PERTURBATIONS.names()
    assert with_rule == rule_codes() and sorted(with_rule + with_model) == sorted(RESPONSE_PERTURBATIONS.names())
    m = re.search(r"one stylized feature \(((?:`\w+` ?)+)\)", _text("docs/policy.md"))
    rollout = [c for c, p in RESPONSE_PERTURBATIONS.items() if p.rollout is not None]
    assert m and _codes(m.group(1)) == rollout


def test_the_backend_kinds_and_the_registries_of_extending_md():
    from rmcore.settings.registry import Registry
    from rmeval.backends.spec import BACKENDS

    page = _text("docs/extending.md")
    section = page.split("## A new judge or text backend", 1)[1].split("\n## ")[0]
    kinds = dict(re.findall(r"^\| `(\w+)` \| ([\w, ]+) \|$", section, re.M))
    assert list(kinds) == BACKENDS.names()
    assert {k: sorted(v.split(", ")) for k, v in kinds.items()} == {k: sorted(b.makes) for k, b in BACKENDS.items()}
    table = page.split("\n\n", 2)[2].split("\n\n")[0]
    for path, group in re.findall(r"^\|[^|]+\| `([\w.]+)` \|[^|]+\| (?:`([\w.]+)`)? ?\|$", table, re.M):
        module, _, name = path.rpartition(".")
        reg = getattr(importlib.import_module(module), name)
        assert isinstance(reg, Registry) and reg.group == (group or None), path
    assert len(re.findall(r"^\| ", table, re.M)) - 1 == 9
