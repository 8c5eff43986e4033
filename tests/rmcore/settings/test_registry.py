"""rmcore.settings.registry: the one helper behind the arms, scorers, loaders, conditions and perturbations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmcore.errors import ConfigError
from rmcore.settings.registry import Registry, did_you_mean


def _colours() -> Registry[int]:
    return Registry("colour", {"red": 1, "green": 2})


def test_register_directly_and_as_a_decorator_keeps_registration_order():
    reg = _colours()
    assert reg.register("blue", 3) == 3

    @reg.register("amber")
    def amber() -> int:
        return 4

    assert reg.names() == ["red", "green", "blue", "amber"] == list(reg)
    assert reg.lookup("amber") is amber and reg["blue"] == 3
    assert "red" in reg and "pink" not in reg and len(reg) == 4


def test_a_duplicate_is_an_error_unless_replace():
    reg = _colours()
    with pytest.raises(ConfigError, match="colour 'red' is already registered"):
        reg.register("red", 9)
    assert reg.lookup("red") == 1
    reg.register("red", 9, replace=True)
    assert reg.lookup("red") == 9 and reg.names() == ["red", "green"]  # replacing keeps the place


def test_an_unknown_name_lists_the_known_ones_and_suggests_the_closest():
    reg = _colours()
    with pytest.raises(ConfigError, match=r"^unknown colour 'gren'; known: red, green \(did you mean 'green'\?\)$"):
        reg.lookup("gren")
    with pytest.raises(ConfigError, match=r"^unknown colour 'purple'; known: red, green$"):  # nothing close
        reg.lookup("purple")


def test_the_message_keeps_each_registry_s_wording():
    reg = Registry("arm", {"zeta": 1, "alpha": 2}, message="unknown arm '{name}'; known arms: {known}",
                   sort_known=True)
    assert str(reg.unknown("alpah")) == "unknown arm 'alpah'; known arms: alpha, zeta (did you mean 'alpha'?)"
    assert reg.names() == ["zeta", "alpha"]  # sorting is for the message only
    assert str(Registry("set", message="unknown set {name!r}; known: {known}").unknown(None)) == \
        "unknown set None; known: "


def test_did_you_mean():
    assert did_you_mean("bradly_terry", ["regression", "bradley_terry"]) == " (did you mean 'bradley_terry'?)"
    assert did_you_mean("xyz", ["regression"]) == ""
    assert did_you_mean(None, ["regression"]) == ""


def test_it_is_a_mutable_mapping_for_code_written_against_dicts(monkeypatch):
    reg = _colours()
    monkeypatch.setitem(reg, "pink", 5)
    assert reg.lookup("pink") == 5 and dict(reg) == {"red": 1, "green": 2, "pink": 5}
    monkeypatch.undo()
    assert "pink" not in reg
    assert reg.pop("green") == 2 and reg.names() == ["red"]


def test_importing_it_loads_nothing_heavy():
    root = Path(__file__).resolve().parents[3]
    code = ("import sys, rmcore.settings.registry; "
            "print(sorted(m for m in ('torch', 'numpy', 'pandas') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"
