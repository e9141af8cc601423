"""`python -m lightx2v.trace_browser`: list captured traces; open them in Perfetto or in the offline views.

Defaults come from the environment: root $LIGHTX2V_RESULTS_DIR (else save_results under the working
directory), port $TRACE_BROWSER_PORT (else 9001, the port Perfetto's "open by URL" mode needs),
host $LIGHTX2V_BIND_HOST (else 127.0.0.1), public URL $LIGHTX2V_TRACE_BROWSER_URL, Perfetto UI
$LIGHTX2V_PERFETTO_UI (else https://ui.perfetto.dev).
"""

from __future__ import annotations

import argparse
import os
import sys

from lightx2v.trace_browser.server import DEFAULT_PERFETTO_UI, serve


def main(argv=None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m lightx2v.trace_browser", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=env.get("LIGHTX2V_RESULTS_DIR") or "save_results")
    parser.add_argument("--port", type=int, default=int(env.get("TRACE_BROWSER_PORT") or 9001))
    parser.add_argument("--host", default=env.get("LIGHTX2V_BIND_HOST") or "127.0.0.1")
    parser.add_argument("--url", default=env.get("LIGHTX2V_TRACE_BROWSER_URL") or None,
                        help="the URL users open (written to <root>/.trace_browser.json)")
    parser.add_argument("--perfetto-ui", default=env.get("LIGHTX2V_PERFETTO_UI") or DEFAULT_PERFETTO_UI)
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0-65535, got {args.port}")
    try:
        serve(args.root, args.host, args.port, args.url, args.perfetto_ui)
    except OSError as exc:
        print(f"trace_browser: cannot serve {args.root} on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
