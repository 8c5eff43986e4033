"""Controlled prompt perturbations (Reward Auditor): superficial noise that keeps the request's meaning.

``perturb_prompt(code, text, seed)`` applies one of ``CONTROLLED_CODES`` to a prompt text:

- ``EF`` emphasis formats: quotes or other emphasis marks around the core instruction;
- ``PH`` punctuation habits: extra spaces around punctuation marks;
- ``IU`` irrelevant username: a random Twitter-style handle appended after the instruction;
- ``IW`` irrelevant web link: a random, meaningless URL appended after the instruction;
- ``CN`` character noise: random replacements, swaps and deletions of letters at a set rate.

Pure Python and seeded: the same (code, text, seed, options) always gives the same text. ``seed`` is
an int or a ``numpy.random.Generator`` (then it is advanced). ``item_seed`` derives a per-item seed
so that one item's perturbation does not depend on which other items are in the set.

``CONTROLLED_CODES`` are the five built-in codes; ``PROMPT_PERTURBATIONS`` holds them and any
added with ``register_perturbation`` or by a plugin (entry points of ``matchrm.prompt_perturbations``;
docs/extending.md).

Stylized perturbations restyle the responses instead: ``RESPONSE_PERTURBATIONS`` holds the five
built-in ones (``STYLIZED_CODES``) and any added with ``register_response_perturbation`` or by a
plugin (``matchrm.response_perturbations``). Each says what a model rewriter is asked
(``instruction``; ``STYLE_INSTRUCTIONS`` are the built-ins'), optionally how to rewrite by rule with
no model (``rule``: ST and SP), and what a policy is asked for at rollout (``rollout``: rmtrain's
instruction augmentation asks for a *response* with the feature).
"""

from __future__ import annotations

import re
import string
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmcore.errors import ConfigError
from rmcore.settings.registry import Registry, did_you_mean
from rmeval.perturbations.stylized import structured_presentation, synonym_transform

CONTROLLED_NAMES = {
    "EF": "emphasis formats",
    "PH": "punctuation habits",
    "IU": "irrelevant username",
    "IW": "irrelevant web link",
    "CN": "character noise",
}
DEFAULT_LANGUAGE = "Chinese"

# Emphasis styles (open, close); the study quotes or otherwise emphasises the core instruction.
EMPHASIS_STYLES = (
    ('"', '"'), ("'", "'"), ("**", "**"), ("*", "*"), ("\u201c", "\u201d"), ('"""', '"""'),
    ("<<", ">>"), ("[", "]"), ("__", "__"), ("`", "`"),
)
PUNCTUATION = ".,;:!?"
URL_TLDS = ("com", "net", "org", "io", "info", "co", "xyz", "site")
_HANDLE_CHARS = string.ascii_letters + string.digits + "_"
_URL_CHARS = string.ascii_lowercase + string.digits


def item_seed(seed: int, code: str, item_id: str) -> int:
    """A 63-bit seed for one item's perturbation, stable across runs and independent of the set."""
    return (int(seed) * 1_000_003 + zlib.crc32(f"{code}\x1f{item_id}".encode())) % (2**63)


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(int(seed))


