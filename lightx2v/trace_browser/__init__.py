"""A small read-only web page that lists captured traces and opens them in Perfetto with one click, or in the
offline views (Timeline, Overview) that need no internet in the browser.

`python -m lightx2v.trace_browser` serves the results root (default `save_results`); see `server`. Modules:
`files` (what is a trace, safe paths), `html_page` (the one page base: CSS, fill, cells), `page` (the list),
`offline` (the offline views' routes and links; `memo`: what it keeps between requests, made once per key),
`timeline` with `step_index` (where each step is, found once
per file), `window` (one step's or time range's events) and `gzip_seek` (a gzip trace read from decompression
points), `overview` with its sections `roofline` (how far from the limit), `flame` (where in your code) and
`comm_view` (communication per step and rank, who waited for whom), `merged` (one step of every rank on one
clock, for Perfetto UI),
`compare` (two captures), `capture_panel` (the Capture button).
"""
