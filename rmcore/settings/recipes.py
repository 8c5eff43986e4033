"""Recipes: YAML mappings read into dataclasses, strictly.

A recipe section becomes a dataclass by :func:`build_config`: every key must be a field (a typo
is an error naming the key, the file and the allowed keys, never a silently ignored option),
nested mappings become nested dataclasses, and scalars are coerced to their field's type (YAML
1.1 reads ``1e-5`` as a string; ``--set`` overrides arrive as text), then every number is checked
against the range its field declares (``rmcore.settings.fields.check_ranges``: ``F.training.learning_rate:
nan is out of range; allowed: a finite number > 0``). :func:`config_from_dict`
applies dotted overrides (``training.learning_rate=1e-5``) first. An unknown key names the closest
known one (``did you mean``); null sets a field that takes None to None, a list or mapping to empty,
and is an error for a number or text; a block whose switch (``rmcore.settings.fields.switch``) is off
refuses its other keys. An error about a key carries it (``ConfigError.key``), so a command names
the ``--set KEY=VALUE`` that gave it (:func:`blame_override`) rather than the recipe file. Each library keeps its own
config dataclasses beside the code that reads them (``rmtrain.config``, ``rmtrain.policy.config``,
``rmeval.audit.pipeline``); this module only loads them."""

from __future__ import annotations

import copy
import dataclasses
import os
import types
import typing
from collections.abc import Iterable
from typing import Any, TypeVar

import yaml

from rmcore.errors import ConfigError
from rmcore.io.files import check_path
from rmcore.settings.fields import check_ranges, is_embedded, is_switch, nesting, type_hints
from rmcore.settings.registry import did_you_mean

T = TypeVar("T")


def unknown_keys(where: str, unknown: list[str], allowed: Iterable[str]) -> ConfigError:
    """The error for keys that are not settings: ``WHERE: unknown key(s) ['learning_rat'] (did you
    mean 'learning_rate'?); allowed: [...]`` (its ``key``: the first unknown one)."""
    allowed = sorted(allowed)
    if len(unknown) == 1:
        hint = did_you_mean(unknown[0], allowed)
    else:
        hint = "".join(h.replace("?)", f" for '{u}'?)") for u in unknown if (h := did_you_mean(u, allowed)))
    reason = f"unknown key(s) {unknown}{hint}; allowed: {allowed}"
    return ConfigError(f"{where}: {reason}", key=f"{where}.{unknown[0]}", reason=reason)


def build_config(cls: type[T], values: Any, where: str, *, base: Any = None,
                 overridden: frozenset[str] = frozenset()) -> T:
    """Dataclass from a mapping, recursively, rejecting unknown keys; ``base``: the instance whose
    values the keys not given keep (an embedded block's holder default), else the class defaults;
    ``overridden``: the keys (``WHERE.key``, dotted) an override set, for the switch check."""
    if not dataclasses.is_dataclass(cls):
        return values
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError.at(where, f"expected a mapping, got {type(values).__name__}")
    hints = type_hints(cls)
    names = recipe_keys(cls)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise unknown_keys(where, unknown, names)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if is_embedded(f):
            # an embedded settings field (``rmcore.settings.fields.nested(embed=True)``) takes its keys from the
            # parent's mapping: ``sweep.audit.n_boot`` is the held ``AuditSettings``' ``n_boot``
            inner = {k: values[k] for k in _embedded_keys(f, hints[f.name]) if k in values}
            if inner:
                held = getattr(base, f.name) if base is not None else _field_default(f)
                kwargs[f.name] = build_config(type(held), inner, where, base=held, overridden=overridden)
            continue
        if f.name not in values:
            continue
        v, t = values[f.name], hints[f.name]
        sub = dataclass_in(t)
        if sub is not None and v is None and _takes_none(t):
            kwargs[f.name] = None  # null: no block (model.lora: null trains every weight)
        elif sub is not None and (isinstance(v, dict) or v is None):
            kwargs[f.name] = build_config(sub, v, f"{where}.{f.name}", overridden=overridden)
        else:
            kwargs[f.name] = coerce_value(v, t, f"{where}.{f.name}")
    try:
        cfg = dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except TypeError as e:
        raise ConfigError.at(where, str(e)) from None
    check_ranges(cfg, where=where)
    _check_switch(cfg, values, where, overridden)
    return cfg


