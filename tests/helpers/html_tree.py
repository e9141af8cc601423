"""A page's HTML as a small tree (stdlib html.parser), for tests that read what a page shows: elements by tag,
class and id, their text and attributes, as a browser would see them (the first of repeated attributes wins)."""

from __future__ import annotations

import html.parser
from collections.abc import Iterator

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# elements a browser closes when a sibling of the same kind starts (enough for the pages under test)
SELF_CLOSING_SIBLINGS = {"p", "li", "option", "tr", "td", "th"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    @property
    def id(self) -> str | None:
        return self.attrs.get("id")

    def text(self) -> str:
        """The text inside, as it reads (tags dropped)."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def own_text(self) -> str:
        """The text directly inside, not inside child elements."""
        return "".join(c for c in self.children if isinstance(c, str))

    def elements(self) -> Iterator[Node]:
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.elements()

    def find_all(self, tag: str | None = None, cls: str | None = None, id: str | None = None) -> list[Node]:
        return [n for n in self.elements() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and (id is None or n.id == id)]

    def find(self, tag: str | None = None, cls: str | None = None, id: str | None = None) -> Node:
        found = self.find_all(tag, cls, id)
        assert found, f"no <{tag or '*'}{f' class={cls}' if cls else ''}{f' id={id}' if id else ''}>"
        return found[0]

    def children_of(self, tag: str) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node) and c.tag == tag]

    def __repr__(self) -> str:
        return f"<{self.tag} {self.attrs}>{self.text()[:60]!r}"


class _Builder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.open = self.root

    def handle_starttag(self, tag, attrs):
        if tag in SELF_CLOSING_SIBLINGS and self.open.tag == tag:
            self.open = self.open.parent or self.root
        first: dict[str, str] = {}
        for k, v in attrs:
            first.setdefault(k, v if v is not None else "")
        node = Node(tag, first, self.open)
        self.open.children.append(node)
        if tag not in VOID:
            self.open = node

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.open = self.open.parent or self.root

    def handle_endtag(self, tag):
        node: Node | None = self.open
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.open = node.parent

    def handle_data(self, data):
        self.open.children.append(data)


def parse(page: str) -> Node:
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root


def cells(row: Node) -> list[Node]:
    """A table row's cells (th and td) in order."""
    return [c for c in row.children if isinstance(c, Node) and c.tag in ("td", "th")]


def body_rows(table: Node) -> list[Node]:
    """The rows of a table's tbody."""
    return table.find("tbody").children_of("tr")


def header(table: Node) -> list[str]:
    return [c.text() for c in cells(table.find("thead").children_of("tr")[0])]
