"""Rating-set loaders by name, and the validation every loaded set goes through.

``load_rating_set(spec)`` takes a dict (or just a name) such as::

    {"name": "helpsteer2", "path": "nvidia/HelpSteer2" | "local.jsonl.gz", "split": "train",
     "preference_path": "preference.jsonl.gz" | "hub", "limit": 500}
    {"name": "helpsteer", "path": "nvidia/HelpSteer", "split": "validation"}
    {"name": "simulated", "n_prompts": 600, "human_share": 0.3, "seed": 0, ...}
    {"name": "rm_bench", "path": "rm-bench/chat_filtered.json"}
    {"name": "reward_auditor", "path": "RewardAuditor/datasets", "task": "chat", "labels": "content"}
    {"name": "hh_rlhf", "path": "Anthropic/hh-rlhf" | "harmless-base_test.jsonl.gz", "data_dir": ...}
    {"name": "shp", "path": "stanfordnlp/SHP" | "local.jsonl", "split": "validation"}
    {"name": "rewardbench", "path": "allenai/reward-bench" | "filtered.json", "split": "filtered"}
    {"name": "rewardbench2", "path": "allenai/reward-bench-2" | "rb2.jsonl", "split": "test"}
    {"name": "generic", "path": "ratings.csv", "columns": {"prompt": ..., "response": ..., ...}}

On the command line a spec is a SPEC string (``parse_data_spec``): a JSON/YAML data-spec file, a
JSON string, or a short form ``simulated``, ``simulated:n_prompts=100,seed=3``,
``rm_bench:/path/chat_filtered.json``, ``helpsteer2:validation`` (after the colon: ``key=value``
pairs, and at most one bare value -- a split name for the sets with splits when it has no path
characters, otherwise a path).

Every spec may also carry ``on_bad`` ("raise", the default, or "skip") and ``min_responses``
(default 2). The loaded set is then validated (`validate_rating_set`): missing or non-numeric
ratings, empty responses, prompts with too few responses and duplicate ids raise a DataError
naming file, row and field, or with ``on_bad="skip"`` are dropped and counted in
``RatingSet.skipped``.

Each loader's module is imported by the wrapper that calls it (pandas, scipy): the names are
listed and a spec checked without loading a table library (``--help``, a recipe's check).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rmcore.data.schema import PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import ConfigError, DataError, invalid_json
from rmcore.settings.fields import Range
from rmcore.settings.registry import Registry, did_you_mean

Loader = Callable[[dict[str, Any]], RatingSet]
# name -> loader; a spec's "name" is looked up here (the known names are listed sorted in the error)
LOADERS: Registry[Loader] = Registry("rating set", message="unknown rating set {name!r}; known: {known}",
                                     sort_known=True)
COMMON_KEYS = ("name", "on_bad", "min_responses", "validate")
SPLITS = ("train", "validation", "test", "filtered", "raw")
# sets whose loaders take a split: a bare "validation" after the colon is a split, not a path
SPLIT_SETS = ("helpsteer", "helpsteer2", "hh_rlhf", "shp", "rewardbench", "rewardbench2")


def register_loader(name: str, *, replace: bool = False) -> Callable[[Loader], Loader]:
    """Decorator: make `fn(spec) -> RatingSet` loadable as ``{"name": name, ...}`` (and as the SPEC
    string ``name:key=value,...``). A name already registered is an error unless ``replace``."""
    return LOADERS.register(name, replace=replace)


def known_loaders() -> list[str]:
    """The registered rating-set names, sorted."""
    return sorted(LOADERS)


def _take(spec: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """Spec keys for the loader; unknown keys are an error (a typo must not be ignored silently)."""
    extra = sorted(set(spec) - set(allowed) - set(COMMON_KEYS))
    if extra:
        raise ConfigError(f"loader {spec['name']!r}: unknown spec keys {extra}{did_you_mean(extra[0], allowed)}; "
                          f"allowed: {sorted(allowed)}")
    return {k: spec[k] for k in allowed if k in spec}


# the spec keys every loader reads the same way, and the values they take (checked before any file is read)
COUNTS = {"limit": Range(ge=1), "min_responses": Range(ge=1)}


def check_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` with its ``limit`` (rows read; None: all) and ``min_responses`` checked: a value out
    of range is one ConfigError naming the set, the key and the values allowed, before any file is
    read or output written (``limit=0`` would load an empty set, and an audit of it fail late)."""
    for key, rng in COUNTS.items():
        v = spec.get(key)
        if v is None:
            continue
        ok = isinstance(v, int) and not isinstance(v, bool) and rng.allows(v)
        if not ok:
            raise ConfigError(f"data spec {spec.get('name')!r}: {key}: {v!r} is out of range; allowed: "
                              f"{rng.describe(integer=True)}")
    return spec


