"""A small read-only web page that lists captured traces and opens them in Perfetto with one click, or in the
offline views (Timeline, Overview) that need no internet in the browser.

`python -m lightx2v.trace_browser` serves the results root (default `save_results`); see `server`. Modules:
`files` (what is a trace, safe paths), `page` (the list), `offline` (the offline views' routes and links),
`timeline` and `overview` (those two pages).
"""
