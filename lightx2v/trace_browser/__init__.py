"""A small read-only web page that lists captured traces and opens them in Perfetto with one click.

`python -m lightx2v.trace_browser` serves the results root (default `save_results`); see `server`.
"""
