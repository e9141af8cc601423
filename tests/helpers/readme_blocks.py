"""The shell blocks of README.md and the marker before each: `<!-- runs: tests/FILE.py::TEST[, ...] -->` names the
tests that run it, `<!-- needs: docker -->` / `<!-- needs: gpu -->` says why none can here. The marker is an HTML
comment on the line right before the fence, so GitHub shows nothing of it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO_ROOT
from helpers.markdown import tokens

README = REPO_ROOT / "README.md"
SHELLS = {"bash", "sh", "shell", "console", "zsh"}
NEEDS = {"docker", "gpu"}
_MARKER = re.compile(r"<!--\s*(runs|needs):\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One shell block: its first line in the file (1-based), its code, and its marker (kind `runs`/`needs`, and
    what: the test ids, or what it needs), both None when it has none."""

    line: int
    code: str
    kind: str | None
    what: str | None

    def commands(self) -> list[str]:
        """Its command lines (a line ending in `\\` joined with the next), each without its trailing `# comment`."""
        joined = re.sub(r"\\\n\s*", " ", self.code)
        lines = (re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in joined.splitlines())
        return [line for line in lines if line and not line.startswith("#")]


def shell_blocks(doc: Path = README) -> list[Block]:
    toks = tokens(doc)
    blocks = []
    for i, tok in enumerate(toks):
        if tok.type != "fence" or (tok.info.split() or [""])[0] not in SHELLS:
            continue
        before = toks[i - 1] if i else None
        marker = (_MARKER.fullmatch(before.content.strip())
                  if before is not None and before.type == "html_block" and before.map and tok.map
                  and before.map[1] == tok.map[0] else None)
        blocks.append(Block(tok.map[0] + 1 if tok.map else 0, tok.content,
                            marker.group(1) if marker else None, marker.group(2) if marker else None))
    return blocks


def marker_problems(doc: Path = README) -> list[str]:
    """Each shell block of `doc` without a valid marker, as 'doc:line: why'; a `runs:` marker must name tests that
    exist (`path::function`, the function defined in that file)."""
    problems = []
    for block in shell_blocks(doc):
        where = f"{doc.name}:{block.line}"
        if block.kind is None:
            problems.append(f"{where}: no marker: put `<!-- runs: tests/FILE.py::TEST -->` (a test that runs it) "
                            f"or `<!-- needs: docker -->` / `<!-- needs: gpu -->` on the line before it")
        elif block.kind == "needs" and block.what not in NEEDS:
            problems.append(f"{where}: `needs: {block.what}`: say docker or gpu, or run it in a test")
        elif block.kind == "runs":
            for test_id in (part.strip() for part in (block.what or "").split(",")):
                path, _, name = test_id.partition("::")
                source = REPO_ROOT / path
                if not (name and source.is_file()
                        and re.search(rf"^def {re.escape(name)}\(", source.read_text(encoding="utf-8"), re.M)):
                    problems.append(f"{where}: `runs: {test_id}`: no such test")
    return problems


def block_run_by(test_id: str, doc: Path = README) -> Block:
    """The one block of `doc` whose marker names `test_id` (the test that calls this runs it)."""
    found = [block for block in shell_blocks(doc) if block.kind == "runs"
             and test_id in (part.strip() for part in (block.what or "").split(","))]
    assert len(found) == 1, f"{doc.name}: {len(found)} blocks marked `runs: {test_id}`, expected one"
    return found[0]
