"""Reading this project's Markdown docs as GitHub renders them: headings and their anchors, links, tables.

The docs are parsed with markdown-it-py (CommonMark plus GitHub's tables), so a link or a heading inside a code
block or a code span is not mistaken for one. Anchors follow GitHub's rule (github-slugger): the heading's text,
lowercased, with every character removed that is not a letter, a mark, a digit, a connector (`_`), a space or
`-`, each space then turned into `-`; a repeated slug gets `-1`, `-2`, ... in the order the headings appear.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HTML_ID = re.compile(r"""<a\s[^>]*\b(?:id|name)=["']([^"']+)["']""", re.IGNORECASE)


@dataclass(frozen=True)
class Link:
    """One link of a doc: where it is (1-based line), and what it points to as written (percent-decoded)."""

    doc: Path
    line: int
    target: str


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


@lru_cache(maxsize=None)
def tokens(path: Path) -> tuple[Token, ...]:
    """The block tokens of one Markdown file (cached: several tests read the same docs)."""
    return tuple(_parser().parse(path.read_text(encoding="utf-8")))


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading whose rendered text is `text` (before duplicate numbering)."""
    kept = [
        ch for ch in text.lower()
        if ch in " -" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"
    ]
    return "".join(kept).replace(" ", "-")


def _inline_text(inline: Token) -> str:
    """The text a reader sees in an inline token: text and code spans, without markup."""
    return "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))


def headings(path: Path) -> list[tuple[int, str]]:
    """(level, rendered text) of every heading, in order."""
    toks = tokens(path)
    return [
        (int(tok.tag[1:]), _inline_text(toks[i + 1]))
        for i, tok in enumerate(toks) if tok.type == "heading_open"
    ]


def anchors(path: Path) -> list[str]:
    """Every anchor GitHub creates in the file: heading slugs, numbered when repeated, and raw-HTML ids."""
    seen: dict[str, int] = {}
    result: list[str] = []
    for _, text in headings(path):
        slug = base = github_slug(text)
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen.setdefault(slug, 0)
        result.append(slug)
    for tok in tokens(path):
        sources = [tok.content] + [child.content for child in tok.children or () if child.type == "html_inline"]
        for source in sources if tok.type in ("html_block", "inline") else ():
            result.extend(_HTML_ID.findall(source))
    return result


def links(path: Path) -> list[Link]:
    """Every link and image of the file (inline and reference style; autolinks too)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Link] = []
    for tok in tokens(path):
        if tok.type != "inline" or tok.map is None:
            continue
        cursor = tok.map[0]  # the block's first line; each link is looked up from the previous one on
        for child in tok.children or ():
            href = child.attrGet("href") if child.type == "link_open" else (
                child.attrGet("src") if child.type == "image" else None)
            if href is None:
                continue
            target = unquote(str(href))
            cursor = next((n for n in range(cursor, tok.map[1]) if target in lines[n] or str(href) in lines[n]),
                          cursor)
            found.append(Link(path, cursor + 1, target))
    return found


def is_local(target: str) -> bool:
    """A link into this repository (a file, a folder or an anchor), not to a web address."""
    return not (_SCHEME.match(target) or target.startswith("//"))


def _tables_of(toks) -> list[list[list[str]]]:
    """The tables among these block tokens, each as rows of cell texts, its header row first."""
    found: list[list[list[str]]] = []
    row: list[str] | None = None
    for tok in toks:
        if tok.type == "table_open":
            found.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close" and row is not None:
            found[-1].append(row)
            row = None
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
    return found


def tables(path: Path) -> list[list[list[str]]]:
    """Every table of the file, each as rows of cell texts, its header row first."""
    return _tables_of(tokens(path))


def tables_under(path: Path, heading: str) -> list[list[list[str]]]:
    """The tables between the heading with this exact text and the next heading of the same or a higher level;
    each table as rows of cell texts, its header row first."""
    toks = tokens(path)
    level: int | None = None
    start = end = len(toks)
    for i, tok in enumerate(toks):
        if tok.type != "heading_open":
            continue
        if level is not None and int(tok.tag[1:]) <= level:
            end = i
            break
        if level is None and _inline_text(toks[i + 1]) == heading:
            level, start = int(tok.tag[1:]), i
    return _tables_of(toks[start:end])
