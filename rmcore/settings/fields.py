"""Command settings declared once: a dataclass whose fields carry their flags.

A field declared with :func:`option` is a command-line flag; :func:`add_options` generates the flags
of a settings dataclass on an ``argparse`` parser and :func:`from_args` reads the parsed namespace
back into the dataclass, so no field is mapped by hand from argparse onto a dataclass (the pattern of
transformers' ``HfArgumentParser``, without importing transformers: ``--help`` stays cheap).

- The flag is ``--`` + the field name with ``_`` as ``-`` unless ``flag=`` names it; its ``dest`` is
  the field's dotted path (``scorer.batch_size``), so nested settings never clash.
- Its type comes from the annotation: ``bool`` is a switch (``store_true``), ``int``/``float``/``str``
  (or ``X | None``) are parsed by argparse, ``list[X]`` takes ``nargs="+"``; ``choices``, ``metavar``,
  ``nargs`` and ``required`` pass through (``choices`` may be a function giving them, such as a
  registry's ``names``: read when the parser is built, so a plugin's name is among them).
- ``parse=`` turns the flag's raw value into the field's value inside :func:`from_args` (``NAME=R``
  lists into a mapping, comma lists into lists), raising :class:`rmcore.errors.ConfigError` for a bad
  value as the command's other checks do.
- A field whose type is a settings dataclass declared with ``nested()`` contributes its own flags
  (``flatten``); a recipe reads an ``embed``-ded one from its parent's keys (:mod:`rmcore.settings.recipes`),
  so a settings object can *hold* another instead of copying its fields.
- A field without ``option`` metadata is not a flag (set by code or by a recipe only).
- ``positional=True`` makes the field a positional argument (named by the field) instead of a flag.
- ``deprecated=`` names old spellings of a renamed flag: they still parse onto the same field,
  are left out of ``--help`` and print one line to stderr once per process (``rmeval: --output-dir
  is now --out (the old name still works)``), so every command renames a flag the same way.
  :class:`AppendEach` is the repeatable ``--set K=V --set K2=V2`` flag, which still reads the old
  form ``--set K=V K2=V2`` with such a line.
- ``recipe_key=`` declares the flag an override of a recipe key (``"model.name_or_path"``, or a
  tuple of keys it sets together): :func:`flag_overrides` maps the flags given onto those keys; a
  mapping flag's key with a ``*`` (``"data_sources.*.path"``) is set once per ``NAME=VALUE`` item.
- The holder says how the held settings appear (``nested``): in an argument ``group`` of the help,
  with a flag ``prefix`` (``--probe-`` + the field's flag), ``only`` some of their fields as flags
  (dotted for deeper ones), some fields' ``options`` replaced (another flag name, help or nargs), and
  ``when``: the held settings are None unless one of those fields' flags is given (``--judge-items``
  turns the judge profile on), and ``defaults``: some fields' defaults in this holder (the flag's
  default, and the value read back when it is not given). ``keys`` limits an embedded block's recipe
  keys to some of its fields.
- A flag that is not given reads back as the field's default: ``parse`` sees only what was typed.
- ``needs=(FLAG, values)`` declares a flag that does something only when another flag of the
  command has one of ``values`` (``--beta`` with ``--scorer dpo_implicit``; ``values`` None: when
  FLAG is given at all, ``--concurrency`` with ``--endpoint``): given otherwise, :func:`from_args`
  refuses it in one line, as it refuses a flag of held settings that are off (``--q`` without
  ``--suitability``). A command without FLAG takes the flag as it is.
- :func:`switch` declares the field that turns a recipe block on (``audit.enabled``): with it
  false, another key of the block given in the recipe or by ``--set`` does nothing, and
  ``rmcore.settings.recipes.build_config`` refuses it (unless the switch itself was turned off by an
  override: the recipe's keys of a block the user turned off are left unused).

Every numeric field (``int``, ``float``, optional or not, lists and mappings of them) declares the
values it takes on the field itself: ``ge``/``gt``/``le``/``lt`` bounds, ``also`` (values allowed
outside them, ``max_steps: -1``) or ``finite=True`` alone (any finite number), given to
:func:`option` for a flag or to :func:`bounded` for a field set by a recipe or by code (a ``Range``
in the field's metadata, readable for any dataclass field). A number must be finite as well: NaN
and inf are refused wherever a range is declared. A field taking one of a few values declares them
the same way, ``choices=`` of either (argparse refuses another on the command line). :func:`check_ranges`
walks a settings object (held settings, lists, mapping values; a None is allowed wherever the type
allows it) and raises :class:`rmcore.errors.ConfigError` with one line naming the flag (``--n-boot``)
or the recipe key (``F.training.learning_rate``), the value and the range or the choices;
:func:`from_args` applies it to every command's settings, :func:`rmcore.settings.recipes.build_config` to
every recipe block and a ``validate()`` to settings built by code, so a bad value stops a command
before any model, data or output folder is touched.

:func:`flag_names` lists what a dataclass generates, which a test compares with each command's
parser: every field has a flag, every flag a field."""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
import os
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, Field
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from rmcore.errors import ConfigError