def _check_switch(cfg: Any, values: dict[str, Any], where: str, overridden: frozenset[str]) -> None:
    """A block whose switch (``rmcore.settings.fields.switch``: ``audit.enabled``) is off does nothing
    with its other keys: one given is refused, naming it; an override's key first. A block the
    user turned off by an override keeps the recipe's keys unused."""
    for f in dataclasses.fields(cfg):
        if not is_switch(f) or getattr(cfg, f.name):
            continue
        idle = [k for k in values if k != f.name]
        by_override = [k for k in idle if any(o == f"{where}.{k}" or o.startswith(f"{where}.{k}.") for o in overridden)]
        if by_override or (idle and f"{where}.{f.name}" not in overridden):
            key = (by_override or idle)[0]
            raise ConfigError.at(f"{where}.{key}", f"has no effect while {where}.{f.name} is false (set it true, "
                                                   f"or leave {key} out)")


def _field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _embedded_keys(f: dataclasses.Field, hint: Any) -> list[str]:
    """The recipe keys an embedded field takes from its parent's mapping (its ``keys``, else all)."""
    n = nesting(f)
    sub = dataclass_in(hint) or (n.cls if n else None) or type(_field_default(f))
    keys = recipe_keys(sub)
    return [k for k in n.keys if k in keys] if n and n.keys is not None else keys


