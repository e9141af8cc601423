"""The Compare page's noise verdicts are the terminal's: on a pair of hand-made 5-step captures served by the real
trace browser, the page's verdict, its step-wall line and every row's real / noise label equal what
`python -m lightx2v.trace_summary --diff BASE NEW` prints (run in-process), and only the rows beyond noise are
coloured. One GEMM doubles (beyond noise), a kernel moves by 1 µs within its own per-step spread, and
`aten::select` takes 1 µs longer every step (separated, too small to count): both within noise."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from lightx2v.trace_summary.__main__ import main as trace_summary

from helpers.cli import in_process
from helpers.html_tree import body_rows, cells, parse
from helpers.kineto import Kineto
from helpers.procs import http_get, trace_browser

pytestmark = pytest.mark.slow

RED, GREEN = "#c0392b", "#2e8b57"
WALLS = {"base": [1000.0, 1010.0, 990.0, 1005.0, 995.0], "new": [1100.0, 1110.0, 1090.0, 1105.0, 1095.0]}
GEMM_US = {"base": 100.0, "new": 200.0}
GELU_US = {"base": [40.0, 42.0, 38.0, 41.0, 39.0], "new": [41.0, 43.0, 39.0, 42.0, 40.0]}  # +1 µs, overlapping
SELECT_US = {"base": 20.0, "new": 21.0}  # +0.001 ms every step


def side(root, name: str) -> str:
    """One 5-step capture in `root/<name>_run/`; the folder's path relative to the root."""
    k = Kineto()
    lo = 0.0
    for n, wall in enumerate(WALLS[name]):
        k.step(n + 1, lo, wall)
        k.op("aten::mm", lo + 10, [("kernel", "gemm", GEMM_US[name])])
        k.op("aten::gelu", lo + 400, [("kernel", "gelu", GELU_US[name][n])])
        k.op("aten::select", lo + 600, [], dur=SELECT_US[name])
        lo += wall
    k.write(root / f"{name}_run" / "rank0_host.pt.trace.json")
    return f"{name}_run/"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The Compare page of the pair (parsed) and what the terminal printed for the same two folders."""
    root = tmp_path_factory.mktemp("compare_noise")
    base, new = side(root, "base"), side(root, "new")
    with trace_browser(root) as (_, port):
        status, _, body = http_get(f"http://127.0.0.1:{port}/compare?"
                                   + urllib.parse.urlencode({"base": base, "new": new}), timeout=60)
    assert status == 200, body
    return parse(body.decode()), root / base, root / new


@pytest.fixture
def terminal(pair, capsys) -> str:
    _, base, new = pair
    status, out, err = in_process(trace_summary, capsys, "--diff", str(base), str(new))
    assert status in (0, None), err
    return out


# `  status  calls B>N  BASE  NEW  delta  %  noise  name`, under the op group, kernel and CPU op headings
ROW = re.compile(r"^  (?P<status>\S.*?)\s+\S+>\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(?P<noise>real|noise|\?)  (?P<name>.+)$")
SECTIONS = {"Op groups": "ops", "Kernels:": "kernels", "CPU ops:": "cpu-ops"}


def terminal_rows(out: str) -> dict[str, dict[str, str]]:
    """{page table: {row name: the terminal's noise word}} from the report's three change tables."""
    rows: dict[str, dict[str, str]] = {}
    table = None
    for line in out.splitlines():
        table = next((t for head, t in SECTIONS.items() if line.startswith(head)), table)
        m = ROW.match(line)
        if table and m:
            rows.setdefault(table, {})[m["name"]] = m["noise"]
    return rows


def page_rows(doc, table: str) -> dict[str, tuple[str, str, list[set[str]], list[str]]]:
    """{row name: (its class, its noise label, the Δ cells' classes, its bar's fills)}."""
    out = {}
    for row in body_rows(doc.find("table", cls=table)):
        cs = cells(row)
        judged = [c for c in cs if "judged" in c.classes]
        name = cs[0].own_text() if table == "ops" else cs[0].text()
        fills = [r.attrs["fill"] for r in cs[6].find_all("rect")]
        out[name] = (row.attrs.get("class", ""), judged[0].text() if judged else "", [cs[7].classes, cs[8].classes],
                     fills)
    return out


def test_the_page_s_verdict_and_step_wall_line_are_the_terminal_s(pair, terminal):
    doc = pair[0]
    lines = terminal.splitlines()
    assert doc.find("p", id="verdict").text() == lines[0]
    assert lines[0].startswith("NEW is") and "beyond noise" in lines[0]
    (wall,) = [line.strip() for line in lines if line.startswith("  step wall: ")]
    assert doc.find("p", cls="noise-line").text() == wall


def test_every_row_s_noise_label_is_the_terminal_s_and_only_real_ones_are_coloured(pair, terminal):
    doc = pair[0]
    expected = terminal_rows(terminal)
    assert expected["kernels"] == {"gemm": "real", "gelu": "noise"}  # the pair as designed
    assert expected["cpu-ops"]["aten::select"] == "noise"
    for table, rows in expected.items():
        shown = page_rows(doc, table)
        for name, word in rows.items():
            cls, label, deltas, fills = shown[name]
            assert label == word, (table, name)
            if word == "real":
                assert cls == "real" and all({"slower"} <= c or {"faster"} <= c for c in deltas), (table, name)
                assert fills[-1] in (RED, GREEN)
            else:  # within noise: grey, neither slower nor faster
                assert cls == "noise" and deltas == [{"num"}, {"num"}], (table, name, deltas)
                assert RED not in fills and GREEN not in fills, (table, name, fills)
