"""A command's main(argv) called in this process, as its fast tests (and mutation runs) need it."""

from __future__ import annotations

from collections.abc import Callable


def in_process(main: Callable[[list[str]], int | None], capsys, *argv: str) -> tuple[int | str | None, str, str]:
    """main's exit status (argparse's SystemExit too), stdout, stderr."""
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err
