"""The page base every trace browser page is built on (`lightx2v.trace_browser.html_page`), fast: the whole page it
wraps a body in, the figures as the pages print them (milliseconds, percents, counts, the sign for "not recorded"),
the cells and tables, and the inline SVG bars, each on values chosen here. tests/test_page_base.py checks the pages'
stylesheets in Chromium."""

from __future__ import annotations

from lightx2v.trace_browser.html_page import bar, count, escape, ms, name_cell, num_cell, page, pct, table

# --- escaping and the page ----------------------------------------------------------------------------------------


def test_escape_makes_text_and_quoted_attribute_values_safe():
    assert escape('<a href="x">Tom & Jerry\'s</a>') == "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#x27;s&lt;/a&gt;"
    assert escape(12) == "12" and escape(None) == "None"


def test_a_page_has_its_escaped_title_the_common_style_then_its_own_its_head_and_body():
    html = page("A<b", "<p>x</p>", css="p { color: red; }", head="<script>1</script>\n", body_attrs="data-state=x")
    assert html.startswith("<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>A&lt;b · LightX2V"
                           "</title>\n<style>\nbody { font: 14px system-ui, sans-serif;")
    assert html.endswith("svg.bar { vertical-align: middle; background: #f4f4f4; }\np { color: red; }</style>\n"
                         "<script>1</script>\n</head>\n<body data-state=x>\n<p>x</p>\n</body></html>\n")
    assert html.count("<style>") == 1


def test_a_page_without_attributes_head_or_css_has_a_bare_body_tag():
    html = page("T", "B")
    assert html.endswith("svg.bar { vertical-align: middle; background: #f4f4f4; }\n</style>\n</head>\n<body>\nB\n"
                         "</body></html>\n")


# --- figures ------------------------------------------------------------------------------------------------------


def test_times_read_in_milliseconds_with_three_decimals_and_a_dash_when_not_recorded():
    assert ms(1500.0) == "1.500"
    assert ms(12.0) == "0.012"
    assert ms(0.0) == "0.000"
    assert ms(None) == "–"


def test_percents_read_with_one_decimal_and_a_dash_when_not_recorded():
    assert pct(12.34) == "12.3"
    assert pct(0.0) == "0.0"
    assert pct(None) == "–"


def test_whole_counts_read_without_decimals_and_with_thousands_separators():
    assert count(1234.0) == "1,234"
    assert count(7) == "7"
    assert count(0.0) == "0"
    assert count(3.0000000001) == "3"  # a mean that is whole but for rounding noise (under a billionth)
    assert count(-2.0) == "-2"


def test_mean_counts_that_are_not_whole_read_with_two_decimals():
    assert count(2.5) == "2.50"
    assert count(2.6) == "2.60"
    assert count(2.4) == "2.40"
    assert count(1234.567) == "1,234.57"
    assert count(0.001) == "0.00"
    assert count(1e-9) == "0.00"  # a billionth off whole is no rounding noise
    assert count(-1.5) == "-1.50"


def test_a_count_not_recorded_reads_a_dash():
    assert count(None) == "–"


# --- cells and tables ---------------------------------------------------------------------------------------------


def test_a_figure_cell_is_right_aligned_and_takes_more_classes_in_its_one_class_attribute():
    assert num_cell("1.500") == "<td class=num>1.500</td>"
    assert num_cell(3) == "<td class=num>3</td>"
    assert num_cell("+2.0", "slower") == '<td class="num slower">+2.0</td>'


def test_a_name_cell_escapes_the_name_and_shows_the_full_name_on_hover():
    assert name_cell("a<b>") == "<td class=name>a&lt;b&gt;</td>"
    assert name_cell("gemm", 'void gemm<"f">()') == ('<td class=name title="void gemm&lt;&quot;f&quot;&gt;()">gemm'
                                                      "</td>")
    assert name_cell("x", "") == '<td class=name title="">x</td>'


def test_a_table_has_its_escaped_header_and_its_rows():
    assert table(["op", "a<b", ""], ["<tr><td>1</td></tr>", "<tr><td>2</td></tr>"], "ops") == (
        "<table class=ops><thead><tr><th>op</th><th>a&lt;b</th><th></th></tr></thead>"
        "<tbody><tr><td>1</td></tr><tr><td>2</td></tr></tbody></table>")


def test_a_table_of_two_classes_quotes_its_class_attribute():
    assert table(["x"], iter(["<tr></tr>"]), "efficiency ops") == (
        "<table class='efficiency ops'><thead><tr><th>x</th></tr></thead><tbody><tr></tr></tbody></table>")


def test_an_empty_table_is_the_sentence_when_one_is_given_and_an_empty_table_otherwise():
    assert table(["x"], iter([]), "ops", "No <ops>.") == "<p class=none>No &lt;ops&gt;.</p>"
    assert table(["x"], [], "ops") == "<table class=ops><thead><tr><th>x</th></tr></thead><tbody></tbody></table>"
    assert table(["x"], ["<tr></tr>"], "ops", "No ops.") == (
        "<table class=ops><thead><tr><th>x</th></tr></thead><tbody><tr></tr></tbody></table>")


# --- bars ---------------------------------------------------------------------------------------------------------


def svg(width: int, label: str, rects: str) -> str:
    return (f'<svg class=bar width="{width}" height="12" viewBox="0 0 {width} 12" role="img" aria-label="{label}">'
            f"{rects}</svg>")


def rect(x: str, w: str, fill: str) -> str:
    return f'<rect x="{x}" width="{w}" height="12" fill="{fill}"/>'


def test_a_bar_stacks_its_parts_from_the_left_in_proportion_to_the_scale():
    got = bar([(50.0, "#a"), (25.0, "#b"), (12.5, "#c")], 100.0, "step <1>", width=200)
    assert got == svg(200, "step &lt;1&gt;", rect("0.0", "100.0", "#a") + rect("100.0", "50.0", "#b")
                      + rect("150.0", "25.0", "#c"))


def test_a_bar_is_220_pixels_wide_unless_told():
    assert bar([(1.0, "#a")], 4.0, "l") == svg(220, "l", rect("0.0", "55.0", "#a"))


def test_a_scale_under_one_and_a_part_under_a_pixel_still_draw():
    assert bar([(0.25, "#a")], 0.5, "l", width=100) == svg(100, "l", rect("0.0", "50.0", "#a"))
    assert bar([(1.0, "#a"), (1.0, "#b")], 400.0, "l", width=200) == svg(
        200, "l", rect("0.0", "0.5", "#a") + rect("0.5", "0.5", "#b"))


def test_parts_past_the_scale_are_cut_at_the_bars_end():
    got = bar([(80.0, "#a"), (80.0, "#b"), (10.0, "#c")], 100.0, "l", width=100)
    assert got == svg(100, "l", rect("0.0", "80.0", "#a") + rect("80.0", "20.0", "#b"))
    assert bar([(300.0, "#a")], 100.0, "l", width=100) == svg(100, "l", rect("0.0", "100.0", "#a"))


def test_empty_and_negative_parts_draw_nothing_and_take_no_room():
    got = bar([(0.0, "#a"), (-10.0, "#b"), (10.0, "#c")], 100.0, "l", width=100)
    assert got == svg(100, "l", rect("0.0", "10.0", "#c"))


def test_a_bar_with_no_scale_is_empty():
    assert bar([(10.0, "#a")], 0.0, "l", width=100) == svg(100, "l", "")
    assert bar([(10.0, "#a")], -1.0, "l", width=100) == svg(100, "l", "")
    assert bar([], 10.0, "l", width=100) == svg(100, "l", "")
