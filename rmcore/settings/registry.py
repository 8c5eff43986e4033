"""One registry helper for every extension point: name -> object, in registration order.

The six registries (arms, scorers, reward-model loaders, data loaders, conditions, controlled
perturbations) are each a ``Registry``; see docs/extending.md for how to add to them::

    ARMS: Registry[type[Arm]] = Registry("arm")

    @ARMS.register("my_arm")            # or ARMS.register("my_arm", MyArm)
    class MyArm(Arm): ...

    ARMS.lookup("my_ram")  # ConfigError: unknown arm 'my_ram'; known: my_arm (did you mean 'my_arm'?)
    ARMS.names()           # ['my_arm']: for --help and argparse choices

A Registry is a mutable mapping so that code and tests written against the plain dicts it replaced
keep working (``name in REG``, ``REG[name]``, ``sorted(REG)``, ``monkeypatch.setitem``);
``register`` is the checked way in (a second registration of a name is an error unless
``replace=True``), item assignment stays dict-like. Pure Python: importing it loads nothing heavy.
"""

from __future__ import annotations

import difflib
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


class Registry(MutableMapping[str, T], Generic[T]):
    """Named objects of one ``kind`` ("arm", "scorer", ...), kept in registration order; ``items``
    are the built-ins, registered first.

    ``message`` is the unknown-name error (fields ``kind``, ``name``, ``known``); each registry keeps
    the wording its users already see. ``sort_known`` lists the known names sorted in that message
    (``names()`` is always registration order)."""

    def __init__(self, kind: str, items: Mapping[str, T] | None = None, *,
                 message: str = "unknown {kind} '{name}'; known: {known}", sort_known: bool = False) -> None:
        self.kind = kind
        self.message = message
        self.sort_known = sort_known
        self._items: dict[str, T] = {}
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
        if name in self._items and not replace:
            # a silent overwrite would swap a built-in for a plugin's object by accident
            raise ConfigError(f"{self.kind} '{name}' is already registered (pass replace=True to replace it)")
        self._items[name] = obj
        return obj

    def lookup(self, name: str) -> T:
        """The object registered as ``name``; an unknown name raises ``unknown(name)``."""
        try:
            return self._items[name]
        except KeyError:
            raise self.unknown(name) from None

    def unknown(self, name: Any) -> ConfigError:
        """The error for a name not registered: the registry's message, the known names, and the
        closest one when a typo is likely."""
        known = sorted(self._items) if self.sort_known else self.names()
        msg = self.message.format(kind=self.kind, name=name, known=", ".join(known))
        return ConfigError(msg + did_you_mean(name, known))

    def names(self) -> list[str]:
        """Registered names in registration order (for ``--help`` and argparse ``choices``)."""
        return list(self._items)

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __setitem__(self, name: str, obj: T) -> None:
        self._items[name] = obj

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
