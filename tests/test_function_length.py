"""No function in rmcore, rmeval or rmtrain runs over 80 lines (the house rule of issue #25): a longer
one is split along the sections it already has. A function's length runs from its ``def`` line to
its last line, decorators left out; methods and nested functions count on their own (and inside
the function that holds them). The check reads the source (an AST walk), so nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rmcore", "rmeval", "rmtrain")
MAX_LINES = 80

# Exemptions as "path:qualified name": none. A function over the limit is split, not listed here.
PENDING: set[str] = set()


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, def line, lines) of every function in ``source``: methods and nested ones
    included, each named through the classes and functions that hold it (``Outer.method``)."""
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def long_functions(root: Path = ROOT, limit: int = MAX_LINES) -> dict[str, str]:
    """{"path:qualified name": "N lines from line L"} of every function over ``limit`` lines in the packages."""
    found = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for name, line, n in function_lengths(path.read_text()):
                if n > limit:
                    found[f"{rel}:{name}"] = f"{n} lines from line {line}"
    return found


def test_no_function_over_80_lines() -> None:
    over = {k: v for k, v in long_functions().items() if k not in PENDING}
    assert not over, (f"functions over {MAX_LINES} lines (split them along their sections):\n"
                      + "\n".join(f"  {k}: {v}" for k, v in sorted(over.items())))


def test_no_stale_exemption() -> None:
    """An exemption whose function was split (or renamed) is stale: take it out of PENDING."""
    stale = PENDING - set(long_functions())
    assert not stale, f"PENDING names functions no longer over {MAX_LINES} lines: {sorted(stale)}"


def _function(name: str, lines: int, indent: str = "") -> list[str]:
    """A function of exactly ``lines`` lines (def line included), one statement per body line."""
    return [f"{indent}def {name}():"] + [f"{indent}    x = {i}" for i in range(lines - 1)]


def test_the_counter_flags_81_lines_and_passes_80(tmp_path: Path) -> None:
    source = "\n".join([
        *_function("eighty", 80), "",
        "@decorator", "@another(1)", *_function("decorated_eighty", 80), "",  # decorators do not count
        *_function("eighty_one", 81), "",
        "class Box:", *_function("method_eighty_one", 81, "    "), "",
        "def outer():", *_function("nested_eighty_one", 81, "    "), "    return nested_eighty_one", "",
        *(["async " + line if i == 0 else line for i, line in enumerate(_function("async_eighty_one", 81))]), "",
    ]) + "\n"
    lengths = {name: n for name, _, n in function_lengths(source)}
    assert lengths["eighty"] == 80 and lengths["decorated_eighty"] == 80 and lengths["eighty_one"] == 81
    assert lengths["Box.method_eighty_one"] == 81 and lengths["outer.nested_eighty_one"] == 81
    assert lengths["outer"] == 83 and lengths["async_eighty_one"] == 81
    (tmp_path / "rmcore").mkdir()
    (tmp_path / "rmcore" / "mod.py").write_text(source)
    for pkg in ("rmeval", "rmtrain"):
        (tmp_path / pkg).mkdir()
    assert set(long_functions(tmp_path)) == {
        "rmcore/mod.py:eighty_one", "rmcore/mod.py:Box.method_eighty_one", "rmcore/mod.py:outer",
        "rmcore/mod.py:outer.nested_eighty_one", "rmcore/mod.py:async_eighty_one"}
