"""The perturbation suite: preference items (prompt, chosen, rejected) and their perturbed twins.

A perturbation is named by a spec ``CODE`` or ``CODE@SOURCE``; the spec is the key used in every
output (files, JSON, plots). Controlled codes (``EF PH IU IW CN``, and any registered in
``PROMPT_PERTURBATIONS``) perturb the last user turn of the prompt, seeded per item
(``item_seed``), and take no source. Stylized codes (``ST LE SP LC SLC``, and any registered in
``RESPONSE_PERTURBATIONS``) rewrite both responses alike with a rewriter: ``@rule`` (the codes with
a rule: ST and SP built in; the default for them),
``@lm`` (the configured model rewriter; the default for LE, LC and SLC), ``@file``, or
``@rmbench``: RM-Bench's three style levels of the same content, level 0 → 1 for ``LE`` and
1 → 2 for ``SP`` (the original pair is the lower level's chosen/rejected, the perturbed one the
higher level's). Every code, controlled ones included, also takes ``@auditor``: the perturbed
version Reward Auditor published for the item (``rmcore.data.reward_auditor``; its SP is RM-Bench's
0 → 2, its LE 0 → 1, its ST a synonym rewrite of the concise response), on a set loaded from those
files, where it is the default for each code they hold.

Items: one per prompt -- for RM-Bench the pair at ``base_level`` (chosen and rejected both at that
style level), else the released preference with the largest strength (the first on ties), else the
best- against the worst-rated response on ``attribute`` (a prompt whose ratings all tie is skipped
and counted). Every twin keeps the id of its original item. Per perturbation the suite counts the
items it changed, left unchanged (nothing to perturb: a prompt without punctuation for PH) and
could not perturb (a failed or empty rewrite); failed items have no twin and are never dropped
silently.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rmcore.data.schema import Message, RatingSet
from rmcore.errors import ConfigError
from rmcore.settings.registry import did_you_mean
from rmeval.perturbations.controlled import (
    CONTROLLED_CODES,
    GROUPS,
    PROMPT_PERTURBATIONS,
    RESPONSE_PERTURBATIONS,
    RULE_CODES,
    item_seed,
    perturb_prompt,
    rule_codes,
)
from rmeval.perturbations.rewriters import Rewriter, RewriteRequest, RuleRewriter

SOURCES = ("rule", "lm", "file", "rmbench", "auditor")
RMBENCH_LEVELS = {"LE": (0, 1), "SP": (1, 2)}
# the cheap subset: no model-backed rewriter needed (AuditCallback during training)
CHEAP = (*CONTROLLED_CODES, *RULE_CODES)


@dataclass(frozen=True)
class Pair:
    messages: tuple[tuple[str, str], ...]  # ((role, content), ...): hashable
    chosen: str
    rejected: str

    @staticmethod
    def of(messages: list[Message], chosen: str, rejected: str) -> Pair:
        return Pair(tuple((m["role"], m["content"]) for m in messages), chosen, rejected)

    def message_list(self) -> list[Message]:
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass
class Item:
    item_id: str
    prompt_id: str
    pair: Pair
    chosen_id: str
    rejected_id: str


@dataclass
class Twin:
    item_id: str
    original: Pair
    perturbed: Pair | None  # None: the perturbation failed for this item
    changed: bool


@dataclass
class PerturbedSet:
    spec: str
    code: str
    source: str | None
    group: str
    twins: list[Twin] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        failed = sum(1 for t in self.twins if t.perturbed is None)
        changed = sum(1 for t in self.twins if t.perturbed is not None and t.changed)
        return {"n_items": len(self.twins), "n_changed": changed, "n_unchanged": len(self.twins) - changed - failed,
                "n_failed": failed}


def parse_spec(spec: str) -> tuple[str, str | None]:
    """'SP@rmbench' -> ('SP', 'rmbench'); the default source filled in for stylized codes."""
    code, _, source = spec.partition("@")
    if code in PROMPT_PERTURBATIONS:
        PROMPT_PERTURBATIONS.lookup(code)  # a plugin's code is loaded (and joins its group) here
        if source and source != "auditor":
            raise ConfigError(f"perturbation '{spec}': controlled codes take no source but @auditor")
        return code, source or None
    if code not in RESPONSE_PERTURBATIONS:
        codes = (*PROMPT_PERTURBATIONS, *RESPONSE_PERTURBATIONS)
        raise ConfigError(f"unknown perturbation '{spec}'; codes: {', '.join(codes)} "
                          f"(stylized ones optionally @{'/@'.join(SOURCES)})" + did_you_mean(code, codes))
    has_rule = RESPONSE_PERTURBATIONS.lookup(code).rule is not None
    source = source or ("rule" if has_rule else "lm")
    if source not in SOURCES:
        raise ConfigError(f"perturbation '{spec}': unknown source '{source}'; sources: {', '.join(SOURCES)}")
    if source == "rule" and not has_rule:
        raise ConfigError(f"perturbation '{spec}': only {', '.join(rule_codes())} have a rule-based rewriter")
    if source == "rmbench" and code not in RMBENCH_LEVELS:
        raise ConfigError(f"perturbation '{spec}': RM-Bench style levels give {', '.join(RMBENCH_LEVELS)} only")
    return code, source


def auditor_codes(rs: RatingSet) -> list[str]:
    """The codes whose Reward Auditor versions a set carries (``meta["perturbed"]``), in suite order."""
    held = {c for p in rs.prompts for c in (p.meta.get("perturbed") or {})}
    return [c for c in (*PROMPT_PERTURBATIONS, *RESPONSE_PERTURBATIONS) if c in held]


def _style(rs: RatingSet) -> dict[tuple[str, str, int], str]:
    """(prompt_id, label, style level) -> response text, for RM-Bench-like sets."""
    out = {}
    for p in rs.prompts:
        for r in p.responses:
            if "style" in r.meta and "label" in r.meta:
                out[(p.prompt_id, r.meta["label"], int(r.meta["style"]))] = r.text
    return out


def is_style_leveled(rs: RatingSet) -> bool:
    return bool(rs.prompts) and all(any("style" in r.meta for r in p.responses) for p in rs.prompts)


def preference_items(rs: RatingSet, *, base_level: int = 0, attribute: str = "helpfulness",
                     max_items: int | None = None) -> tuple[list[Item], Counter]:
    """One (prompt, chosen, rejected) item per prompt (see module doc) and the skip counts."""
    skipped: Counter = Counter()
    by_id = rs.by_id()
    texts = {(p.prompt_id, r.response_id): r.text for p in rs.prompts for r in p.responses}
    chosen_pairs: dict[str, tuple[str, str]] = {}
    if rs.preferences:
        leveled = is_style_leveled(rs)
        best: dict[str, tuple[float, int, str, str]] = {}
        for k, q in enumerate(rs.preferences):
            if leveled:
                m = q.meta_dict()
                if m.get("chosen_style") != base_level or m.get("rejected_style") != base_level:
                    continue
            key = (-(q.strength if q.strength is not None else 0.0), k)
            if q.prompt_id not in best or key < best[q.prompt_id][:2]:
                best[q.prompt_id] = (*key, q.chosen_id, q.rejected_id)
        chosen_pairs = {pid: (v[2], v[3]) for pid, v in best.items()}
        skipped["no_preference"] = sum(1 for p in rs.prompts if p.prompt_id not in chosen_pairs)
    else:
        for p in rs.prompts:
            rated = [(r.ratings.get(attribute), r.response_id) for r in p.responses
                     if r.ratings.get(attribute) is not None]
            if len(rated) < 2 or max(rated)[0] == min(rated)[0]:
                skipped["tied_ratings"] += 1
                continue
            hi = max(rated, key=lambda x: x[0])[1]
            lo = min(rated, key=lambda x: x[0])[1]
            chosen_pairs[p.prompt_id] = (hi, lo)
    items = []
    for p in rs.prompts:  # input order
        if p.prompt_id not in chosen_pairs:
            continue
        c, r = chosen_pairs[p.prompt_id]
        rec = by_id[p.prompt_id]
        items.append(Item(p.prompt_id, p.prompt_id, Pair.of(rec.messages, texts[(p.prompt_id, c)],
                                                           texts[(p.prompt_id, r)]), c, r))
    if max_items is not None and len(items) > max_items:
        skipped["over_max_items"] += len(items) - max_items
        items = items[:max_items]
    return items, +skipped


def _perturb_last_user(pair: Pair, code: str, seed: int, item_id: str, options: dict[str, Any]) -> Pair:
    msgs = list(pair.messages)
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i][0] == "user":
            msgs[i] = ("user", perturb_prompt(code, msgs[i][1], item_seed(seed, code, item_id), **options))
            break
    return Pair(tuple(msgs), pair.chosen, pair.rejected)


def build_perturbation(spec: str, items: list[Item], *, rating_set: RatingSet | None = None, seed: int = 0,
                       rewriters: dict[str, Rewriter] | None = None,
                       options: dict[str, dict[str, Any]] | None = None) -> PerturbedSet:
    """The twins of ``items`` under ``spec``. ``rewriters`` maps a source ('lm', 'file') to its
    rewriter ('rule' defaults to a seeded ``RuleRewriter``); ``options[code]`` go to
    ``perturb_prompt`` for controlled codes."""
    code, source = parse_spec(spec)
    out = PerturbedSet(spec, code, source, GROUPS[code])
    if source == "auditor":
        if rating_set is None or not auditor_codes(rating_set):
            raise ConfigError(f"perturbation '{spec}' needs Reward Auditor's perturbed files (--data "
                              "reward_auditor:PATH)")
        by_id = rating_set.by_id()
        for it in items:
            rec = by_id.get(it.prompt_id)
            var = (rec.meta.get("perturbed") or {}).get(code) if rec is not None else None
            if not var:  # no version of this item in the files: a failed twin, counted
                out.twins.append(Twin(it.item_id, it.pair, None, False))
                continue
            if code in PROMPT_PERTURBATIONS:
                msgs = list(it.pair.messages)
                last = max(i for i, m in enumerate(msgs) if m[0] == "user")
                msgs[last] = ("user", var["prompt"])
                new = Pair(tuple(msgs), it.pair.chosen, it.pair.rejected)
            else:
                new = Pair(it.pair.messages, var["chosen"], var["rejected"])
            out.twins.append(Twin(it.item_id, it.pair, new, new != it.pair))
        return out
    if source is None:
        opts = (options or {}).get(code, {})
        for it in items:
            new = _perturb_last_user(it.pair, code, seed, it.item_id, opts)
            out.twins.append(Twin(it.item_id, it.pair, new, new != it.pair))
        return out
    if source == "rmbench":
        if rating_set is None or not is_style_leveled(rating_set):
            raise ConfigError(f"perturbation '{spec}' needs an RM-Bench set (responses at three style levels)")
        lo, hi = RMBENCH_LEVELS[code]
        st = _style(rating_set)
        for it in items:
            pid = it.prompt_id
            try:
                orig = Pair(it.pair.messages, st[(pid, "chosen", lo)], st[(pid, "rejected", lo)])
                new = Pair(it.pair.messages, st[(pid, "chosen", hi)], st[(pid, "rejected", hi)])
            except KeyError:
                out.twins.append(Twin(it.item_id, it.pair, None, False))
                continue
            out.twins.append(Twin(it.item_id, orig, new, new != orig))
        return out
    rw = (rewriters or {}).get(source)
    if rw is None:
        if source != "rule":
            raise ConfigError(f"perturbation '{spec}' needs a {source} rewriter (e.g. --rewriter hf:MODEL, "
                              "openai:MODEL or file:PATH)")
        rw = RuleRewriter(seed=seed)
    reqs = [RewriteRequest(it.item_id, side, getattr(it.pair, side)) for it in items for side in ("chosen", "rejected")]
    texts = rw.rewrite(code, reqs)
    for k, it in enumerate(items):
        c, r = texts[2 * k], texts[2 * k + 1]
        if not c or not r or not c.strip() or not r.strip():
            out.twins.append(Twin(it.item_id, it.pair, None, False))
            continue
        new = Pair(it.pair.messages, c, r)
        out.twins.append(Twin(it.item_id, it.pair, new, new != it.pair))
    return out


def build_suite(specs: list[str], items: list[Item], **kwargs: Any) -> list[PerturbedSet]:
    seen = set()
    for s in specs:
        parse_spec(s)
        if s in seen:
            raise ConfigError(f"perturbation '{s}' given twice")
        seen.add(s)
    return [build_perturbation(s, items, **kwargs) for s in specs]


def default_specs(rating_set: RatingSet, *, with_lm: bool = False) -> list[str]:
    """Every perturbation whose inputs are at hand: on Reward Auditor's files, each code they hold
    (``@auditor``); else the five controlled, rule-based ST and SP, RM-Bench's LE/SP levels on
    RM-Bench, and LE/LC/SLC with a model rewriter."""
    held = auditor_codes(rating_set)
    if held:
        return [f"{c}@auditor" for c in held]
    specs = list(CHEAP)
    if is_style_leveled(rating_set):
        specs += ["LE@rmbench", "SP@rmbench"]
    if with_lm:
        specs += ["LE", "LC", "SLC"]
    return specs
