"""Finding an event by a kineto id (`lightx2v.trace_summary.ids`), fast: ids in file order and out of it, repeated
ids, missing ids, each answer worked out by hand. tests/test_trace_summary_launch_steps.py checks the launch
chain that uses it on whole traces, with their events shuffled."""

from __future__ import annotations

from array import array

from lightx2v.trace_summary.ids import NONE, IdIndex, nondecreasing


def test_ids_in_file_order_are_found_at_their_position_without_a_copy():
    ids = array("q", [3, 5, 8, 13])
    index = IdIndex(ids)
    assert [index.get(x) for x in (3, 5, 8, 13)] == [0, 1, 2, 3]
    assert index.keys is ids  # sorted already: no copy made


def test_ids_out_of_order_are_found_at_their_position_in_the_file():
    index = IdIndex(array("q", [40, 10, 30, 20]))
    assert [index.get(x) for x in (10, 20, 30, 40)] == [1, 3, 2, 0]


def test_an_id_that_no_event_carries_is_not_found():
    for ids in (array("q", [2, 4, 6]), array("q", [6, 2, 4])):
        index = IdIndex(ids)
        assert [index.get(x) for x in (1, 3, 5, 7)] == [NONE] * 4


def test_a_repeated_id_finds_its_last_event_in_file_order_sorted_or_not():
    assert IdIndex(array("q", [1, 7, 7, 7, 9])).get(7) == 3
    assert IdIndex(array("q", [7, 9, 7, 1, 7, 2])).get(7) == 4


def test_positions_name_what_the_index_answers_for_each_id():
    index = IdIndex(array("q", [50, 20]), positions=array("q", [900, 800]))
    assert (index.get(20), index.get(50), index.get(30)) == (800, 900, NONE)
    in_order = IdIndex(array("q", [20, 50]), positions=array("q", [800, 900]))
    assert (in_order.get(20), in_order.get(50)) == (800, 900)


def test_an_empty_index_finds_nothing():
    assert IdIndex(array("q")).get(0) == NONE


def test_order_is_judged_on_every_id_including_the_missing_marker():
    assert nondecreasing([1, 1, 2]) and nondecreasing([]) and nondecreasing([-1, 4])
    assert not nondecreasing([1, 2, -1, 3])  # a NO_ID (-1) after real ids breaks the order bisect needs