def _from_hub(spec: dict[str, Any], keys: tuple[str, ...], load: Callable[..., RatingSet], hub_id: str,
              split: str) -> RatingSet:
    """A loader whose ``path`` defaults to its Hub id and ``split`` to ``split``; the other ``keys`` pass through."""
    kw = _take(spec, keys)
    return load(kw.pop("path", hub_id), kw.pop("split", split), on_bad=spec.get("on_bad", "raise"), **kw)


@register_loader("helpsteer2")
def _helpsteer2(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.helpsteer import HELPSTEER2_HUB_ID, load_helpsteer2

    return _from_hub(spec, ("path", "split", "preference_path", "limit"), load_helpsteer2, HELPSTEER2_HUB_ID, "train")


@register_loader("helpsteer")
def _helpsteer(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.helpsteer import HELPSTEER_HUB_ID, load_helpsteer

    return _from_hub(spec, ("path", "split", "limit"), load_helpsteer, HELPSTEER_HUB_ID, "train")


@register_loader("simulated")
def _simulated(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.simulated import CONFIG_FIELDS, SimulationSettings, simulate_rating_set
    from rmcore.settings.recipes import build_config

    # the knobs read as a recipe block: typed, and each in its range (simulated.n_prompts: -5 is ...)
    cfg = build_config(SimulationSettings, _take(spec, CONFIG_FIELDS), "simulated")
    try:
        return simulate_rating_set(cfg)
    except ValueError as e:  # knobs in range that together leave no within-prompt variance
        raise ConfigError(f"simulated: {e}") from None


@register_loader("rm_bench")
def _rm_bench(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.preference_sets import load_rm_bench

    kw = _take(spec, ("path", "limit"))
    if "path" not in kw:
        raise ConfigError("rm_bench needs a 'path' (RM-Bench is distributed as JSON files on GitHub)")
    return load_rm_bench(kw.pop("path"), **kw)


@register_loader("reward_auditor")
def _reward_auditor(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.reward_auditor import load_reward_auditor

    kw = _take(spec, ("path", "task", "labels", "limit"))
    if "path" not in kw:
        raise ConfigError("reward_auditor needs a 'path' (a folder or file of Reward Auditor's perturbed RM-Bench)")
    return load_reward_auditor(kw.pop("path"), on_bad=spec.get("on_bad", "raise"), **kw)


@register_loader("hh_rlhf")
def _hh_rlhf(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.preference_sets import HH_RLHF_HUB_ID, load_hh_rlhf

    return _from_hub(spec, ("path", "split", "data_dir", "limit"), load_hh_rlhf, HH_RLHF_HUB_ID, "test")


@register_loader("shp")
def _shp(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.shp import SHP_HUB_ID, load_shp

    return _from_hub(spec, ("path", "split", "limit"), load_shp, SHP_HUB_ID, "validation")


@register_loader("rewardbench")
def _rewardbench(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.rewardbench import REWARDBENCH_HUB_ID, load_rewardbench

    return _from_hub(spec, ("path", "split", "limit"), load_rewardbench, REWARDBENCH_HUB_ID, "filtered")


@register_loader("rewardbench2")
def _rewardbench2(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.rewardbench import REWARDBENCH2_HUB_ID, load_rewardbench2

    return _from_hub(spec, ("path", "split", "limit"), load_rewardbench2, REWARDBENCH2_HUB_ID, "test")


@register_loader("generic")
def _generic(spec: dict[str, Any]) -> RatingSet:
    from rmcore.data.generic import load_generic

    kw = _take(spec, ("path", "columns", "split", "limit", "source", "display_name"))
    if "path" not in kw or "columns" not in kw:
        raise ConfigError("generic needs 'path' and 'columns' (see rmcore.data.generic)")
    return load_generic(kw.pop("path"), kw.pop("columns"), on_bad=spec.get("on_bad", "raise"),
                        name=kw.pop("display_name", None), **kw)


def load_rating_set(spec: Mapping[str, Any] | str) -> RatingSet:
    """Load and validate a rating set from a spec (see module doc)."""
    spec = {"name": spec} if isinstance(spec, str) else dict(spec)
    name = spec.get("name")
    loader = LOADERS.lookup(name)
    check_spec(spec)
    on_bad = spec.get("on_bad", "raise")
    check_on_bad(on_bad)
    rs = loader(spec)
    if spec.get("validate", True):
        validate_rating_set(rs, on_bad=on_bad, min_responses=int(spec.get("min_responses", 2)))
    return rs


def _value(text: str) -> Any:
    import yaml

    v = yaml.safe_load(text)
    return text if v is None or isinstance(v, (dict, list)) else v


def parse_data_spec(spec: str) -> dict[str, Any]:
    """SPEC string -> loader spec dict (see module doc)."""
    path = Path(spec)
    if path.suffix in (".json", ".yaml", ".yml") and path.is_file() and ":" not in spec.split("/")[0]:
        import yaml

        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict) or "name" not in loaded:
            raise ConfigError(f"{path}: a data-spec file must be a mapping with a 'name' "
                              "(for a raw data file use NAME:PATH, e.g. rm_bench:{path})")
        return dict(check_spec(loaded))
    if spec.lstrip().startswith("{"):
        try:
            loaded = json.loads(spec)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--data: {invalid_json(e)}") from None
        if "name" not in loaded:
            raise ConfigError("--data: a JSON spec needs a 'name'")
        return dict(check_spec(loaded))
    name, _, rest = spec.partition(":")
    out: dict[str, Any] = {"name": name}
    if rest:
        for part in rest.split(","):
            if "=" in part and not Path(part).exists():
                k, _, v = part.partition("=")
                out[k.strip()] = _value(v.strip())
            elif part:
                out["split" if part in SPLITS and name in SPLIT_SETS else "path"] = part
    return dict(check_spec(out))


def load_data(spec: str | Mapping[str, Any], max_prompts: int | None = None, seed: int = 0) -> RatingSet:
    """Rating set for a SPEC string or a spec mapping; with ``max_prompts`` a seeded sample of
    prompts (input order kept), the same sample for the same seed."""
    return load_rating_set(parse_data_spec(spec) if isinstance(spec, str) else spec).sample(max_prompts, seed)


def _where(obj: PromptRecord | Response) -> tuple[str | None, int | None]:
    return obj.meta.get("source_file"), obj.meta.get("source_row")


def _bad_rating(x: Any) -> str | None:
    if x is None:
        return "missing rating"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return f"rating must be a number, got {x!r}"
    if math.isnan(x) or math.isinf(x):
        return f"rating is not a finite number, got {x!r}"
    return None


def validate_rating_set(rs: RatingSet, on_bad: str = "raise", min_responses: int = 2) -> RatingSet:
    """Check `rs` for bad input (in place). With ``on_bad="raise"`` the first problem raises a
    DataError naming file/row/field; with "skip" bad responses, then prompts left with fewer than
    `min_responses` responses, are dropped and counted in ``rs.skipped`` (preferences that refer to
    dropped responses are dropped too)."""
    check_on_bad(on_bad)
    counts: Counter = Counter()

    def bad(reason: str, msg: str, obj: PromptRecord | Response, field: str | None) -> None:
        if on_bad == "raise":
            file, row = _where(obj)
            err = DataError(f"{msg} [{getattr(obj, 'response_id', None) or obj.prompt_id}]", file=file, row=row,
                            field=field)
            raise err if reason == "duplicate_prompt_id" else err.skippable()
        counts[reason] += 1

    seen_prompts: set[str] = set()
    kept_prompts: list[PromptRecord] = []
    for p in rs.prompts:
        if p.prompt_id in seen_prompts:
            bad("duplicate_prompt_id", f"duplicate prompt_id {p.prompt_id!r}", p, "prompt_id")
            continue
        seen_prompts.add(p.prompt_id)
        if not p.messages or p.messages[-1]["role"] != "user" or not str(p.messages[-1]["content"]).strip():
            bad("bad_prompt", "conversation must end with a non-empty user turn", p, "prompt")
            continue
        seen_ids: set[str] = set()
        kept: list[Response] = []
        for r in p.responses:
            if r.response_id in seen_ids:
                bad("duplicate_response_id", f"duplicate response_id {r.response_id!r} in prompt "
                    f"{p.prompt_id!r}", r, "response_id")
                continue
            seen_ids.add(r.response_id)
            if not isinstance(r.text, str) or not r.text.strip():
                bad("empty_response", "empty response text", r, "response")
                continue
            problem = None
            for a in rs.attributes:
                problem = _bad_rating(r.ratings.get(a))
                if problem:
                    bad(f"bad_rating_{a}", problem, r, a)
                    break
            if problem:
                continue
            kept.append(r)
        if len(kept) < min_responses:
            bad("too_few_responses", f"prompt has {len(kept)} valid response(s), need {min_responses}",
                p, "response")
            continue
        p.responses = kept
        kept_prompts.append(p)
    if counts:
        rs.prompts = kept_prompts
        alive = {(p.prompt_id, r.response_id) for p in kept_prompts for r in p.responses}
        before = len(rs.preferences)
        rs.preferences = [q for q in rs.preferences
                          if (q.prompt_id, q.chosen_id) in alive and (q.prompt_id, q.rejected_id) in alive]
        if len(rs.preferences) < before:
            counts["preference_dropped_with_response"] += before - len(rs.preferences)
        rs.skipped.update(counts)
    return rs
