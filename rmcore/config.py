"""Recipes: YAML mappings read into dataclasses, strictly.

A recipe section becomes a dataclass by :func:`build_config`: every key must be a field (a typo
is an error naming the key, the file and the allowed keys, never a silently ignored option),
nested mappings become nested dataclasses, and scalars are coerced to their field's type (YAML
1.1 reads ``1e-5`` as a string; ``--set`` overrides arrive as text), then every number is checked
against the range its field declares (``rmcore.settings.check_ranges``: ``F.training.learning_rate:
nan is out of range; allowed: a finite number > 0``). :func:`config_from_dict`
applies dotted overrides (``training.learning_rate=1e-5``) first. Each library keeps its own
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
from rmcore.io import check_path
from rmcore.settings import check_ranges, is_embedded, nesting, type_hints

T = TypeVar("T")


def build_config(cls: type[T], values: Any, where: str, *, base: Any = None) -> T:
    """Dataclass from a mapping, recursively, rejecting unknown keys; ``base``: the instance whose
    values the keys not given keep (an embedded block's holder default), else the class defaults."""
    if not dataclasses.is_dataclass(cls):
        return values
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    hints = type_hints(cls)
    names = recipe_keys(cls)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if is_embedded(f):
            # an embedded settings field (``rmcore.settings.nested(embed=True)``) takes its keys from the
            # parent's mapping: ``sweep.audit.n_boot`` is the held ``AuditSettings``' ``n_boot``
            inner = {k: values[k] for k in _embedded_keys(f, hints[f.name]) if k in values}
            if inner:
                held = getattr(base, f.name) if base is not None else _field_default(f)
                kwargs[f.name] = build_config(type(held), inner, where, base=held)
            continue
        if f.name not in values:
            continue
        v, t = values[f.name], hints[f.name]
        sub = dataclass_in(t)
        if sub is not None and (isinstance(v, dict) or v is None):
            kwargs[f.name] = build_config(sub, v, f"{where}.{f.name}")
        else:
            kwargs[f.name] = coerce_value(v, t, f"{where}.{f.name}")
    try:
        cfg = dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None
    check_ranges(cfg, where=where)
    return cfg


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


def coerce_value(v: Any, t: Any, where: str) -> Any:
    """Scalars to their field's type. YAML 1.1 reads '1e-5' (no dot) as a string, and command-line
    overrides arrive as text: a learning rate must not reach the optimizer as a string."""
    # plain scalars and Optional scalars only; list[int] and dict[...] are left as they are
    args = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else ()
    scalar = t if t in (float, int, bool) else next((a for a in args if a in (float, int, bool)), None)
    if v is None or scalar is None or isinstance(v, bool) and scalar is bool:
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
        raise ConfigError(f"{where}: expected {scalar.__name__}, got {v!r}") from None


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
    cfg = build_config(cls, raw, where)
    if hasattr(cfg, "validate"):
        cfg.validate()
    return cfg
