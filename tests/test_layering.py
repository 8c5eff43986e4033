"""The package graph is a straight line, rmcore <- rmeval <- rmtrain, and no module imports
itself back through others, nor any folder inside a package (``rmeval/scoring/``, ``rmtrain/arms/``;
a loose module counts as its own folder) through a module outside it. Every import counts, lazy ones inside
functions included, so the check reads the source (an AST walk) rather than sys.modules."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each package may import only the packages before it.
LAYERS = ("rmcore", "rmeval", "rmtrain")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, mod: str | None = None) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    mod = mod or _module(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a name that is a symbol, not a module, maps to
    the module it comes from)."""
    files = {_module(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}
    graph = {}
    for mod, path in files.items():
        deps = set()
        for name in _imports(path, mod):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != mod:
                deps.add(name)
        graph[mod] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package(mod: str) -> str:
    return mod.split(".", 1)[0]


def test_each_package_imports_only_the_packages_below_it():
    bad = []
    for mod, deps in _graph().items():
        allowed = LAYERS[: LAYERS.index(_package(mod)) + 1]
        bad += [f"{mod} imports {d}" for d in sorted(deps) if _package(d) not in allowed]
    assert not bad, "\n".join(bad)


def test_no_import_circle():
    """A package's __init__ counts as a module: a submodule that imports its own package, whose
    __init__ imports that submodule, is a circle."""
    assert _cycles(_graph()) == []


def _folder(mod: str, is_dir=lambda parts: (ROOT / parts[0] / parts[1]).is_dir()) -> str:
    """The folder a module lies in, one level inside its package (``rmeval.scoring.run`` ->
    ``rmeval.scoring``); a module loose in the package is its own folder."""
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and is_dir(parts) else mod


def _folder_graph(graph: dict[str, set[str]], folder=_folder) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        out.setdefault(folder(mod), set()).update(folder(d) for d in deps if folder(d) != folder(mod))
    return out


def test_no_import_circle_between_folders():
    """A module of a folder that imports a module outside it which imports the folder back is a
    circle at folder level even where no module-level circle exists."""
    assert _cycles(_folder_graph(_graph())) == []


def test_the_folder_check_sees_a_module_that_imports_its_folder_back():
    """The old case: ``rmeval/scoring/judge.py`` imported the loose ``rmeval/scoring_run.py``, which
    imports ``rmeval/scoring/base.py``: no module circle, a folder circle."""
    graph = {"rmeval.scoring.judge": {"rmeval.scoring_run"}, "rmeval.scoring_run": {"rmeval.scoring.base"},
             "rmeval.scoring.base": set()}
    def folder(m: str) -> str:
        return _folder(m, is_dir=lambda parts: parts[1] == "scoring")
    assert _cycles(graph) == []
    assert _cycles(_folder_graph(graph, folder)) == [["rmeval.scoring", "rmeval.scoring_run"]]


# Each package's rooms (its folders; a loose module is a room of its own) in layer order: a room
# imports only the rooms before it. docs/architecture.md's tables list them in this order.
ROOMS = {
    "rmcore": ("errors", "lazy", "io", "console", "settings", "data", "models", "runtime"),
    "rmeval": ("backends", "conditions", "tables", "tracking", "stats", "perturbations", "scoring", "judges",
               "suitability", "experiments", "audit", "reproduce", "cli"),
}


def _back_arrows(folders: dict[str, set[str]], package: str, order: tuple[str, ...]) -> tuple[int, list[str]]:
    """(the arrows between ``package``'s rooms, those among them that point at a later room)."""
    rank = {f"{package}.{room}": i for i, room in enumerate(order)}
    arrows = [(a, b) for a, deps in folders.items() if a in rank for b in sorted(deps) if b in rank]
    return len(arrows), [f"{a} imports {b}, a room after it" for a, b in arrows if rank[b] > rank[a]]


def test_each_room_imports_only_the_rooms_before_it():
    """rmcore and rmeval by capability: every folder of the package is named in ROOMS, and none
    imports (lazily or not) a folder listed after it."""
    folders = _folder_graph(_graph())
    for package, order in ROOMS.items():
        rooms = {f.split(".")[1] for f in folders if f.startswith(package + ".")}
        assert rooms == set(order), (package, sorted(rooms ^ set(order)))
        arrows, back = _back_arrows(folders, package, order)
        print(f"{package}: {len(order)} rooms, {arrows} arrows, {len(back)} back arrows")
        assert not back, "\n".join(back)


def test_the_room_check_sees_a_back_arrow():
    folders = {"pkg.low": {"pkg.base"}, "pkg.mid": {"pkg.low", "pkg.top"}, "pkg.top": {"pkg.mid"}}
    assert _back_arrows(folders, "pkg", ("base", "low", "mid", "top")) == (
        4, ["pkg.mid imports pkg.top, a room after it"])


def _documented_rooms(package: str) -> list[str]:
    """The first column of docs/architecture.md's table under "`<package>` by capability", in
    order: ``io/`` -> io, ``errors.py`` -> errors (a cell may name several)."""
    lines = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"`{package}` by capability")), None)
    assert start is not None, f"docs/architecture.md has no table of {package}'s folders"
    table = []
    for line in lines[start + 1:]:
        if table and not line.startswith("|"):
            break
        if line.startswith("|"):
            table.append(line)
    cells = [row.split("|")[1] for row in table[2:]]  # past the header and its rule
    return [name.removesuffix("/").removesuffix(".py") for cell in cells for name in re.findall(r"`([^`]+)`", cell)]


