"""The Overview's communication section (`lightx2v.trace_browser.comm_view`), fast, on synthetic runs of
tests/helpers/comm_trace.py: per step and rank the compute / exposed communication / idle bar with the summary's
figures, each rank's wait, the late rank's row and sentence, the straggler by the waits it caused; a single rank
without waits; no section without collectives."""

from __future__ import annotations

from lightx2v.trace_browser.overview import render_overview

from helpers.comm_trace import STEPS, Rank, late_in_step_2, summarize, write_run
from helpers.html_tree import parse


def section(html: str):
    tree = parse(html)
    return next((e for e in tree.elements() if e.tag == "section" and e.id == "communication"), None)


def rows(sec) -> list[list[str]]:
    """The table's rows with the step (a cell that spans its ranks' rows) repeated on each."""
    (body,) = [e for e in sec.elements() if e.tag == "tbody"][:1]
    out, step = [], ""
    for tr in (e for e in body.elements() if e.tag == "tr"):
        cells = [td.text().strip() for td in tr.elements() if td.tag == "td"]
        if len(cells) == 9:
            step = cells.pop(0)
        out.append([step, *cells])
    return out


def test_each_step_and_rank_has_its_bar_wait_and_the_late_rank_is_marked(tmp_path):
    run = summarize(write_run(tmp_path, late_in_step_2()))
    html = render_overview(run)
    sec = section(html)
    assert sec is not None
    table = rows(sec)
    assert [r[:2] for r in table] == [[f"ProfilerStep#{k}", f"rank {r}"] for k in (1, 2, 3) for r in (0, 1)]
    assert [r[-1] for r in table if r[0] == "ProfilerStep#2"] == ["5.000", "0.000"]  # rank 0 waited 5 ms
    s = run.ranks[0].communication.steps[1]
    label = (f"ProfilerStep#2, rank 0: compute {s.compute_us / 1000:.3f} ms, exposed communication "
             f"{s.exposed_us / 1000:.3f} ms, idle {s.idle_us / 1000:.3f} ms of {s.wall_us / 1000:.3f} ms")
    assert f'aria-label="{label}"' in html
    late_rows = [e for e in sec.elements() if e.tag == "tr" and "late" in e.classes]
    assert len(late_rows) == 1 and "rank 1" in late_rows[0].text()
    sentences = [e.text() for e in sec.elements() if e.tag == "p" and "late" in e.classes]
    assert sentences == ["ProfilerStep#2: the others waited 5.000 ms for rank 1, 5.000 ms at all_reduce"]
    assert "Straggler: rank 1 (rank1_host)</strong>: the others waited 1.667 ms per step for it" in html


def test_a_single_rank_has_its_section_without_waits(tmp_path):
    (one,) = late_in_step_2()[:1]
    run = summarize(write_run(tmp_path, [one]))
    sec = section(render_overview(run))
    assert sec is not None and all(r[-1] == "–" for r in rows(sec))
    assert not [e for e in sec.elements() if e.tag == "p" and "late" in e.classes]


def test_no_collectives_no_section(tmp_path):
    run = summarize(write_run(tmp_path, [Rank(rank=0, world=1, steps=STEPS, colls=[], compute=[(0, 10)])]))
    assert section(render_overview(run)) is None
