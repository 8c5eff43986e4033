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
- The holder says how the held settings appear (``nested``): in an argument ``group`` of the help,
  with a flag ``prefix`` (``--probe-`` + the field's flag), ``only`` some of their fields as flags
  (dotted for deeper ones), some fields' ``options`` replaced (another flag name, help or nargs), and
  ``when``: the held settings are None unless one of those fields' flags is given (``--judge-items``
  turns the judge profile on). ``keys`` limits an embedded block's recipe keys to some of its fields.
- A flag that is not given reads back as the field's default: ``parse`` sees only what was typed.

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


@dataclasses.dataclass(frozen=True)
class Nesting:
    """How a held settings dataclass appears in its holder (see :func:`nested`)."""

    embed: bool = False
    flatten: bool = True
    keys: tuple[str, ...] | None = None  # embed: the held fields a recipe gives at the parent's level (None: all)
    group: str | None = None  # the argument group its flags are listed under in --help
    prefix: str = ""  # put after the "--" of each of its flags
    only: tuple[str, ...] | None = None  # the fields that are flags here (None: every option)
    when: tuple[str, ...] = ()  # fields whose flags, given, turn the held settings on (else None)
    options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # (field, ((Option attribute, value), ...))
    cls: type | None = None  # the held class, where the annotation is not resolvable at run time


def nested(default_factory: Callable[[], Any], *, embed: bool = False, flatten: bool = True,
           keys: tuple[str, ...] | None = None, group: str | None = None, prefix: str = "",
           only: tuple[str, ...] | None = None, when: str | tuple[str, ...] = (),
           options: dict[str, dict[str, Any]] | None = None) -> Any:
    """A field holding another settings dataclass: its flags are the command's too (``flatten``),
    and with ``embed`` a recipe gives its keys (or ``keys`` of them) at the parent's level. ``when``:
    the field is None unless one of these fields' flags is given (``default_factory`` is then the
    held class). ``group``, ``prefix``, ``only``, ``options``: see the module docstring."""
    when = (when,) if isinstance(when, str) else tuple(when)
    meta = Nesting(embed=embed, flatten=flatten, keys=tuple(keys) if keys is not None else None, group=group,
                   prefix=prefix, only=tuple(only) if only is not None else None, when=when,
                   options=tuple((k, tuple(v.items())) for k, v in (options or {}).items()),
                   cls=default_factory if isinstance(default_factory, type) else None)
    if when:
        return dataclasses.field(default=None, metadata={_NESTED: meta})
    return dataclasses.field(default_factory=default_factory, metadata={_NESTED: meta})


def nesting(f: Field) -> Nesting | None:
    """How field ``f`` holds another settings dataclass; None for a plain field."""
    return f.metadata.get(_NESTED)


def is_embedded(f: Field) -> bool:
    return bool((n := nesting(f)) and n.embed)


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
    n = nesting(f)
    if n is None or not n.flatten:
        return None
    t, _ = _scalar(hint)
    return t if dataclasses.is_dataclass(t) else n.cls


def type_hints(cls: type) -> dict[str, Any]:
    """The fields' annotations resolved; a name imported for type checking only (``if
    TYPE_CHECKING:``) reads as ``Any`` (such a field is set by code, never read from flags or keys)."""
    unknown: dict[str, Any] = {}
    while True:
        try:
            return get_type_hints(cls, localns=unknown)
        except NameError as e:
            if e.name is None or e.name in unknown:
                raise
            unknown[e.name] = Any


def _fields(cls: type) -> Iterator[tuple[Field, Any]]:
    hints = type_hints(cls)
    for f in dataclasses.fields(cls):
        yield f, hints[f.name]


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def _included(only: tuple[str, ...] | None, name: str) -> tuple[bool, tuple[str, ...] | None]:
    """(whether field ``name`` is in ``only``, what of it is: None for all)."""
    if only is None or name in only:
        return True, None
    deeper = tuple(o.split(".", 1)[1] for o in only if o.startswith(name + "."))
    return bool(deeper), deeper or None