def test_the_architecture_doc_lists_every_room_in_layer_order():
    for package, order in ROOMS.items():
        assert _documented_rooms(package) == list(order), package


def test_rmeval_keeps_at_most_four_modules_loose_at_its_top():
    """rmeval is grouped by capability (docs/architecture.md): the few modules at its top level are
    shared leaves (tables, conditions, tracking)."""
    loose = sorted(p.name for p in (ROOT / "rmeval").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 4, loose


def test_the_checks_see_a_lazy_import_and_a_circle(tmp_path):
    """The AST scan catches an import inside a function body, which a sys.modules check cannot,
    and the cycle search finds a circle of three."""
    f = tmp_path / "probe.py"
    f.write_text("def f():\n    from rmeval.audit.pipeline import audit\n    from ..stats import share\n")
    assert {"rmeval.audit.pipeline", "rmeval.stats.share"} <= _imports(f, "rmeval.scoring.probe")
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_importing_the_foundations_and_the_training_library_loads_no_layer_above():
    mods = ["rmcore.data.loading", "rmcore.models.modeling", "rmcore.models.prefix_scoring",
            "rmcore.runtime.checkpoints", "rmeval.audit.pipeline", "rmeval.scoring"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods) +
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rmtrain'))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def _private_imports(path: Path, mod: str) -> list[str]:
    """``from <project module> import _name`` in a file: a helper one module shares with another has
    a public name (a leading underscore means "this module's own")."""
    files = {_module(p) for layer in LAYERS for p in (ROOT / layer).rglob("*.py")}
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        for a in node.names:
            private = a.name.startswith("_") and not a.name.startswith("__")
            if private and base in files and base != mod and f"{base}.{a.name}" not in files:
                out.append(f"{mod}:{node.lineno} imports {a.name} from {base}")
    return out


def test_no_module_imports_a_private_name_of_another():
    bad = [line for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))
           for line in _private_imports(p, _module(p))]
    assert not bad, "\n".join(bad)


def test_the_private_name_check_sees_one(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("from .panel import Panel, _mean\nfrom rmtrain.config import __doc__\n"
                 "def f():\n    from rmcore.io.files import _private\n")
    assert _private_imports(f, "rmeval.judges.probe") == [
        "rmeval.judges.probe:1 imports _mean from rmeval.judges.panel",
        "rmeval.judges.probe:4 imports _private from rmcore.io.files"]


@pytest.mark.heavy
def test_pip_install_editable_installs_every_package(tmp_path):
    """`pip install -e .` from the repository root: rmcore, rmeval and rmtrain import from the new
    layout (no src/), from another directory, without PYTHONPATH pointing at the checkout. Installed
    into a fresh prefix (--ignore-installed: the running environment's own install is left alone);
    the check runs with `-S` so no other install of matchrm can answer."""
    import sysconfig

    prefix = tmp_path / "prefix"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--ignore-installed", "--prefix", str(prefix), "-e", str(ROOT)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    site_dir = next(prefix.rglob("site-packages"))
    code = (f"import site; site.addsitedir({str(site_dir)!r}); "
            "import rmcore, rmtrain, rmeval, rmtrain.sweep, rmeval.stats.permutation; "
            "print(rmcore.__file__); print(rmtrain.__file__); print(rmeval.__file__)")
    deps = sysconfig.get_paths()["purelib"]  # numpy, torch, ...; -S leaves its .pth files (other installs) unread
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": deps}, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == [str(ROOT / p / "__init__.py") for p in ("rmcore", "rmtrain", "rmeval")]
    assert (prefix / "bin" / "rmtrain").exists() and (prefix / "bin" / "rmeval").exists()


# Statistics on a scores table load no model: what rmeval/stats may import from outside the project.
STATS_LIBRARIES = {"numpy", "pandas", "scipy", "sklearn", "joblib", "threadpoolctl"}
MODEL_LIBRARIES = ("torch", "transformers", "peft", "trl", "accelerate", "deepspeed", "datasets", "vllm")


def _outside_imports(paths: list[Path]) -> dict[str, set[str]]:
    """{top-level package: the files importing it} of every import (lazy ones too) in ``paths``
    that is neither the standard library nor the project."""
    out: dict[str, set[str]] = {}
    for path in paths:
        for name in _imports(path, f"rmeval.stats.{path.stem}"):
            top = name.split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in LAYERS:
                out.setdefault(top, set()).add(path.name)
    return out


def test_the_statistics_import_numpy_scipy_and_scikit_learn_and_no_model_library():
    """rmeval/stats (docs/architecture.md): numpy, pandas, scipy, scikit-learn and what comes with
    them, at any depth of its own files; and importing every module of it (with the project modules
    they import) loads none of the model libraries."""
    files = sorted((ROOT / "rmeval" / "stats").glob("*.py"))
    outside = _outside_imports(files)
    assert set(outside) <= STATS_LIBRARIES, {k: v for k, v in outside.items() if k not in STATS_LIBRARIES}
    code = ("import sys\n" + "".join(f"import rmeval.stats.{p.stem}\n" for p in files if p.stem != "__init__") +
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({MODEL_LIBRARIES!r})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_the_statistics_check_sees_a_model_library(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("import numpy as np\ndef f():\n    import torch\n    from transformers import AutoModel\n")
    assert _outside_imports([f]) == {"numpy": {"probe.py"}, "torch": {"probe.py"}, "transformers": {"probe.py"}}
