"""One page base: every page the trace browser serves sets the common rules (type, margins, table cells, figures)
the same way, once. The pages come from the real server; their stylesheets are parsed by Chromium's own CSS parser
(a constructable stylesheet), so shorthands are compared as the browser expands them."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from helpers.browser import chromium
from helpers.compare_root import BASE_RUN, NEW_RUN, RANKS_NEW, make_compare_root
from helpers.procs import http_get, trace_browser

pytestmark = pytest.mark.browser

TRACE = BASE_RUN + "/rank0_h200.pt.trace.json"
PAGES = {  # the page, its URL path, its HTTP status
    "trace list": ("/", 200),
    "Overview of a trace": ("/overview/" + TRACE, 200),
    "Overview of a run": ("/overview/" + RANKS_NEW + "/", 200),
    "error page": ("/overview/broken/rank0.pt.trace.json", 422),
    "Compare": ("/compare?" + urllib.parse.urlencode({"base": BASE_RUN + "/", "new": NEW_RUN + "/"}), 200),
    "Compare chooser": ("/compare", 200),
    "Timeline": ("/timeline/" + TRACE, 200),
}
# What every page shares; chosen here, not read from the code: the page text, its headings and its tables
COMMON = ["body", "h1", "h2", "h3", "table", "td", "th", "td.num"]

PARSE = """
const rows = [];
for (const text of arguments[0]) {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(text);
  for (const rule of sheet.cssRules) {
    if (!rule.style) continue;
    for (const selector of rule.selectorText.split(',')) {
      for (const property of rule.style) rows.push([selector.trim(), property, rule.style.getPropertyValue(property)]);
    }
  }
}
return rows;
"""


@pytest.fixture(scope="module")
def declarations(tmp_path_factory):
    """{page: [(selector, property, value)]} of each page's <style> elements, in order."""
    root = make_compare_root(tmp_path_factory.mktemp("pages"))
    (root / "broken").mkdir()
    (root / "broken" / "rank0.pt.trace.json").write_text('{"traceEvents": [')
    with trace_browser(root) as (_, port):
        styles = {}
        for name, (path, status) in PAGES.items():
            got, _, body = http_get(f"http://127.0.0.1:{port}{path}", timeout=120)
            assert got == status, (name, got, body[:300])
            styles[name] = re.findall(r"<style>(.*?)</style>", body.decode(), re.S)
    with chromium() as driver:
        return {name: [tuple(row) for row in driver.execute_script(PARSE, texts)] for name, texts in styles.items()}


@pytest.mark.parametrize("name", PAGES)
def test_no_page_sets_a_property_of_a_selector_twice(declarations, name):
    """A page that adds its own copy of a common rule, or carries the common stylesheet twice, sets its properties a
    second time."""
    seen: dict[tuple[str, str], str] = {}
    twice = []
    for selector, prop, value in declarations[name]:
        if (selector, prop) in seen:
            twice.append(f"{selector} {{ {prop}: {seen[selector, prop]} }} and again {{ {prop}: {value} }}")
        seen[selector, prop] = value
    assert not twice, twice


def test_every_page_sets_the_common_rules_and_sets_them_alike(declarations):
    def common(name: str) -> dict[str, dict[str, str]]:
        rules: dict[str, dict[str, str]] = {}
        for selector, prop, value in declarations[name]:
            if selector in COMMON:
                rules.setdefault(selector, {})[prop] = value
        return rules

    overview = common("Overview of a trace")
    assert sorted(overview) == sorted(COMMON)
    assert overview["td"]["padding-left"] and overview["body"]["font-size"] == "14px"
    differing = {name: [s for s in COMMON if common(name).get(s) != overview[s]] for name in PAGES}
    assert not any(differing.values()), {name: selectors for name, selectors in differing.items() if selectors}
