"""Layering is one-way: shared foundations (rmtrain.data, formatting, modeling, io, ...) and the
training library (rmtrain.train, trainer, prepare, rundir) <- rmeval <- the wiring layer
(rmtrain.cli, rmtrain.runs, rmtrain.sweep, rmtrain.policy). No module imports from a layer above it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WIRING = ("rmtrain.cli", "rmtrain.runs", "rmtrain.sweep", "rmtrain.policy")
TRAINING = ("rmtrain.train", "rmtrain.trainer", "rmtrain.prepare", "rmtrain.rundir")


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


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_library_modules_never_import_a_layer_above():
    bad = []
    for path in sorted((ROOT / "rmtrain").rglob("*.py")):
        mod = _module(path)
        if _under(mod, WIRING):
            continue
        bad += [f"{mod} imports {m}" for m in _imports(path) if _under(m, ("rmeval",) + WIRING)]
    for path in sorted((ROOT / "rmeval").rglob("*.py")):
        mod = _module(path)
        bad += [f"{mod} imports {m}" for m in _imports(path) if _under(m, WIRING + TRAINING)]
    assert not bad, "\n".join(bad)


def test_importing_the_training_library_loads_no_rmeval():
    mods = ["rmtrain.train", "rmtrain.trainer", "rmtrain.prepare", "rmtrain.rundir", "rmtrain.modeling",
            "rmtrain.formatting", "rmtrain.config", "rmtrain.io", "rmtrain.tracking", "rmtrain.arms",
            "rmtrain.data.registry", "rmtrain.data.pairs", "rmtrain.data.simulated", "rmtrain.data.helpsteer"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods) +
            "print(sorted(m for m in sys.modules if m == 'rmeval' or m.startswith('rmeval.')))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_the_check_sees_a_lazy_import(tmp_path):
    """The AST scan catches an import inside a function body, which a sys.modules check cannot."""
    f = tmp_path / "probe.py"
    f.write_text("def f():\n    from rmeval.callback import AuditCallback\n    from ..stats import share\n")
    assert {"rmeval.callback", "rmeval.stats.share"} <= _imports(f, "rmeval.scoring.probe")


@pytest.mark.heavy
def test_pip_install_editable_installs_both_packages(tmp_path):
    """`pip install -e .` from the repository root: rmtrain and rmeval import from the new layout
    (no src/), from another directory, without PYTHONPATH pointing at the checkout. Installed into
    a fresh prefix (--ignore-installed: the running environment's own install is left alone); the check runs with `-S` so no other install of matchrm can answer."""
    import sysconfig

    prefix = tmp_path / "prefix"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed",
                          "--prefix", str(prefix), "-e", str(ROOT)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    site_dir = next(prefix.rglob("site-packages"))
    code = (f"import site; site.addsitedir({str(site_dir)!r}); "
            "import rmtrain, rmeval, rmtrain.sweep, rmeval.stats.permutation; "
            "print(rmtrain.__file__); print(rmeval.__file__)")
    deps = sysconfig.get_paths()["purelib"]  # numpy, torch, ...; -S leaves its .pth files (other installs) unread
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": deps}, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == [str(ROOT / "rmtrain" / "__init__.py"), str(ROOT / "rmeval" / "__init__.py")]
    assert (prefix / "bin" / "rmtrain").exists() and (prefix / "bin" / "rmeval").exists()