T = TypeVar("T")

_KEY = "matchrm.option"
_NESTED = "matchrm.nested"
_RANGE = "matchrm.range"
_CHOICES = "matchrm.choices"
_SWITCH = "matchrm.switch"


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric field takes: finite, within the bounds given, or one of ``also``."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    also: tuple[float, ...] = ()  # values allowed outside the bounds (a special meaning: max_steps -1)

    def allows(self, v: float) -> bool:
        if v in self.also:
            return True
        return (math.isfinite(v) and (self.ge is None or v >= self.ge) and (self.gt is None or v > self.gt)
                and (self.le is None or v <= self.le) and (self.lt is None or v < self.lt))

    def describe(self, integer: bool) -> str:
        """``an integer >= 1``, ``a finite number in (0, 1]``, ``an integer >= 1, or -1``."""
        kind = "an integer" if integer else "a finite number"
        lo, lo_v = ("[", self.ge) if self.ge is not None else ("(", self.gt) if self.gt is not None else ("", None)
        hi, hi_v = ("]", self.le) if self.le is not None else (")", self.lt) if self.lt is not None else ("", None)
        if lo and hi:
            text = f"{kind} in {lo}{lo_v:g}, {hi_v:g}{hi}"
        elif lo:
            text = f"{kind} {'>=' if lo == '[' else '>'} {lo_v:g}"
        elif hi:
            text = f"{kind} {'<=' if hi == ']' else '<'} {hi_v:g}"
        else:
            text = kind
        return text + "".join(f", or {a:g}" for a in self.also)


def _range_meta(bounds: dict[str, Any]) -> dict[str, Range]:
    """The metadata of a field declaring ``bounds`` (``finite=True`` alone: any finite number)."""
    if not bounds:
        return {}
    return {_RANGE: Range(**{k: tuple(v) if k == "also" else v for k, v in bounds.items() if k != "finite"})}


def bounded(default: Any = MISSING, *, default_factory: Any = MISSING, metadata: dict[str, Any] | None = None,
            choices: Any = None, **bounds: Any) -> Any:
    """A dataclass field that is not a flag (set by a recipe or by code), with the values it takes:
    a range (``ge``, ``gt``, ``le``, ``lt``, ``also``: see :class:`Range`, or ``finite=True`` alone)
    or ``choices``, as :func:`option` declares them for a flag; ``metadata`` adds to the field's."""
    meta = {**(metadata or {}), **_range_meta(bounds)}
    if choices is not None:  # a function giving them (a registry's names) is read when they are checked
        meta[_CHOICES] = choices if callable(choices) else tuple(choices)
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def switch(default: bool = False) -> Any:
    """The bool field that turns its recipe block on (``audit.enabled``): with it false, the block's
    other keys do nothing, and a recipe or ``--set`` that gives one is refused
    (``rmcore.settings.recipes.build_config``)."""
    return dataclasses.field(default=default, metadata={_SWITCH: True})


