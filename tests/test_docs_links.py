"""Every intra-repo link in README.md and docs/*.md resolves: the file exists and, with ``#anchor``,
the target Markdown file has a heading of that GitHub slug (a page that moves or renames a section
otherwise leaves dead links behind silently)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); the target ends at whitespace or ")" (no titles used here)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than "-" and "_"
    removed (letters of any script kept), each space a "-"."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()  # backticks and "*" go with the other punctuation below
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks (a link in a code block is not a link)."""
    out, fenced = [], False
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((no, line))
    return out


def anchors(path: Path) -> set[str]:
    """The anchors a page's headings get; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(pages: list[Path]) -> list[str]:
    """``page:line: target (why)`` for each intra-repo link that does not resolve."""
    bad = []
    for page in pages:
        for no, line in _prose_lines(page):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                if not dest.exists():
                    bad.append(f"{page.relative_to(ROOT)}:{no}: {target} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    bad.append(f"{page.relative_to(ROOT)}:{no}: {target} (no such heading)")
    return bad


@pytest.mark.parametrize(("heading", "expected"), [
    ("Example: the demo checkpoint on RM-Bench chat", "example-the-demo-checkpoint-on-rm-bench-chat"),
    ("Robustness of the test (appendix B.1)", "robustness-of-the-test-appendix-b1"),
    ("The `rmeval pairwise` command", "the-rmeval-pairwise-command"),
    ("Bradley–Terry & co", "bradleyterry--co"),
    ("`n_prompts` per *arm*", "n_prompts-per-arm"),
])
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_repeated_headings_are_numbered(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A\n\n## Examples\n\n```\n## not a heading\n```\n\n## Examples\n", encoding="utf-8")
    assert anchors(page) == {"a", "examples", "examples-1"}


def test_the_checker_finds_a_dead_anchor_and_file(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Top\n\n[ok](#top) [bad](#gone) [f](b.md#x) [nofile](c.md) [web](https://x.y/#z)\n",
                                   encoding="utf-8")
    (tmp_path / "b.md").write_text("## X\n", encoding="utf-8")
    assert broken_links([tmp_path / "a.md"]) == ["a.md:3: #gone (no such heading)", "a.md:3: c.md (no such file)"]


def test_docs_links_resolve():
    assert broken_links(PAGES) == []
