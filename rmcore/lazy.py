"""Package names that load their module on first use (PEP 562), so that importing a light module of
a package (its settings, say) does not import the heavy ones beside it.

``__all__, __getattr__, __dir__ = lazy_exports(__name__, {"bootstrap": ("prompt_bootstrap", ...)})``
in a package's ``__init__``: ``package.prompt_bootstrap`` imports ``package.bootstrap`` then, and
the value is kept in the package's namespace, so the module-level ``__getattr__`` runs once per name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Iterable[str]]
                 ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """(``__all__``, ``__getattr__``, ``__dir__``) of ``package``, whose submodule ``m`` exports the
    names ``modules[m]``; a name not listed is an ``AttributeError``, as for any module."""
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(home))

    return sorted(home), __getattr__, __dir__
