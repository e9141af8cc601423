"""The docs, both languages, as GitHub renders them: every local link and anchor resolves; the front page (README.md,
docs/zh/README.md) stays a front page: at most 15 KB, its first block torch first and then the test command CI runs,
its sections in the plan's order (docs by task, one line and a link each), one screenshot; both languages have the
same pages and list the same settings; every benchmark figure is written once, in docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from helpers.markdown import anchors, github_slug, is_local, links, tables, tables_under, tokens

README = REPO_ROOT / "README.md"
ZH_README = REPO_ROOT / "docs" / "zh" / "README.md"
FRONT_PAGES = (README, ZH_README)
DOCS = sorted([README, *(REPO_ROOT / "docs").rglob("*.md")])
BENCHMARKS = REPO_ROOT / "docs" / "benchmarks.md"
FRONT_PAGE_MAX_BYTES = 15 * 1024
SCREENSHOT_MAX_BYTES = 150_000
# The pages the front page's task table links, one line each (the docs plan): docs/<name>.md in English and
# docs/zh/<name>.md in Chinese, same names.
TASK_PAGES = {"profile", "view", "compare", "memory", "where_in_code", "limits", "many_gpus", "torchrun", "capture",
              "docker", "remote_ssh", "troubleshooting", "settings", "inference", "trace_summary", "tensorboard",
              "benchmarks", "development"}


def _name(path: Path) -> str:
    """The path as the repository names it (a file outside it, e.g. a test's own, by its name)."""
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else path.name


@pytest.mark.parametrize(("heading", "slug"), [
    ("Your own LightX2V: Docker, or not", "your-own-lightx2v-docker-or-not"),
    ("Assets: python -m lightx2v.assets", "assets-python--m-lightx2vassets"),
    ("Your checkout still has LightX2V's original profiler module",
     "your-checkout-still-has-lightx2vs-original-profiler-module"),
    ("用你自己的 LightX2V：Docker 或不用 Docker", "用你自己的-lightx2vdocker-或不用-docker"),
    ("设置（环境变量）", "设置环境变量"),
    ("🚀 infer_main – 1/3/1", "-infer_main--131"),
])
def test_anchor_slugs_follow_githubs_rule(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_get_numbered_anchors(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# Figures\n\n## Figures\n\n```\n# Figures (code, not a heading)\n```\n\n### `Figures`\n"
                   "\n## Figures-1\n", encoding="utf-8")
    assert anchors(doc) == ["figures", "figures-1", "figures-2", "figures-1-1"]


def test_links_in_code_are_not_links(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("[a](#real) `[b](#in-code-span)`\n\n```\n[c](#in-code-block)\n```\n", encoding="utf-8")
    assert [link.target for link in links(doc)] == ["#real"]


def _broken_links(doc: Path) -> list[str]:
    """Each local link of `doc` whose file or anchor does not exist, as 'doc:line: target (why)'."""
    broken = []
    for link in links(doc):
        if not is_local(link.target):
            continue
        path_part, _, anchor = link.target.partition("#")
        target = (doc.parent / path_part).resolve() if path_part else doc
        if not target.exists():
            broken.append(f"{_name(doc)}:{link.line}: {link.target} (no such file: {path_part})")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            near = [a for a in anchors(target) if a[:4] == anchor[:4]] or anchors(target)[:8]
            broken.append(f"{_name(doc)}:{link.line}: {link.target} (no heading with that anchor in "
                          f"{_name(target)}; its anchors include {', '.join(near)})")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=_name)
@pytest.mark.slow
def test_every_local_link_and_anchor_exists(doc):
    assert _broken_links(doc) == []


ZH_PAGES = sorted((REPO_ROOT / "docs" / "zh").glob("*.md"))


def test_every_english_page_has_its_chinese_page():
    english = {page.name for page in (REPO_ROOT / "docs").glob("*.md")}
    chinese = {page.name for page in ZH_PAGES}
    assert english - chinese == set(), "docs/zh/<name>.md for every docs/<name>.md, under the same name"


@pytest.mark.parametrize("doc", [page for page in ZH_PAGES if page != ZH_README], ids=_name)
def test_each_chinese_page_links_its_english_page_first(doc):
    assert links(doc)[0].target == f"../{doc.name}", f"{_name(doc)}: its first link is its English page"


@pytest.mark.parametrize("doc", ZH_PAGES, ids=_name)
def test_chinese_pages_link_english_pages_whole(doc):
    """An English page's sections move (the English docs are restructured on their own), so the Chinese guide links
    an English page, never a heading in it; anchors within the Chinese pages are checked like every other."""
    zh = doc.parent.resolve()
    into_english = [f"{_name(doc)}:{link.line}: {link.target}" for link in links(doc)
                    if is_local(link.target) and "#" in link.target and link.target.split("#")[0].endswith(".md")
                    and (doc.parent / link.target.split("#")[0]).resolve().parent != zh]
    assert into_english == []


def test_broken_links_are_reported_with_the_reason(tmp_path):
    (tmp_path / "other.md").write_text("# 多人共用一台机器 (shared)\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text("# Top\n\n[ok](#top) [ok](other.md#多人共用一台机器-shared) [web](https://example.com/#x)\n\n"
                   "[bad](#多人共用一台机器) [gone](missing.md) [bad too](other.md#shared)\n", encoding="utf-8")
    problems = _broken_links(doc)
    assert len(problems) == 3, problems
    assert problems[0].startswith("doc.md:5: #多人共用一台机器 (no heading with that anchor in doc.md;")
    assert [p.split(": ", 1)[1].split(" (")[0] for p in problems] == ["#多人共用一台机器", "missing.md",
                                                                      "other.md#shared"]


def _first_code_block(path: Path) -> str:
    return next(tok.content for tok in tokens(path) if tok.type == "fence")


def _commands(block: str) -> list[str]:
    """The block's command lines, each without its trailing `# comment`."""
    lines = (re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("doc", FRONT_PAGES, ids=_name)
def test_the_first_block_is_a_venv_torch_then_the_main_job_then_the_test_command_ci_runs(doc):
    """Safe to paste on a fresh machine: a venv first (a stock Debian/Ubuntu python3 refuses pip outside one, PEP
    668), torch alone (so pip's configured CPU build is what `.[serve]` then finds, not a multi-GB CUDA build), the
    same torch as CI's; then install + serve; then CI's own test command."""
    ci_lines = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = ci_lines.index("# README: the test command")
    ci_command = ci_lines[marker + 1].strip()
    (ci_torch,) = [line.strip() for line in ci_lines if re.match(r"python3 -m pip install -q torch==", line)]
    torch_line = ci_torch.replace(" -q ", " ")
    assert _commands(_first_code_block(doc)) == [
        "python3 -m venv .venv && . .venv/bin/activate", torch_line,
        "python3 -m pip install -e '.[serve]' && lightx2v-serve", ci_command], (
        f"{_name(doc)}: its first code block must be exactly the venv, `{torch_line}`, the install and "
        f"`lightx2v-serve`, and CI's `{ci_command}`")


def test_the_docs_name_no_package_index():
    """The project names no registry host (an index URL goes stale, and a mirror is what users should set): the
    CPU-torch step names PyTorch's selector instead."""
    index = re.compile(r"(pypi\.org|pythonhosted\.org|npmjs\.(org|com)|download\.pytorch\.org|pytorch\.org/whl)")
    found = [f"{_name(doc)}:{n}" for doc in DOCS
             for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1) if index.search(line)]
    assert found == []


@pytest.mark.parametrize("doc", FRONT_PAGES, ids=_name)
def test_the_front_page_is_at_most_15_kb(doc):
    size = len(doc.read_bytes())
    assert size <= FRONT_PAGE_MAX_BYTES, (
        f"{_name(doc)} is {size} bytes: a front page holds what it is, the commands, ports, your own LightX2V and "
        f"one line per task (at most {FRONT_PAGE_MAX_BYTES}); the rest goes to a page under docs/")


def _sections(doc: Path) -> list[list]:
    """The front page's block tokens split at each level-2 heading: [tokens before the first, section 1, ...]."""
    sections: list[list] = [[]]
    for tok in tokens(doc):
        if tok.type == "heading_open" and tok.tag == "h2":
            sections.append([])
        sections[-1].append(tok)
    return sections


def _section_holding(doc: Path, found) -> int | None:
    return next((i for i, section in enumerate(_sections(doc)) if any(found(tok) for tok in section)), None)


@pytest.mark.parametrize("doc", FRONT_PAGES, ids=_name)
def test_front_page_sections_in_order(doc):
    """The plan's order, found by what each section holds (so both languages are checked alike): the commands,
    the ports (and the laptop's 9001 for Perfetto), your own LightX2V (Docker and not), the docs by task."""
    def fence_with(text):
        return lambda tok: tok.type == "fence" and text in tok.content

    order = {
        "the commands (pip install torch)": _section_holding(doc, fence_with("pip install torch==")),
        "ports (ssh -L 9001:127.0.0.1:<port>)": _section_holding(doc, fence_with("-L 9001:127.0.0.1:")),
        "your own LightX2V with Docker (docker compose up)": _section_holding(doc, fence_with("docker compose up")),
        "your own LightX2V without Docker (lightx2v-serve --checkout)": _section_holding(
            doc, fence_with("lightx2v-serve --checkout")),
        "the docs by task (a table linking profile.md)": _section_holding(
            doc, lambda tok: tok.type == "inline" and re.search(r"\]\([^)]*profile\.md\)", tok.content)),
    }
    missing = [what for what, index in order.items() if index is None]
    assert not missing, f"{_name(doc)} lacks {missing}"
    assert list(order.values()) == sorted(order.values()), f"{_name(doc)}: sections out of order: {order}"
    assert order["the commands (pip install torch)"] >= 1, f"{_name(doc)}: the commands under a heading of their own"


def _task_table_pages(doc: Path) -> set[str]:
    """The page names (file stems) linked from the front page's task table."""
    found = [i for i, section in enumerate(_sections(doc))
             if any(tok.type == "table_open" for tok in section)
             and any(tok.type == "inline" and "profile.md" in tok.content for tok in section)]
    assert len(found) == 1, f"{_name(doc)}: one section with the task table (a table linking profile.md)"
    index = found[0]
    targets = [link.target for link in links(doc)
               if any(tok.map and tok.map[0] <= link.line - 1 < tok.map[1]
                      for tok in _sections(doc)[index] if tok.type == "table_open")]
    return {Path(target.partition("#")[0]).stem for target in targets if is_local(target)}


@pytest.mark.parametrize("doc", FRONT_PAGES, ids=_name)
def test_the_front_page_links_every_task_page(doc):
    assert _task_table_pages(doc) == TASK_PAGES


def test_every_english_page_has_a_chinese_page_of_the_same_name():
    english = {p.stem for p in (REPO_ROOT / "docs").glob("*.md")}
    chinese = {p.stem for p in (REPO_ROOT / "docs" / "zh").glob("*.md")} - {"README"}
    assert TASK_PAGES <= english
    assert english - chinese == set(), "docs/zh/<name>.md for every docs/<name>.md (the docs plan)"


@pytest.mark.parametrize("doc", FRONT_PAGES, ids=_name)
def test_the_front_page_shows_one_small_screenshot_made_from_the_projects_page(doc):
    images = [link.target for link in links(doc) if link.target.endswith(".png")]
    assert len(images) == 1, f"{_name(doc)}: one screenshot, not {images}"
    image = (doc.parent / images[0]).resolve()
    assert image.parent == REPO_ROOT / "docs" / "img", image
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.stat().st_size <= SCREENSHOT_MAX_BYTES, f"{image.name}: {image.stat().st_size} bytes"
    assert image.name in (REPO_ROOT / "tests" / "helpers" / "screenshot.py").read_text(), (
        "the screenshot is the one tests/helpers/screenshot.py makes (scripts/make_screenshot.py)")


SETTINGS_HEADERS = (["variable", "default", "what it does"], ["变量", "默认值", "作用"])


def _settings_variables(doc: Path) -> list[str]:
    """The variables of the page's one settings table (found by its header, so either language's heading does)."""
    assert doc.is_file(), f"{_name(doc)}: no such page (the settings table lives there)"
    found = [table for table in tables(doc) if [cell.strip("`") for cell in table[0]][:3] in SETTINGS_HEADERS]
    assert len(found) == 1, f"{_name(doc)}: one settings table (header {' | '.join(SETTINGS_HEADERS[0])})"
    _, *rows = found[0]
    names = [re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", row[0]) for row in rows]
    assert all(names), f"{_name(doc)}: first cells must be one backticked variable: {[r[0] for r in rows]}"
    return [m.group(1) for m in names if m]


def test_both_languages_list_the_same_settings():
    english = _settings_variables(REPO_ROOT / "docs" / "settings.md")
    chinese = _settings_variables(REPO_ROOT / "docs" / "zh" / "settings.md")
    assert english == chinese
    assert len(set(english)) == len(english), "each variable once"


def _benchmark_rows() -> list[dict[str, str]]:
    found = tables_under(BENCHMARKS, "Benchmarks")
    assert len(found) == 1, "docs/benchmarks.md: one benchmark table"
    header, *rows = found[0]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_every_benchmark_row_says_when_and_where():
    machines = {"VM", "CI", "H200"}
    for row in _benchmark_rows():
        when_where = row["when, where"]
        assert re.search(r"\b20\d\d-\d\d(-\d\d)?\b", when_where), f"no date: {row['what']}"
        assert machines & set(re.findall(r"\w+", when_where)) or "recorded on an H200" in when_where, (
            f"no machine: {row['what']}")


def test_benchmark_rows_agree_with_the_breakdown_they_link():
    """A row that summarises a doc's breakdown states figures that the breakdown holds (one measurement, so a
    changed figure on one side only fails here)."""
    linked = 0
    for row in _benchmark_rows():
        target = re.search(r"\]\(([^)#]+\.md)#[^)]*\)", row["what"])
        if not target:
            continue
        linked += 1
        breakdown = (BENCHMARKS.parent / target.group(1)).read_text(encoding="utf-8")
        figures = re.findall(r"\d+(?:\.\d+)?(?:/\d+)?", row["measured"] + " " + row["baseline (same run)"])
        missing = [figure for figure in figures
                   if not re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d/]|\.\d)", breakdown)]
        assert not missing, f"{row['what']}: {missing} not in {target.group(1)}"
    assert linked >= 2


@pytest.mark.parametrize("package_name, quote", [("lightx2v.trace_summary", "``"), ("lightx2v.trace_browser", "`")])
def test_the_package_maps_name_every_module(package_name, quote):
    """The package docstring is the map a new engineer reads first; a module it does not name is one nobody finds."""
    import importlib

    package = importlib.import_module(package_name)
    modules = {p.stem for p in Path(package.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    named = set(re.findall(rf"(?<!`){quote}(\w+){quote}(?!`)", package.__doc__ or ""))
    assert modules - named == set()
