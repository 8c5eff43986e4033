"""Command settings declared once: a dataclass whose fields carry their flags.

A field declared with :func:`option` is a command-line flag; :func:`add_options` generates the flags
of a settings dataclass on an ``argparse`` parser and :func:`from_args` reads the parsed namespace
back into the dataclass, so no field is mapped by hand from argparse onto a dataclass (the pattern of
transformers' ``HfArgumentParser``, without importing transformers: ``--help`` stays cheap).

- The flag is ``--`` + the field name with ``_`` as ``-`` unless ``flag=`` names it; its ``dest`` is
  the field's dotted path (``scorer.batch_size``), so nested settings never clash.
- Its type comes from the annotation: ``bool`` is a switch (``store_true``), ``int``/``float``/``str``
  (or ``X | None``) are parsed by argparse, ``list[X]`` takes ``nargs="+"``; ``choices``, ``metavar``,
  ``nargs`` and ``required`` pass through.
- ``parse=`` turns the flag's raw value into the field's value inside :func:`from_args` (``NAME=R``
  lists into a mapping, comma lists into lists), raising :class:`rmcore.errors.ConfigError` for a bad
  value as the command's other checks do.
- A field whose type is a settings dataclass declared with ``nested()`` contributes its own flags
  (``flatten``); a recipe reads an ``embed``-ded one from its parent's keys (:mod:`rmcore.config`),
  so a settings object can *hold* another instead of copying its fields.
- A field without ``option`` metadata is not a flag (set by code or by a recipe only).
- ``positional=True`` makes the field a positional argument (named by the field) instead of a flag.
- ``recipe_key=`` declares the flag an override of a recipe key (``"model.name_or_path"``, or a
  tuple of keys it sets together): :func:`flag_overrides` maps the flags given onto those keys.

:func:`flag_names` lists what a dataclass generates, which a test compares with each command's
parser: every field has a flag, every flag a field."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field
from typing import Any, TypeVar, get_type_hints

T = TypeVar("T")

_KEY = "matchrm.option"
_NESTED = "matchrm.nested"


@dataclasses.dataclass(frozen=True)
class Option:
    """How a settings field appears on the command line (see the module docstring)."""

    help: str
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    choices: tuple[Any, ...] | None = None
    nargs: str | int | None = None
    parse: Callable[[Any], Any] | None = None
    required: bool = False
    action: str | None = None  # an argparse action other than the one the type implies
    positional: bool = False
    recipe_keys: tuple[str, ...] = ()  # the recipe keys this flag overrides (flag_overrides)


def option(default: Any = MISSING, *, help: str, default_factory: Any = MISSING, flag: str | None = None,
           aliases: tuple[str, ...] = (), metavar: str | None = None, choices: Any = None,
           nargs: str | int | None = None, parse: Callable[[Any], Any] | None = None, required: bool = False,
           action: str | None = None, positional: bool = False,
           recipe_key: str | tuple[str, ...] | None = None) -> Any:
    """A dataclass field that is also a command-line flag (the field's doc is its ``help``)."""
    keys = (recipe_key,) if isinstance(recipe_key, str) else tuple(recipe_key or ())
    meta = {_KEY: Option(help=help, flag=flag, aliases=tuple(aliases), metavar=metavar,
                         choices=tuple(choices) if choices is not None else None, nargs=nargs, parse=parse,
                         required=required, action=action, positional=positional, recipe_keys=keys)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def nested(default_factory: Callable[[], Any], *, embed: bool = False, flatten: bool = True) -> Any:
    """A field holding another settings dataclass: its flags are the command's too (``flatten``),
    and with ``embed`` a recipe gives its keys at the parent's level."""
    return dataclasses.field(default_factory=default_factory,
                             metadata={_NESTED: {"embed": embed, "flatten": flatten}})


def is_embedded(f: Field) -> bool:
    return bool(f.metadata.get(_NESTED, {}).get("embed"))


def _scalar(t: Any) -> tuple[Any, bool]:
    """(the annotation without ``| None``, whether it is a list)."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        t = args[0] if len(args) == 1 else str
    if typing.get_origin(t) in (list, tuple):
        inner = typing.get_args(t)
        return (inner[0] if inner and inner[0] is not Ellipsis else str), True
    return t, False


def _nested_class(f: Field, hint: Any) -> type | None:
    if _NESTED not in f.metadata or not f.metadata[_NESTED].get("flatten", True):
        return None
    t, _ = _scalar(hint)
    return t if dataclasses.is_dataclass(t) else None


def _fields(cls: type) -> Iterator[tuple[Field, Any]]:
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        yield f, hints[f.name]


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def add_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *, prefix: str = "",
                defaults: dict[str, Any] | None = None, exclude: tuple[str, ...] = ()) -> None:
    """Add the flags of settings dataclass ``cls`` to ``p``; ``defaults`` replace field defaults (a
    command whose default differs from the library's), ``exclude`` leaves fields out by name."""
    defaults = defaults or {}
    for f, hint in _fields(cls):
        if f.name in exclude:
            continue
        sub = _nested_class(f, hint)
        if sub is not None:
            add_options(p, sub, prefix=f"{prefix}{f.name}.", defaults=defaults.get(f.name) or {})
            continue
        opt: Option | None = f.metadata.get(_KEY)
        if opt is None:
            continue
        t, many = _scalar(hint)
        names = [opt.flag or "--" + f.name.replace("_", "-"), *opt.aliases]
        kw: dict[str, Any] = {"dest": prefix + f.name, "help": opt.help,
                              "default": defaults.get(f.name, _default(f))}
        if opt.positional:  # argparse names a positional by its dest (shown as the field's name)
            names = [kw.pop("dest")]
            if prefix:
                kw["metavar"] = f.name
        if opt.required:
            kw["required"] = True
            kw.pop("default")
        if opt.action is not None:
            kw["action"] = opt.action
            if opt.metavar is not None:  # an action that takes a value (append) shows it so
                kw["metavar"] = opt.metavar
        elif t is bool and not many:
            kw["action"] = "store_true"
        else:
            kw.setdefault("metavar", opt.metavar or (f.name if opt.positional else f.name.upper()))
            if opt.choices is not None:
                kw["choices"] = list(opt.choices)
                if opt.metavar is None:
                    kw.pop("metavar")
            if opt.parse is None and t in (int, float, str):
                kw["type"] = t
            if opt.nargs is not None:
                kw["nargs"] = opt.nargs
            elif many:
                kw["nargs"] = "+"
        p.add_argument(*names, **kw)


def from_args(cls: type[T], args: argparse.Namespace, *, prefix: str = "", **given: Any) -> T:
    """The settings ``cls`` from parsed flags (each ``parse`` applied); ``given`` sets fields that
    are not flags of this command (or overrides them)."""
    kwargs: dict[str, Any] = {}
    for f, hint in _fields(cls):
        if f.name in given:
            kwargs[f.name] = given[f.name]
            continue
        sub = _nested_class(f, hint)
        if sub is not None:
            kwargs[f.name] = from_args(sub, args, prefix=f"{prefix}{f.name}.")
            continue
        opt: Option | None = f.metadata.get(_KEY)
        dest = prefix + f.name
        if opt is None or not hasattr(args, dest):
            continue  # not a flag (or left out of this command): the field's default
        value = getattr(args, dest)
        kwargs[f.name] = opt.parse(value) if opt.parse is not None else value
    return cls(**kwargs)


def flag_names(cls: type, *, exclude: tuple[str, ...] = ()) -> set[str]:
    """Every flag (first spelling) that :func:`add_options` generates for ``cls`` (positional
    arguments are not flags: see :func:`option_dests`)."""
    out: set[str] = set()
    for f, hint in _fields(cls):
        if f.name in exclude:
            continue
        sub = _nested_class(f, hint)
        if sub is not None:
            out |= flag_names(sub)
        elif (opt := f.metadata.get(_KEY)) is not None and not opt.positional:
            out.add(opt.flag or "--" + f.name.replace("_", "-"))
    return out


def option_dests(cls: type, *, prefix: str = "") -> set[str]:
    """The ``dest`` of every argument (flag or positional) :func:`add_options` generates for ``cls``."""
    out: set[str] = set()
    for f, hint in _fields(cls):
        sub = _nested_class(f, hint)
        if sub is not None:
            out |= option_dests(sub, prefix=f"{prefix}{f.name}.")
        elif _KEY in f.metadata:
            out.add(prefix + f.name)
    return out


def flag_overrides(settings: Any) -> dict[str, Any]:
    """The recipe keys that the flags of ``settings`` given on the command line override (fields
    declared with ``recipe_key``), with their values; a flag left at None overrides nothing."""
    out: dict[str, Any] = {}
    for f, hint in _fields(type(settings)):
        value = getattr(settings, f.name)
        if _nested_class(f, hint) is not None:
            out.update(flag_overrides(value))
        elif (opt := f.metadata.get(_KEY)) is not None and value is not None:
            out.update(dict.fromkeys(opt.recipe_keys, value))
    return out


def parser_dests(p: argparse.ArgumentParser) -> set[str]:
    """The ``dest`` of every argument of a parser (flags and positionals), ``--help`` left out."""
    return {a.dest for a in p._actions if a.dest != "help"}


def parser_flags(p: argparse.ArgumentParser) -> set[str]:
    """Every long flag of a parser (its first spelling), ``--help`` left out."""
    return {a.option_strings[0] for a in p._actions if a.option_strings and a.option_strings[0] != "-h"}
