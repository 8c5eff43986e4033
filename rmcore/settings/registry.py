"""One registry helper for every extension point: name -> object, in registration order.

Every name a user can give (an arm, a scorer, a backend, a perturbation code, ...) is looked up in a
``Registry``; docs/extending.md lists them and how to add to each::

    ARMS: Registry[type[Arm]] = Registry("arm", group="matchrm.arms")

    @ARMS.register("my_arm")            # or ARMS.register("my_arm", MyArm)
    class MyArm(Arm): ...

    ARMS.lookup("my_ram")  # ConfigError: unknown arm 'my_ram'; known: my_arm (did you mean 'my_arm'?)
    ARMS.names()           # ['my_arm']: for --help and argparse choices

A Registry is a mutable mapping so that code and tests written against the plain dicts it replaced
keep working (``name in REG``, ``REG[name]``, ``sorted(REG)``, ``monkeypatch.setitem``);
``register`` is the checked way in (a second registration of a name is an error unless
``replace=True``), item assignment stays dict-like. Pure Python: importing it loads nothing heavy.

**Deferred entries.** ``defer(name, "module:attr")`` names an object without importing it: the name
is listed (``names``, ``in``, ``--help``) and the module is imported on the first lookup of the name.
A built-in whose module is heavy (an arm imports torch) is declared so, and its module's own
``register`` of the same object, when imported, fills the entry in.

**Plugins.** A registry with an entry-point ``group`` (``matchrm.arms``, ``matchrm.scorers``, ...)
lists every entry point of that group of the installed distributions as a deferred entry, on its
first use (not at import): ``[project.entry-points."matchrm.arms"] my_arm = "my_pkg.arms:MyArm"``
in a plugin's pyproject.toml makes ``my_arm`` a name of every installed command, its module
imported only when ``my_arm`` is looked up (so ``--help`` stays light). A plugin's name that is
already registered is an error, as a second registration is; ``adopt(name, obj)`` turns what an
entry point loads into the registry's entry (a registry whose entries are not the objects
themselves, or that checks them).
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, Generic, TypeVar, overload

from rmcore.errors import ConfigError

T = TypeVar("T")


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to ``name``, or "" when none is close."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_SCAN: tuple[tuple[str, ...], Any] | None = None  # (sys.path it was read from, every entry point)


def plugin_entry_points(group: str) -> list[Any]:
    """The entry points of ``group`` in the distributions on ``sys.path`` (read once per ``sys.path``)."""
    global _SCAN
    from importlib.metadata import entry_points

    key = tuple(sys.path)
    if _SCAN is None or _SCAN[0] != key:
        _SCAN = (key, entry_points())
    return sorted(_SCAN[1].select(group=group), key=lambda ep: ep.name)


class Deferred:
    """An entry not imported yet: ``module:attr``; ``origin`` says where a plugin's came from ("" for
    a built-in)."""

    __slots__ = ("ref", "origin", "loading")

    def __init__(self, ref: str, origin: str = "") -> None:
        if ":" not in ref:
            raise ValueError(f"a deferred entry is 'module:attr', got {ref!r}")
        self.ref, self.origin, self.loading = ref, origin, False

    def refers_to(self, obj: Any) -> bool:
        """Whether ``obj`` is the object this entry names (its module and qualified name)."""
        return f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}" == self.ref

    def load(self) -> Any:
        module, _, attr = self.ref.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def __repr__(self) -> str:
        return f"Deferred({self.ref!r})"


class Registry(MutableMapping[str, T], Generic[T]):
    """Named objects of one ``kind`` ("arm", "scorer", ...), kept in registration order; ``items``
    are the built-ins, registered first.

    ``message`` is the unknown-name error (fields ``kind``, ``name``, ``known``); each registry keeps
    the wording its users already see. ``sort_known`` lists the known names sorted in that message
    (``names()`` is always registration order). ``group``: the entry-point group its plugins come
    from; ``adopt``: how an object loaded from a deferred entry becomes the entry (default: as is)."""

    def __init__(self, kind: str, items: Mapping[str, T] | None = None, *,
                 message: str = "unknown {kind} '{name}'; known: {known}", sort_known: bool = False,
                 group: str | None = None, adopt: Callable[[str, Any], T] | None = None) -> None:
        self.kind = kind
        self.message = message
        self.sort_known = sort_known
        self.group = group
        self._adopt = adopt
        self._found = group is None  # plugins are listed on first use
        self._items: dict[str, Any] = {}
        for name, obj in (items or {}).items():
            self.register(name, obj)

    @overload
    def register(self, name: str, obj: None = None, *, replace: bool = False) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, obj: T, *, replace: bool = False) -> T: ...

    def register(self, name: str, obj: T | None = None, *, replace: bool = False) -> T | Callable[[T], T]:
        """Add ``obj`` under ``name`` and return it; without ``obj``, a decorator that does so."""
        if obj is None:
            def deco(o: T) -> T:
                return self.register(name, o, replace=replace)
            return deco
        current = self._items.get(name)
        fills = isinstance(current, Deferred) and (current.loading or current.refers_to(obj))
        if name in self._items and not (replace or fills):
            # a silent overwrite would swap a built-in for a plugin's object by accident
            raise ConfigError(f"{self.kind} '{name}' is already registered (pass replace=True to replace it)")
        self._items[name] = obj
        return obj

    def defer(self, name: str, ref: str) -> None:
        """Register ``name`` as ``"module:attr"``, imported on its first lookup (see the module doc)."""
        if name in self._items:
            raise ConfigError(f"{self.kind} '{name}' is already registered (pass replace=True to replace it)")
        self._items[name] = Deferred(ref)

    def _discover(self) -> None:
        """List the plugins of ``group`` (once): each a deferred entry after the built-ins."""
        if self._found:
            return
        self._found = True
        for ep in plugin_entry_points(str(self.group)):
            dist = getattr(getattr(ep, "dist", None), "name", None)
            origin = f"entry point '{ep.name} = {ep.value}' of group {self.group}" + (f" ({dist})" if dist else "")
            if ep.name in self._items:
                raise ConfigError(f"plugin {self.kind} '{ep.name}': already registered; {origin} gives it again")
            self._items[ep.name] = Deferred(ep.value, origin)

    def _resolve(self, name: str) -> T:
        entry = self._items[name]
        if not isinstance(entry, Deferred):
            return entry
        entry.loading = True  # the module's own registration of ``name`` fills the entry in
        try:
            obj = entry.load()
        except Exception as e:
            if not entry.origin:  # a built-in that does not import is a bug: its traceback is wanted
                raise
            raise ConfigError(f"plugin {self.kind} '{name}' does not load ({entry.origin}): "
                              f"{type(e).__name__}: {e}") from None
        finally:
            entry.loading = False
        if self._items.get(name) is entry:
            self._items[name] = self._adopt(name, obj) if self._adopt is not None else obj
        return self._items[name]

    def lookup(self, name: str) -> T:
        """The object registered as ``name``; an unknown name raises ``unknown(name)``."""
        self._discover()
        if name not in self._items:
            raise self.unknown(name)
        return self._resolve(name)

    def loaded(self) -> dict[str, T]:
        """The entries imported so far, in registration order (nothing deferred is imported)."""
        return {name: obj for name, obj in self._items.items() if not isinstance(obj, Deferred)}

    def unknown(self, name: Any) -> ConfigError:
        """The error for a name not registered: the registry's message, the known names, and the
        closest one when a typo is likely."""
        known = sorted(self.names()) if self.sort_known else self.names()
        msg = self.message.format(kind=self.kind, name=name, known=", ".join(known))
        return ConfigError(msg + did_you_mean(name, known))

    def names(self) -> list[str]:
        """Registered names in registration order (for ``--help`` and argparse ``choices``); nothing
        deferred is imported."""
        self._discover()
        return list(self._items)

    def __getitem__(self, name: str) -> T:
        self._discover()
        if name not in self._items:
            raise KeyError(name)
        return self._resolve(name)

    def __setitem__(self, name: str, obj: T) -> None:
        self._items[name] = obj

    def __delitem__(self, name: str) -> None:
        self._discover()
        del self._items[name]

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._discover()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._discover()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