def recipe_keys(cls: type) -> list[str]:
    """The keys a recipe may give for ``cls``: its fields, an embedded block's keys in its place."""
    hints = type_hints(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        out += _embedded_keys(f, hints[f.name]) if is_embedded(f) else [f.name]
    return out


def recipe_dict(obj: Any) -> Any:
    """A settings object as the recipe mapping it is read from (``dataclasses.asdict`` with every
    embedded block's keys at its parent's level), so it reads back the same with ``build_config``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        hints = type_hints(type(obj))
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            v = recipe_dict(getattr(obj, f.name))
            if is_embedded(f):
                out.update({k: v[k] for k in _embedded_keys(f, hints[f.name])})
            else:
                out[f.name] = v
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(recipe_dict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((recipe_dict(k), recipe_dict(v)) for k, v in obj.items())
    return copy.deepcopy(obj)


def _takes_none(t: Any) -> bool:
    """Whether a field of annotation ``t`` may be None (``X | None``, ``Any``)."""
    if t is Any or t is type(None):
        return True
    return typing.get_origin(t) in (typing.Union, types.UnionType) and type(None) in typing.get_args(t)


def _null(t: Any, where: str) -> Any:
    """What null (YAML ``null``, ``--set KEY=null``) sets a field of annotation ``t`` to: None where
    the field takes it, an empty list or mapping for one (``sweep.search=null``: no grid), else an
    error (a number or text cannot be null)."""
    if _takes_none(t):
        return None
    container = typing.get_origin(t) or t
    if container in (list, tuple, dict):
        return container()
    if t in (bool, int, float, str):
        raise ConfigError.at(where, f"expected {t.__name__}, got null")
    return None


def coerce_value(v: Any, t: Any, where: str) -> Any:
    """Scalars to their field's type. YAML 1.1 reads '1e-5' (no dot) as a string, and command-line
    overrides arrive as text: a learning rate must not reach the optimizer as a string."""
    if v is None:
        return _null(t, where)
    # plain scalars and Optional scalars only; list[int] and dict[...] are left as they are
    args = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else ()
    scalar = t if t in (float, int, bool) else next((a for a in args if a in (float, int, bool)), None)
    if scalar is None or isinstance(v, bool) and scalar is bool:
        return v
    try:
        if scalar is bool:
            if isinstance(v, str) and v.lower() in ("true", "false", "yes", "no", "1", "0"):
                return v.lower() in ("true", "yes", "1")
            raise ValueError
        if scalar is int:
            f = float(v)
            if not f.is_integer():
                raise ValueError
            return int(f)
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError.at(where, f"expected {scalar.__name__}, got {v!r}") from None


def dataclass_in(t: Any) -> type | None:
    if dataclasses.is_dataclass(t):
        return t
    for a in getattr(t, "__args__", ()) or ():
        if dataclasses.is_dataclass(a):
            return a
    return None


def set_dotted(d: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    cur = d
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
        if not isinstance(cur, dict):
            raise ConfigError(f"override {dotted}: '{k}' is not a mapping")
    cur[keys[-1]] = value


def blame_override(e: ConfigError, recipe: str, items: list[str]) -> ConfigError:
    """``e`` said of the ``--set KEY=VALUE`` item that set the key it is about (the key, a key
    inside the value set, or a key below an unknown one it names), not of the recipe ``recipe``;
    ``e`` itself when no item did."""
    if e.key is None:
        return e
    key = e.key[len(recipe) + 1:] if e.key.startswith(recipe + ".") else e.key
    best = None
    for item in items:
        k = item.split("=", 1)[0].strip()
        if (key == k or key.startswith(k + ".") or k.startswith(key + ".")) and (best is None or len(k) > len(best[0])):
            best = (k, item)
    if best is None:
        return e
    k, item = best
    inner = f"{key[len(k) + 1:]}: " if key.startswith(k + ".") else ""
    return ConfigError(f"--set {item}: {inner}{e.reason}", key=e.key, reason=e.reason)


def parse_override(item: str) -> tuple[str, Any]:
    """'training.learning_rate=1e-5' -> ('training.learning_rate', 1e-05) (values parsed as YAML)."""
    if "=" not in item:
        raise ConfigError(f"override '{item}' must look like key.sub=value")
    k, v = item.split("=", 1)
    return k.strip(), yaml.safe_load(v)


def load_recipe(path: str | os.PathLike) -> dict[str, Any]:
    """The recipe's mapping; a YAML syntax error is one line naming the file, line and column."""
    path = check_path(path, "recipe")
    with open(path, encoding="utf-8") as f:
        try:
            raw = yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ConfigError(f"{path}{at}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a recipe must be a YAML mapping")
    return raw


def training_recipe_writing(path: str | os.PathLike, recipes_dir: str | os.PathLike = "recipes") -> str | None:
    """The training recipe in ``recipes_dir`` (``arm`` at its top) whose ``output_dir`` is ``path``,
    i.e. the one ``rmtrain train --config RECIPE`` writes ``path`` with; None where there is none.
    Said when a checkpoint is not found; an unreadable recipe is passed over."""
    from pathlib import Path

    target = Path(os.path.expanduser(str(path))).resolve()
    for recipe in sorted(Path(recipes_dir).glob("*.yaml")):
        try:
            raw = yaml.safe_load(recipe.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and "arm" in raw and isinstance(raw.get("output_dir"), str) \
                and Path(os.path.expanduser(raw["output_dir"])).resolve() == target:
            return str(recipe)
    return None


def copy_tree(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: copy_tree(v) for k, v in d.items()}
    if isinstance(d, list):
        return [copy_tree(v) for v in d]
    return d

def config_from_dict(cls: type[T], raw: dict[str, Any], *, where: str = "config",
                     overrides: dict[str, Any] | None = None, required: Iterable[str] = (),
                     drop: Iterable[str] = ("description",), shorthand: dict[str, str] | None = None,
                     skip_none_overrides: bool = False) -> T:
    """``cls`` from a recipe mapping: ``drop`` keys removed, dotted ``overrides`` applied (a None
    value sets null unless ``skip_none_overrides``), ``shorthand`` keys given as a bare string
    expanded (``model: NAME`` -> ``model: {name_or_path: NAME}``), ``required`` keys checked, then
    built strictly and validated (the dataclass's own ``validate()``, when it has one)."""
    dropped = set(drop)
    raw = copy_tree({k: v for k, v in raw.items() if k not in dropped})
    for k, v in (overrides or {}).items():
        if v is None and skip_none_overrides:
            continue
        set_dotted(raw, k, v)
    for key, name in (shorthand or {}).items():
        if isinstance(raw.get(key), str):
            raw[key] = {name: raw[key]}
    for req in required:
        if req not in raw:
            raise ConfigError(f"{where}: missing required key '{req}'")
    cfg = build_config(cls, raw, where, overridden=frozenset(f"{where}.{k}" for k in overrides or {}))
    if hasattr(cfg, "validate"):
        cfg.validate()
    return cfg
