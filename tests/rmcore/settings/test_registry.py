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


def _plugin_dist(root: Path, group: str, entries: dict[str, str], modules: dict[str, str]) -> Path:
    """A distribution installed in ``root`` as pip installs one (a .dist-info with entry_points.txt):
    what ``importlib.metadata`` reads for an installed plugin."""
    info = root / "colour_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: colour-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    for name, code in modules.items():
        (root / f"{name}.py").write_text(code)
    return root


def test_a_deferred_entry_is_listed_at_once_and_imported_on_its_first_lookup(tmp_path, monkeypatch):
    (tmp_path / "deferred_colours.py").write_text("VIOLET = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = _colours()
    reg.defer("violet", "deferred_colours:VIOLET")
    assert reg.names() == ["red", "green", "violet"] and "violet" in reg
    assert "deferred_colours" not in sys.modules
    assert reg.lookup("violet") == 7 and "deferred_colours" in sys.modules
    assert dict(reg) == {"red": 1, "green": 2, "violet": 7}
    with pytest.raises(ConfigError, match="colour 'violet' is already registered"):
        reg.register("violet", 8)


def test_the_module_s_own_registration_fills_its_deferred_entry(tmp_path, monkeypatch):
    reg = _colours()
    (tmp_path / "self_registering.py").write_text(
        "import builtins\nreg = builtins._test_registry\n\n@reg.register('teal')\ndef teal():\n    return 5\n\n"
        "@reg.register('cyan')\ndef cyan():\n    return 6\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("builtins._test_registry", reg, raising=False)
    reg.defer("teal", "self_registering:teal")
    reg.defer("cyan", "self_registering:cyan")
    assert reg.lookup("teal")() == 5 and reg.lookup("cyan")() == 6  # one import registered both
    assert reg.names() == ["red", "green", "teal", "cyan"]


def test_plugins_are_the_entry_points_of_the_registry_s_group(tmp_path, monkeypatch):
    group = "matchrm.test_colours"
    _plugin_dist(tmp_path, group, {"magenta": "colour_plugin:MAGENTA", "broken": "colour_plugin_broken:X"},
                 {"colour_plugin": "MAGENTA = 11\n", "colour_plugin_broken": "raise RuntimeError('no GPU here')\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("colour", {"red": 1}, group=group)
    assert "colour_plugin" not in sys.modules
    assert reg.names() == ["red", "broken", "magenta"]  # after the built-ins, nothing imported
    assert "colour_plugin" not in sys.modules
    assert reg.lookup("magenta") == 11
    with pytest.raises(ConfigError, match=r"^plugin colour 'broken' does not load \(entry point 'broken = "
                                          r"colour_plugin_broken:X' of group matchrm.test_colours \(colour-plugin\)\): "
                                          r"RuntimeError: no GPU here$"):
        reg.lookup("broken")
    with pytest.raises(ConfigError, match="unknown colour 'magneta'; known: red, broken, magenta"):
        reg.lookup("magneta")
    # a plugin cannot take a built-in's name
    clash = Registry("colour", {"magenta": 1}, group=group)
    with pytest.raises(ConfigError, match="plugin colour 'magenta': already registered"):
        clash.names()
    # adopt: what a registry makes of a loaded object
    doubled = Registry("colour", group=group, adopt=lambda name, obj: obj * 2)
    assert doubled.lookup("magenta") == 22