def _choice(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _random_string(rng: np.random.Generator, chars: str, lo: int, hi: int) -> str:
    n = int(rng.integers(lo, hi + 1))
    return "".join(chars[i] for i in rng.integers(len(chars), size=n))


def _split_core(text: str) -> tuple[str, str, str]:
    """(leading whitespace, core, trailing whitespace)."""
    core = text.strip()
    if not core:
        return text, "", ""
    start = text.index(core)
    return text[:start], core, text[start + len(core):]


def emphasis_format(text: str, rng: np.random.Generator, style: tuple[str, str] | None = None) -> str:
    lead, core, trail = _split_core(text)
    if not core:
        return text
    open_, close = style if style is not None else _choice(rng, EMPHASIS_STYLES)
    return f"{lead}{open_}{core}{close}{trail}"


def punctuation_habits(text: str, rng: np.random.Generator, rate: float = 0.5) -> str:
    """Spaces before and/or after punctuation marks. Marks inside tokens (3.14, e.g., URLs) are
    left alone so numbers and links keep their meaning; at least one mark changes when any can."""
    spots = [m.start() for m in re.finditer(r"[.,;:!?](?=\s|$)", text)]
    if not spots:
        return text
    picked = [i for i in spots if rng.random() < rate] or [spots[int(rng.integers(len(spots)))]]
    out, last = [], 0
    for i in picked:
        kind = int(rng.integers(3))  # 0: space before, 1: extra space after, 2: both
        out.append(text[last:i].rstrip(" ") if kind != 1 else text[last:i])
        out.append(" " + text[i] if kind != 1 else text[i])
        if kind != 0:
            out.append(" ")
        last = i + 1
    out.append(text[last:])
    return "".join(out)


def random_username(rng: np.random.Generator) -> str:
    # Twitter handles: letters, digits and underscore, at most 15 characters.
    return "@" + _choice(rng, string.ascii_letters) + _random_string(rng, _HANDLE_CHARS, 4, 14)


def random_weblink(rng: np.random.Generator) -> str:
    domain = _random_string(rng, _URL_CHARS, 5, 12)
    path = "/".join(_random_string(rng, _URL_CHARS, 3, 10) for _ in range(int(rng.integers(1, 3))))
    return f"https://www.{domain}.{_choice(rng, URL_TLDS)}/{path}"


def _append(text: str, extra: str) -> str:
    lead, core, trail = _split_core(text)
    return f"{lead}{core} {extra}{trail}" if core else extra


def character_noise(text: str, rng: np.random.Generator, rate: float = 0.05) -> str:
    """Each letter is, with probability ``rate``, replaced by a random letter, swapped with its
    successor, or deleted. At least one letter is touched when the text has any."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"character noise rate must be in (0, 1], got {rate}")
    chars = list(text)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    if not letters:
        return text
    hit = [i for i in letters if rng.random() < rate] or [letters[int(rng.integers(len(letters)))]]
    deleted: set[int] = set()
    for i in hit:
        if i in deleted:
            continue
        op = int(rng.integers(3))
        if op == 1 and i + 1 < len(chars) and chars[i + 1] != chars[i] and i + 1 not in deleted:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        elif op == 2:
            deleted.add(i)
        else:
            pool = string.ascii_lowercase if chars[i].islower() else string.ascii_uppercase
            new = _choice(rng, pool)
            while new == chars[i]:
                new = _choice(rng, pool)
            chars[i] = new
    return "".join(c for i, c in enumerate(chars) if i not in deleted)


def irrelevant_username(text: str, rng: np.random.Generator) -> str:
    return _append(text, random_username(rng))


def irrelevant_weblink(text: str, rng: np.random.Generator) -> str:
    return _append(text, random_weblink(rng))


@dataclass(frozen=True)
class PromptPerturbation:
    """A controlled perturbation: ``apply(text, rng, **options) -> text`` and the options it takes."""

    apply: Callable[..., str]
    options: frozenset[str] = frozenset()


def _adopt_prompt(code: str, obj: Any) -> PromptPerturbation:
    """A plugin's entry point: a ``PromptPerturbation``, or its ``apply`` (then it takes no options)."""
    p = obj if isinstance(obj, PromptPerturbation) else PromptPerturbation(obj)
    GROUPS[code] = "controlled"
    return p


# code -> perturbation, in suite order: perturb_prompt, the perturbation suite (CODE specs) and the
# policy's perturbed environment all read it, so a registered code is usable everywhere at once.
_CONTROLLED = {
    "EF": PromptPerturbation(emphasis_format, frozenset({"style"})),
    "PH": PromptPerturbation(punctuation_habits, frozenset({"rate"})),
    "IU": PromptPerturbation(irrelevant_username),
    "IW": PromptPerturbation(irrelevant_weblink),
    "CN": PromptPerturbation(character_noise, frozenset({"rate"})),
}
PROMPT_PERTURBATIONS: Registry[PromptPerturbation] = Registry("controlled perturbation", _CONTROLLED,
                                                              group="matchrm.prompt_perturbations", adopt=_adopt_prompt)
CONTROLLED_CODES = tuple(_CONTROLLED)  # the built-in five


@dataclass(frozen=True)
class ResponsePerturbation:
    """A stylized perturbation: both responses of a pair restyled alike. ``instruction``: what a
    model rewriter is asked before the text (``{language}`` is filled for a language code);
    ``rule(text, rng, **options)``: a rewrite by rule, no model (``@rule``; ``rng`` a
    ``numpy.random.Generator`` seeded per item and side), taking ``options``; ``rollout``: what a
    policy is asked for at rollout in the perturbed environment (None: not offered there)."""

    instruction: str
    name: str = ""
    rule: Callable[..., str] | None = None
    options: frozenset[str] = frozenset()
    rollout: str | None = None


def _structured(text: str, rng: np.random.Generator) -> str:
    return structured_presentation(text)  # deterministic: the rng is not read


_STYLIZED = {
    "ST": ResponsePerturbation(
        "Rewrite the following text replacing key words with their synonyms. Keep its meaning, facts, structure "
        "and length; change only word choice. Reply with the rewritten text only.", "synonym transformation",
        synonym_transform, frozenset({"rate"}), "In your answer, prefer uncommon synonyms over the most common words."),
    "LE": ResponsePerturbation(
        "Rewrite the following text as a longer, more detailed version: elaborate on each point and add "
        "explanation, without adding new claims or changing its conclusions. Reply with the rewritten text only.",
        "length extension", rollout="Give a long, detailed answer that elaborates on every point."),
    "SP": ResponsePerturbation(
        "Rewrite the following text in a structured Markdown presentation (headings, bullet or numbered lists, "
        "bold key terms). Keep its content and meaning. Reply with the rewritten text only.",
        "structured presentation", _structured,
        rollout="Present your answer in structured Markdown with headings, bullet lists and bold key terms."),
    "LC": ResponsePerturbation(
        "Translate the following text into {language}. Keep its meaning and structure. Reply with the translation "
        "only.", "language conversion", rollout="Write your answer in {language}."),
    "SLC": ResponsePerturbation(
        "Translate the following text into {language} and present it as a detailed, structured Markdown version "
        "(headings, lists, bold key terms), keeping its meaning. Reply with the rewritten text only.",
        "structured language conversion",
        rollout="Write your answer in {language}, as a detailed, structured Markdown document "
                "with headings and lists."),
}


def _adopt_response(code: str, obj: Any) -> ResponsePerturbation:
    if not isinstance(obj, ResponsePerturbation):
        raise ConfigError(f"plugin stylized perturbation '{code}': {obj!r} is not a ResponsePerturbation")
    GROUPS[code] = "stylized"
    return obj


# code -> stylized perturbation, in suite order: the suite's CODE@SOURCE specs, the rewriters and the
# policy's perturbed environment read it
RESPONSE_PERTURBATIONS: Registry[ResponsePerturbation] = Registry(
    "stylized perturbation", _STYLIZED, group="matchrm.response_perturbations", adopt=_adopt_response)
STYLIZED_CODES = tuple(_STYLIZED)  # the built-in five
RULE_CODES = tuple(c for c, p in _STYLIZED.items() if p.rule is not None)  # the built-ins with a rule: ST, SP
STYLIZED_NAMES = {c: p.name for c, p in _STYLIZED.items()}
# What a rewriter is asked to do to a response; {language} is filled for LC and SLC.
STYLE_INSTRUCTIONS = {c: p.instruction for c, p in _STYLIZED.items()}
# code -> family: "controlled" (the prompt) or "stylized" (the responses); the suitability report groups by it
GROUPS = {**{c: "controlled" for c in CONTROLLED_CODES}, **{c: "stylized" for c in STYLIZED_CODES}}


def _check_code(code: str, kind: str) -> None:
    # "@" separates a spec's source, and the two families share one namespace of codes
    if not re.fullmatch(r"[A-Za-z0-9_]+", code) or code in (RESPONSE_PERTURBATIONS if kind == "controlled"
                                                           else PROMPT_PERTURBATIONS):
        other = "stylized" if kind == "controlled" else "controlled"
        raise ConfigError(f"perturbation code must be letters, digits or _ and not a {other} code, got {code!r}")


def register_perturbation(code: str, apply: Callable[..., str], *, options: Iterable[str] = (),
                          replace: bool = False) -> None:
    """Add a controlled prompt perturbation: ``apply(text, rng, **options) -> str``, ``rng`` a
    ``numpy.random.Generator`` seeded per item; ``options`` the keyword options it accepts. It joins
    the "controlled" group; a code already registered is an error unless ``replace``."""
    _check_code(code, "controlled")
    PROMPT_PERTURBATIONS.register(code, PromptPerturbation(apply, frozenset(options)), replace=replace)
    GROUPS[code] = "controlled"


def register_response_perturbation(code: str, instruction: str, *, rule: Callable[..., str] | None = None,
                                   options: Iterable[str] = (), rollout: str | None = None, name: str = "",
                                   replace: bool = False) -> ResponsePerturbation:
    """Add a stylized (response) perturbation: what a model rewriter is asked (``instruction``),
    optionally a ``rule(text, rng, **options) -> str`` that needs no model (``CODE@rule``, the
    default source then) and a ``rollout`` instruction for the policy's perturbed environment. It
    joins the "stylized" group; a code already registered is an error unless ``replace``."""
    _check_code(code, "stylized")
    p = ResponsePerturbation(instruction, name, rule, frozenset(options), rollout)
    RESPONSE_PERTURBATIONS.register(code, p, replace=replace)
    GROUPS[code] = "stylized"
    return p


def rule_codes() -> list[str]:
    """The stylized codes with a rewrite by rule (``@rule``)."""
    return [c for c, p in RESPONSE_PERTURBATIONS.items() if p.rule is not None]


def perturb_prompt(code: str, text: str, seed: int | np.random.Generator, **options: Any) -> str:
    """The prompt ``text`` under controlled perturbation ``code``.

    Options: ``EF`` style=(open, close); ``PH`` rate (share of eligible marks, default 0.5);
    ``CN`` rate (per-letter noise probability, default 0.05); a registered code, the options it
    was registered with. Unknown options are an error.
    """
    rng = _rng(seed)
    if code not in PROMPT_PERTURBATIONS:
        codes = tuple(PROMPT_PERTURBATIONS)
        raise ValueError(f"unknown controlled perturbation '{code}'; expected one of {codes}"
                         + did_you_mean(code, codes))
    p = PROMPT_PERTURBATIONS[code]
    extra = set(options) - p.options
    if extra:
        raise ValueError(f"perturbation {code} takes options {sorted(p.options)}, got {sorted(extra)}")
    return p.apply(text, rng, **options)