def is_switch(f: Field) -> bool:
    return bool(f.metadata.get(_SWITCH))


def field_range(f: Field) -> Range | None:
    """The range field ``f`` declares (:func:`option` or :func:`bounded`); None when it declares none."""
    return f.metadata.get(_RANGE)


def field_choices(f: Field) -> tuple[Any, ...] | None:
    """The values field ``f`` is one of (``choices`` of :func:`option` or :func:`bounded`); None: any."""
    choices = f.metadata.get(_CHOICES)
    return tuple(choices()) if callable(choices) else choices


@dataclasses.dataclass(frozen=True)
class Option:
    """How a settings field appears on the command line (see the module docstring)."""

    help: str
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    # the values it takes, or a function giving them (a registry's names: read when a parser is built)
    choices: tuple[Any, ...] | Callable[[], Iterable[Any]] | None = None
    nargs: str | int | None = None
    parse: Callable[[Any], Any] | None = None
    required: bool = False
    action: str | type[argparse.Action] | None = None  # an argparse action other than the one the type implies
    positional: bool = False
    recipe_keys: tuple[str, ...] = ()  # the recipe keys this flag overrides (flag_overrides)
    deprecated: tuple[str, ...] = ()  # old spellings: hidden, warn once, same field
    needs: tuple[str, tuple[Any, ...] | None] | None = None  # (flag, its values) this flag has an effect with


def option(default: Any = MISSING, *, help: str, default_factory: Any = MISSING, flag: str | None = None,
           aliases: tuple[str, ...] = (), metavar: str | None = None, choices: Any = None,
           nargs: str | int | None = None, parse: Callable[[Any], Any] | None = None, required: bool = False,
           action: str | type[argparse.Action] | None = None, positional: bool = False,
           recipe_key: str | tuple[str, ...] | None = None, deprecated: tuple[str, ...] = (),
           needs: tuple[str, Any] | None = None, **bounds: Any) -> Any:
    """A dataclass field that is also a command-line flag (the field's doc is its ``help``); a
    numeric one declares its range in ``bounds`` (``ge=1``; see :class:`Range`); ``needs``: the
    flag and values it has an effect with (see the module docstring)."""
    keys = (recipe_key,) if isinstance(recipe_key, str) else tuple(recipe_key or ())
    if needs is not None:
        values = needs[1]
        needs = (needs[0], None if values is None else (values,) if isinstance(values, str) else tuple(values))
    meta = {_KEY: Option(help=help, flag=flag, aliases=tuple(aliases), metavar=metavar,
                         choices=choices if callable(choices) or choices is None else tuple(choices), nargs=nargs,
                         parse=parse,
                         required=required, action=action, positional=positional, recipe_keys=keys,
                         deprecated=tuple(deprecated), needs=needs)}
    return bounded(default, default_factory=default_factory, metadata=meta, choices=choices, **bounds)


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
    defaults: tuple[tuple[str, Any], ...] = ()  # (field, its default here)
    cls: type | None = None  # the held class, where the annotation is not resolvable at run time


