"""rmcore.lazy: a package's names load their module on first use, once, and only the names listed."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``lazypkg`` whose submodule ``heavy`` counts its own imports in ``lazypkg.loads``."""
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from rmcore.lazy import lazy_exports\n"
        "loads = []\n"
        "__all__, __getattr__, __dir__ = lazy_exports(__name__, {'heavy': ('b', 'a'), 'light': ('c',)})\n")
    (pkg / "heavy.py").write_text("import lazypkg\nlazypkg.loads.append('heavy')\na, b = 1, 2\n")
    (pkg / "light.py").write_text("c = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("lazypkg")
    for name in [m for m in sys.modules if m.split(".")[0] == "lazypkg"]:
        del sys.modules[name]


def test_a_name_loads_its_module_on_first_use_only(package):
    assert "lazypkg.heavy" not in sys.modules and package.loads == []
    assert package.__all__ == ["a", "b", "c"]
    assert (package.a, package.b) == (1, 2)
    assert package.loads == ["heavy"] and "lazypkg.light" not in sys.modules
    from lazypkg import b

    assert b == 2 and package.loads == ["heavy"]
    assert "a" in vars(package)  # kept in the package: __getattr__ is not asked again


def test_an_unlisted_name_is_an_attribute_error_and_dir_lists_the_names(package):
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'd'"):
        getattr(package, "d")  # noqa: B009
    with pytest.raises(ImportError):
        from lazypkg import d  # noqa: F401
    assert {"a", "b", "c", "loads"} <= set(dir(package))
    assert package.loads == []