def _narrow(outer: tuple[str, ...] | None, inner: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The fields both ``only`` lists let through (the holder's declaration and the command's)."""
    if outer is None or inner is None:
        return inner if outer is None else outer
    return tuple(o for o in outer if _included(inner, o.split(".", 1)[0])[0])


@dataclasses.dataclass
class _Flag:
    dest: str
    field: Field
    hint: Any
    opt: Option
    default: Any
    group: str | None


def _flags(cls: type, *, dest: str = "", only: tuple[str, ...] | None = None, prefix: str = "",
           options: dict[str, dict[str, Any]] | None = None, optional: bool = False,
           group: str | None = None, exclude: tuple[str, ...] = ()) -> Iterator[_Flag]:
    """Every flag of ``cls``, nested ones included, as the holders declare them."""
    for f, hint in _fields(cls):
        included, deeper = _included(only, f.name)
        if f.name in exclude or not included:
            continue
        sub = _nested_class(f, hint)
        if sub is not None:
            n = nesting(f)
            assert n is not None
            yield from _flags(sub, dest=f"{dest}{f.name}.", only=_narrow(n.only, deeper), prefix=prefix + n.prefix,
                              options={k: dict(v) for k, v in n.options}, optional=optional or bool(n.when),
                              group=n.group or group)
            continue
        opt: Option | None = f.metadata.get(_KEY)
        if opt is None:
            continue
        over = dict((options or {}).get(f.name, {}))
        if prefix and "flag" not in over:
            over["flag"] = "--" + prefix + (opt.flag or "--" + f.name.replace("_", "-"))[2:]
        opt = dataclasses.replace(opt, **over) if over else opt
        # a flag inside an optional block, or one parsed, is None when not given (read back as the default)
        default = None if optional or opt.parse is not None else _default(f)
        yield _Flag(dest + f.name, f, hint, opt, default, group)


def _group(p: argparse.ArgumentParser | argparse._ArgumentGroup, title: str | None) -> Any:
    if title is None or not isinstance(p, argparse.ArgumentParser):
        return p
    return next((g for g in p._action_groups if g.title == title), None) or p.add_argument_group(title)


def _lookup(defaults: dict[str, Any], path: str) -> tuple[bool, Any]:
    cur: Any = defaults
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def add_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *, prefix: str = "",
                defaults: dict[str, Any] | None = None, exclude: tuple[str, ...] = ()) -> None:
    """Add the flags of settings dataclass ``cls`` to ``p``; ``defaults`` replace field defaults (a
    command whose default differs from the library's; nested as the fields are), ``exclude`` leaves
    fields out by name."""
    defaults = defaults or {}
    for flag in _flags(cls, dest=prefix, exclude=exclude):
        f, opt = flag.field, flag.opt
        t, many = _scalar(flag.hint)
        names = [opt.flag or "--" + f.name.replace("_", "-"), *opt.aliases]
        found, default = _lookup(defaults, flag.dest[len(prefix):])
        kw: dict[str, Any] = {"dest": flag.dest, "help": opt.help, "default": default if found else flag.default}
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
            elif many and opt.parse is None:  # a parsed flag is one word unless its nargs says otherwise
                kw["nargs"] = "+"
        _group(p, flag.group).add_argument(*names, **kw)


def from_args(cls: type[T], args: argparse.Namespace, *, prefix: str = "", only: tuple[str, ...] | None = None,
              **given: Any) -> T:
    """The settings ``cls`` from parsed flags (each ``parse`` applied to a flag given); ``given``
    sets fields that are not flags of this command (or overrides them)."""
    kwargs: dict[str, Any] = {}
    for f, hint in _fields(cls):
        if f.name in given:
            kwargs[f.name] = given[f.name]
            continue
        included, deeper = _included(only, f.name)
        if not included:
            continue
        sub = _nested_class(f, hint)
        if sub is not None:
            n = nesting(f)
            assert n is not None
            inner = f"{prefix}{f.name}."
            if n.when and all(getattr(args, inner + w, None) is None for w in n.when):
                continue  # none of the flags that turn it on: the field's default (None)
            kwargs[f.name] = from_args(sub, args, prefix=inner, only=_narrow(n.only, deeper))
            continue
        opt: Option | None = f.metadata.get(_KEY)
        dest = prefix + f.name
        if opt is None or not hasattr(args, dest):
            continue  # not a flag (or left out of this command): the field's default
        value = getattr(args, dest)
        if value is None and (f.default is not MISSING or f.default_factory is not MISSING):
            continue  # not given: the field's default
        kwargs[f.name] = opt.parse(value) if opt.parse is not None and value is not None else value
    return cls(**kwargs)


def flag_names(cls: type, *, exclude: tuple[str, ...] = ()) -> set[str]:
    """Every flag (first spelling) that :func:`add_options` generates for ``cls`` (positional
    arguments are not flags: see :func:`option_dests`)."""
    return {flag.opt.flag or "--" + flag.field.name.replace("_", "-") for flag in _flags(cls, exclude=exclude)
            if not flag.opt.positional}


def comma_list(text: str) -> list[str]:
    """A comma-separated flag value (``ridge,mlp``) as a list, blanks dropped: a ``parse`` of ``option``."""
    return [t.strip() for t in text.split(",") if t.strip()]


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