def nested(default_factory: Callable[[], Any], *, embed: bool = False, flatten: bool = True,
           keys: tuple[str, ...] | None = None, group: str | None = None, prefix: str = "",
           only: tuple[str, ...] | None = None, when: str | tuple[str, ...] = (),
           options: dict[str, dict[str, Any]] | None = None, defaults: dict[str, Any] | None = None) -> Any:
    """A field holding another settings dataclass: its flags are the command's too (``flatten``),
    and with ``embed`` a recipe gives its keys (or ``keys`` of them) at the parent's level. ``when``:
    the field is None unless one of these fields' flags is given (``default_factory`` is then the
    held class). ``group``, ``prefix``, ``only``, ``options``, ``defaults``: see the module docstring."""
    when = (when,) if isinstance(when, str) else tuple(when)
    meta = Nesting(embed=embed, flatten=flatten, keys=tuple(keys) if keys is not None else None, group=group,
                   prefix=prefix, only=tuple(only) if only is not None else None, when=when,
                   options=tuple((k, tuple(v.items())) for k, v in (options or {}).items()),
                   defaults=tuple((defaults or {}).items()),
                   cls=default_factory if isinstance(default_factory, type) else None)
    if when:
        return dataclasses.field(default=None, metadata={_NESTED: meta})
    if defaults:
        made = default_factory
        return dataclasses.field(default_factory=lambda: made(**defaults), metadata={_NESTED: meta})
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

    @property
    def name(self) -> str:
        """The flag's first spelling."""
        return self.opt.flag or "--" + self.field.name.replace("_", "-")


def _flags(cls: type, *, dest: str = "", only: tuple[str, ...] | None = None, prefix: str = "",
           options: dict[str, dict[str, Any]] | None = None, optional: bool = False,
           group: str | None = None, exclude: tuple[str, ...] = (),
           defaults: dict[str, Any] | None = None) -> Iterator[_Flag]:
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
                              group=n.group or group, defaults=dict(n.defaults))
            continue
        opt: Option | None = f.metadata.get(_KEY)
        if opt is None:
            continue
        over = dict((options or {}).get(f.name, {}))
        if prefix and "flag" not in over:
            over["flag"] = "--" + prefix + (opt.flag or "--" + f.name.replace("_", "-"))[2:]
            over.setdefault("deprecated", tuple("--" + prefix + d[2:] for d in opt.deprecated))
        opt = dataclasses.replace(opt, **over) if over else opt
        # a flag inside an optional block, one parsed, or one that needs another, is None when not
        # given (read back as the default), so that what was typed is known
        here = (defaults or {}).get(f.name, _default(f))
        default = None if optional or opt.parse is not None or opt.needs is not None else here
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


_WARNED: set[str] = set()  # the notices already printed by this process (each is printed once)


def warn_once(parser: argparse.ArgumentParser, notice: str, key: str | None = None) -> None:
    """``notice`` on stderr as one line prefixed by the tool's name (``rmeval: ...``), once per
    process for each ``key`` (default: the notice itself)."""
    import sys

    if (key or notice) not in _WARNED:
        _WARNED.add(key or notice)
        print(f"{parser.prog.split()[0]}: {notice}", file=sys.stderr)


class _OldName(argparse.Action):
    """An old spelling of a renamed flag (``Option.deprecated``): hidden from ``--help``; it says
    once that the flag is renamed, then does what the new spelling does, onto the same field."""

    def __init__(self, option_strings: list[str], dest: str, *, new: argparse.Action, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=new.nargs, const=new.const, default=argparse.SUPPRESS,
                         type=new.type, choices=new.choices, help=argparse.SUPPRESS, metavar=new.metavar)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        warn_once(parser, f"{option_string} is now {self.new.option_strings[0]} (the old name still works)")
        self.new(parser, namespace, values, option_string)


class AppendEach(argparse.Action):
    """A repeatable flag taking one value each time (``--set K=V --set K2=V2``), the values kept in
    order. Several values after one flag (``--set K=V K2=V2``, the old form of some commands) are
    still read, with a one-line notice; ``--help`` shows the one-value form."""

    def __init__(self, option_strings: list[str], dest: str, nargs: str | int | None = "+", **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=nargs, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if len(values) > 1:
            flag = option_string or self.option_strings[0]
            warn_once(parser, f"{flag} {' '.join(values)} is now {' '.join(f'{flag} {v}' for v in values)} "
                              "(the old form still works)", key=f"{flag} several")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *values])


