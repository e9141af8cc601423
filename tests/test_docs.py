"""The docs, both languages, as GitHub renders them: every local link and anchor resolves, the README's test
command is the one CI runs, the README keeps its sections in order, and both languages list the same settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from helpers.markdown import anchors, github_slug, headings, is_local, links, tables_under, tokens

README = REPO_ROOT / "README.md"
ZH_README = REPO_ROOT / "docs" / "zh" / "README.md"
ZH_SETTINGS = REPO_ROOT / "docs" / "zh" / "settings.md"
DOCS = sorted([README, *(REPO_ROOT / "docs").rglob("*.md")])


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


def _ci_run() -> list[str]:
    return (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def _ci_torch() -> str:
    """The torch that CI installs first (`python3 -m pip install -q torch==X`), as a front page names it."""
    (pin,) = {word for line in _ci_run() if line.startswith("python3 -m pip install")
              for word in line.split() if word.startswith("torch==")}
    return f"python3 -m pip install {pin}"


@pytest.mark.parametrize(("doc", "main_job"), [
    (README, ["pip install -e '.[serve]' && python -m lightx2v.serve"]),
    # torch alone first (its CPU build where pip was told where to find it: the sentence above the block)
    (ZH_README, [_ci_torch(), "python3 -m pip install -e '.[serve]' && lightx2v-serve"]),
], ids=["en", "zh"])
def test_readme_test_command_is_the_one_ci_runs(doc, main_job):
    """A front page's first code block is a fresh machine's path, command by command: the main job, then the
    tests exactly as CI runs them (a comment after a command is not part of it)."""
    ci_lines = _ci_run()
    ci_command = ci_lines[ci_lines.index("# README: the test command") + 1].strip()
    fresh_machine = [line.split("  #")[0].strip() for line in _first_code_block(doc).splitlines()]
    commands = [line for line in fresh_machine if line and not line.startswith("#")]
    assert ci_command in commands, f"{_name(doc)}: its first code block lacks CI's `{ci_command}`"
    assert commands == [*main_job, ci_command], f"{_name(doc)}: the commands on a fresh machine"


@pytest.mark.parametrize(("doc", "sections"), [
    (README, ["Your own LightX2V", "Remote SSH", "Viewing", "Troubleshooting", "Settings (environment variables)",
              "Benchmarks"]),
    (ZH_README, ["端口", "用你自己的 LightX2V", "按任务查找"]),
], ids=["en", "zh"])
def test_readme_sections_in_order(doc, sections):
    titles = [text for level, text in headings(doc) if level == 2]
    positions = [next((i for i, title in enumerate(titles) if title.startswith(s)), None) for s in sections]
    missing = [section for section, position in zip(sections, positions, strict=True) if position is None]
    assert not missing, f"{_name(doc)} lacks {missing}"
    assert positions == sorted(positions), f"{_name(doc)}: sections out of order: {titles}"


def _settings_variables(doc: Path, heading: str) -> list[str]:
    tables = tables_under(doc, heading)
    assert len(tables) == 1, f"{_name(doc)}: one table under '{heading}'"
    header, *rows = tables[0]
    assert [cell.strip("`") for cell in header][:3] in (["variable", "default", "what it does"],
                                                         ["变量", "默认值", "作用"]), header
    names = [re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", row[0]) for row in rows]
    assert all(names), f"{_name(doc)}: first cells must be one backticked variable: {[r[0] for r in rows]}"
    return [m.group(1) for m in names if m]


def test_both_languages_list_the_same_settings():
    english = _settings_variables(README, "Settings (environment variables)")
    chinese = _settings_variables(ZH_SETTINGS, "设置（环境变量）")
    assert english == chinese
    assert len(set(english)) == len(english), "each variable once"


def _benchmark_rows() -> list[dict[str, str]]:
    tables = tables_under(README, "Benchmarks")
    assert len(tables) == 1, "README: one benchmark table"
    header, *rows = tables[0]
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
        target = re.search(r"\]\((docs/[^)#]+)#[^)]*\)", row["what"])
        if not target:
            continue
        linked += 1
        breakdown = (REPO_ROOT / target.group(1)).read_text(encoding="utf-8")
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
