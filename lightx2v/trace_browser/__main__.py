"""`python -m lightx2v.trace_browser`: list captured traces; open them in Perfetto or in the offline views.

Defaults come from the environment: root $LIGHTX2V_RESULTS_DIR (else save_results under the working
directory), port $TRACE_BROWSER_PORT (else 9001, the port Perfetto's "open by URL" mode needs),
host $LIGHTX2V_BIND_HOST (else 127.0.0.1), public URL $LIGHTX2V_TRACE_BROWSER_URL, Perfetto UI
$LIGHTX2V_PERFETTO_UI (else https://ui.perfetto.dev).
"""

from __future__ import annotations

import argparse
import sys

from lightx2v import hostcheck, settings
from lightx2v.program import program, whole_lines
from lightx2v.trace_browser.server import root_problem, serve


def main(argv=None) -> int:
    whole_lines()
    settings.exit_on_bad_values(settings.TRACE_BROWSER)
    get = settings.get
    parser = argparse.ArgumentParser(prog=program("lightx2v.trace_browser"), description=__doc__,
                                     epilog=settings.help_text(settings.TRACE_BROWSER),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=get(settings.RESULTS_DIR),
                        help="the folder to list (default $LIGHTX2V_RESULTS_DIR, else save_results)")
    parser.add_argument("--port", type=int, default=get(settings.TRACE_BROWSER_PORT),
                        help="default $TRACE_BROWSER_PORT, else 9001")
    parser.add_argument("--host", default=get(settings.BIND_HOST),
                        help="listen address (default $LIGHTX2V_BIND_HOST, else 127.0.0.1)")
    parser.add_argument("--url", default=get(settings.TRACE_BROWSER_URL),
                        help="the URL users open (written to <root>/.trace_browser/; default "
                             "$LIGHTX2V_TRACE_BROWSER_URL, else http://127.0.0.1:<port>/)")
    parser.add_argument("--perfetto-ui", default=get(settings.PERFETTO_UI),
                        help="default $LIGHTX2V_PERFETTO_UI, else https://ui.perfetto.dev")
    parser.add_argument(hostcheck.FLAG, action="append", default=[], metavar="NAME",
                        help="one more Host name to answer to (repeatable; also $LIGHTX2V_ALLOWED_HOSTS): a LAN "
                             "name, or the Host a proxy forwards. Loopback, IP addresses, this hostname and "
                             "the --url host are always allowed")
    parser.add_argument("--create-root", action="store_true",
                        help="create --root when it is missing (the stack's supervisord does; else an error)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0-65535, got {args.port}")
    try:
        hosts = hostcheck.build(args.allowed_host, args.url)
    except settings.SettingError as exc:
        parser.error(str(exc))
    problem = root_problem(args.root, args.create_root)
    if problem:
        parser.error(problem)
    try:
        serve(args.root, args.host, args.port, args.url, args.perfetto_ui, hosts)
    except OSError as exc:
        print(f"trace_browser: cannot serve {args.root} on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