class Parser(argparse.ArgumentParser):
    """The parser of both command lines (``rmtrain``, ``rmeval``) and of their subcommands: a flag
    that does not parse is one line and a pointer to ``--help`` (argparse would print the whole
    usage first, 12 to 37 lines), exit code 2 as argparse's."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.HelpFormatter):
    """``--help`` and usage lines: an :class:`AppendEach` flag shown with its one value."""

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        if isinstance(action, AppendEach):
            return self._metavar_formatter(action, default_metavar)(1)[0]
        return super()._format_args(action, default_metavar)


def add_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *, prefix: str = "",
                defaults: dict[str, Any] | None = None, exclude: tuple[str, ...] = ()) -> None:
    """Add the flags of settings dataclass ``cls`` to ``p``; ``defaults`` replace field defaults (a
    command whose default differs from the library's; nested as the fields are), ``exclude`` leaves
    fields out by name."""
    defaults = defaults or {}
    if isinstance(p, argparse.ArgumentParser) and p.formatter_class is argparse.HelpFormatter:
        p.formatter_class = _Formatter
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
                kw["choices"] = list(opt.choices() if callable(opt.choices) else opt.choices)
                if opt.metavar is None:
                    kw.pop("metavar")
            if opt.parse is None and t in (int, float, str):
                kw["type"] = t
            if opt.nargs is not None:
                kw["nargs"] = opt.nargs
            elif many and opt.parse is None:  # a parsed flag is one word unless its nargs says otherwise
                kw["nargs"] = "+"
        group = _group(p, flag.group)
        action = group.add_argument(*names, **kw)
        if opt.deprecated:
            if opt.required:  # argparse would still ask for the new name when only the old one is given
                raise ValueError(f"{names[0]}: a required flag cannot keep an old name")
            group.add_argument(*opt.deprecated, dest=flag.dest, action=_OldName, new=action)


def from_args(cls: type[T], args: argparse.Namespace, *, prefix: str = "", only: tuple[str, ...] | None = None,
              **given: Any) -> T:
    """The settings ``cls`` from parsed flags (each ``parse`` applied to a flag given), every
    numeric value checked against its field's range (:func:`check_ranges`); ``given`` sets fields
    that are not flags of this command (or overrides them)."""
    declared = list(_flags(cls, dest=prefix, only=only))
    flags = {f.dest: f.name for f in declared}
    settings = _read(cls, args, prefix=prefix, only=only, flags=flags, **given)
    check_ranges(settings)  # a value out of range first, then a flag that would do nothing
    _refuse_unneeded(declared, args)
    return settings


def _read(cls: type[T], args: argparse.Namespace, *, prefix: str = "", only: tuple[str, ...] | None = None,
          flags: dict[str, str], defaults: dict[str, Any] | None = None, **given: Any) -> T:
    """``from_args`` without the range check; ``flags``: dest -> flag name of every flag of ``cls``;
    ``defaults``: the holder's defaults of some fields (``nested``), kept unless a flag gives a value."""
    kwargs: dict[str, Any] = dict(defaults or {})
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
                _refuse_idle(args, inner, n.when, flags)
                continue  # none of the flags that turn it on: the field's default (None)
            kwargs[f.name] = _read(sub, args, prefix=inner, only=_narrow(n.only, deeper), flags=flags,
                                   defaults=dict(n.defaults))
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


def _refuse_idle(args: argparse.Namespace, inner: str, when: tuple[str, ...], flags: dict[str, str]) -> None:
    """A flag of held settings that are off (none of the flags that turn them on given) would be
    silently ignored (``--q`` without ``--suitability``): a one-line ConfigError naming it and them.
    Such flags read back None when not given (``_flags``: optional blocks have no defaults)."""
    given = [d for d in vars(args) if d.startswith(inner) and d[len(inner):] not in when
             and getattr(args, d) is not None and d in flags]
    if given:
        on = " or ".join(flags[inner + w] for w in when)
        raise ConfigError(f"{flags[given[0]]} has no effect without {on}, which turns its settings on")


def _refuse_unneeded(declared: list[_Flag], args: argparse.Namespace) -> None:
    """A flag given whose ``needs`` are not met would do nothing (``--beta`` with the default
    scorer): a one-line ConfigError naming it, the flag it needs and the value that flag has."""
    by_name = {f.name: f for f in declared}
    for f in declared:
        if f.opt.needs is None or getattr(args, f.dest, None) is None:
            continue
        other, values = f.opt.needs
        if other not in by_name:
            continue  # this command does not have the flag: nothing to check it against
        value = getattr(args, by_name[other].dest, None)
        if value is None:  # not given: its field's default
            value = _default(by_name[other].field)
        if values is None and value is None:
            raise ConfigError(f"{f.name} has an effect only with {other}, which is not given")
        if values is not None and value not in values:
            raise ConfigError(f"{f.name} has an effect only with {other} {' or '.join(map(str, values))}; "
                              f"{other} is {value}")


def _numbers(value: Any, item: bool = False) -> list[float]:
    """The numbers a field's value holds (itself, a list's items, a mapping's values)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, numbers.Real):  # numpy's numbers too
        return [value]
    if isinstance(value, str) and item:  # YAML 1.1 reads 1e-5 in a list as text (a scalar is coerced)
        try:
            return [float(value)]
        except ValueError:
            return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [x for v in items for x in _numbers(v, True)]


def _declared(obj: Any, dest: str = "", key: str = "") -> Iterator[tuple[str, str, Field, Any, Any]]:
    """(dest, recipe key, field, annotation, value) of every field of ``obj`` and of the settings it
    holds that declares a range or choices and is not None; an embedded block's keys are its holder's."""
    for f, hint in _fields(type(obj)):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _declared(value, f"{dest}{f.name}.", key if is_embedded(f) else f"{key}{f.name}.")
        elif (field_range(f) is not None or field_choices(f) is not None) and value is not None:
            yield dest + f.name, key + f.name, f, hint, value


def number_type(hint: Any) -> type | None:
    """``int`` or ``float`` when a field of this annotation holds numbers (optional, a list or a
    mapping of them: such a field declares its range), else None."""
    t, _ = _scalar(hint)
    if typing.get_origin(t) is dict:
        t, _ = _scalar((typing.get_args(t) or (None, None))[-1])
    return t if t in (int, float) else None


def _chosen(value: Any, choices: tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``choices``; YAML reads an unquoted ``true``/``false`` as a bool,
    which is the text choice of that name."""
    return value in choices or isinstance(value, bool) and str(value).lower() in choices


def _not_chosen(value: Any, choices: tuple[Any, ...]) -> Any:
    """The first item of ``value`` (itself, a list's items) that is not one of ``choices``; None if all are."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return next((v for v in items if not _chosen(v, choices)), None)


def check_ranges(settings: Any, *, where: str | None = None) -> None:
    """Raise :class:`ConfigError` (one line) for a number of ``settings`` outside its field's range
    or a value that is not one of its field's choices, naming the recipe key (``where.key``) when
    ``where`` is given, else the flag of a command's settings (a field that is not a flag by its
    dotted path; a flag is reported first)."""
    flags = {} if where is not None else {f.dest: f.name for f in _flags(type(settings))}
    found: list[tuple[bool, ConfigError]] = []
    for dest, key, f, hint, value in _declared(settings):
        name = f"{where}.{key}" if where is not None else flags.get(dest, dest)
        choices = field_choices(f)
        if choices is not None and (bad := _not_chosen(value, choices)) is not None:
            found.append((dest in flags, ConfigError(f"{name} must be one of {', '.join(map(str, choices))}, "
                                                     f"got '{bad}'")))
        rng = field_range(f)
        bad = None if rng is None else next((v for v in _numbers(value) if not rng.allows(v)), None)
        if bad is not None:
            shown = f"{bad} (in {value})" if isinstance(value, (list, tuple, dict)) else bad
            found.append((dest in flags, ConfigError.at(name, f"{shown} is out of range; allowed: "
                                                              f"{rng.describe(number_type(hint) is int)}")))
    if found:
        raise max(found, key=lambda x: x[0])[1]  # max: the first flag, else the first


def flag_ranges(cls: type) -> dict[str, tuple[Range, type]]:
    """{flag: (its range, ``int`` or ``float``)} for every flag of ``cls`` that declares a range."""
    return {f.name: (rng, number_type(f.hint) or float) for f in _flags(cls) if (rng := field_range(f.field))}


def flag_names(cls: type, *, exclude: tuple[str, ...] = ()) -> set[str]:
    """Every flag (first spelling) that :func:`add_options` generates for ``cls`` (positional
    arguments are not flags: see :func:`option_dests`)."""
    return {flag.name for flag in _flags(cls, exclude=exclude) if not flag.opt.positional}


def comma_list(text: str) -> list[str]:
    """A comma-separated flag value (``ridge,mlp``) as a list, blanks dropped: a ``parse`` of ``option``."""
    return [t.strip() for t in text.split(",") if t.strip()]


def key_values(flag: str) -> Callable[[list[str]], dict[str, str]]:
    """The ``parse`` of a repeatable ``KEY=VALUE`` flag (``--sbatch constraint=h100``): the pairs as a
    mapping, a later key replacing an earlier one; an item without ``=`` is a one-line ConfigError."""
    def parse(items: list[str] | str) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in [items] if isinstance(items, str) else items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{flag}: {item!r} must look like KEY=VALUE")
            out[key.strip()] = value.strip()
        return out

    return parse


def output_folder(flag: str) -> Callable[[str], str]:
    """The ``parse`` of a flag naming an output folder (``--out``): a path that is, or lies under, an
    existing file is a one-line ConfigError naming the flag, read with the other flags, before
    anything is loaded or written (mkdir would fail later with a bare ``[Errno 17] File exists``)."""
    def check(value: str) -> str:
        path = Path(os.path.expanduser(value))
        for part in (path, *path.parents):
            if part.exists():
                if not part.is_dir():
                    raise ConfigError(f"{flag}: {value if part == path else part} is a file, not a folder")
                break
        return value

    return check


def option_dests(cls: type, *, prefix: str = "") -> set[str]:
    """The ``dest`` of every argument (flag or positional) :func:`add_options` generates for ``cls``."""
    return {flag.dest for flag in _flags(cls, dest=prefix)}


def flag_overrides(settings: Any) -> dict[str, Any]:
    """The recipe keys that the flags of ``settings`` given on the command line override (fields
    declared with ``recipe_key``, as their holders declare them), with their values; a flag left at
    None overrides nothing. A mapping flag whose key holds a ``*`` (``data_sources.*.path``) sets
    that key once per item, ``*`` the item's name."""
    out: dict[str, Any] = {}
    for flag in _flags(type(settings)):
        value: Any = settings
        for part in flag.dest.split("."):
            value = getattr(value, part, None)
        if value is None:
            continue
        for key in flag.opt.recipe_keys:
            if "*" in key:
                out.update({key.replace("*", str(k)): v for k, v in value.items()})
            else:
                out[key] = value
    return out


def parser_dests(p: argparse.ArgumentParser) -> set[str]:
    """The ``dest`` of every argument of a parser (flags and positionals), ``--help`` left out."""
    return {a.dest for a in p._actions if a.dest != "help"}


def parser_flags(p: argparse.ArgumentParser) -> set[str]:
    """Every long flag of a parser (its first spelling), ``--help`` and the hidden old spellings
    (``Option.deprecated``) left out."""
    return {a.option_strings[0] for a in p._actions
            if a.option_strings and a.option_strings[0] != "-h" and not isinstance(a, _OldName)}


def renamed_flags(p: argparse.ArgumentParser) -> dict[str, str]:
    """The hidden old spellings of a parser's flags -> the flag each is now (``Option.deprecated``)."""
    return {old: a.new.option_strings[0] for a in p._actions if isinstance(a, _OldName) for old in a.option_strings}
