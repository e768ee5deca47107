"""The README and docs/ hold together: every relative link points at a file that exists, the
README stays short, and no page points into a checkout a user does not have."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
# Pages other work adds; shrink this list once they exist.
COMING: set[str] = set()  # pages linked before they are written (none)
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code is not prose
    return [a or b for a, b in LINK.findall(text)]


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in filter(relative, links(page)):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        if not path.exists() and rel not in COMING:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_link_leaves_the_repository(page):
    outside = [t for t in filter(relative, links(page))
               if not (page.parent / t.split("#", 1)[0]).resolve().is_relative_to(ROOT)]
    assert not outside, f"{page.relative_to(ROOT)} links outside the checkout: {outside}"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it <= {README_MAX_LINES}, move detail to docs/"


def test_link_finder_sees_links_and_skips_code():
    page = ROOT / "README.md"
    found = links(page)
    assert "docs/index.md" in found and all("```" not in t for t in found)


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    """Heading anchors as GitHub renders them: lower case, punctuation dropped, spaces to hyphens,
    a repeated heading numbered -1, -2, …"""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    counts: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.*)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        found.add(slug if n == 0 else f"{slug}-{n}")
        counts[slug] = n + 1
    return frozenset(found)


def test_anchor_slugs_follow_github():
    page = ROOT / "docs" / "validation.md"
    assert "qwen3-30b-a3b-prefill-on-r5080-bf3-figure-11a" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_anchor_names_a_heading(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        file, anchor = target.split("#", 1)
        path = (page.parent / file).resolve() if file else page
        if path.exists() and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to missing headings {broken}"
