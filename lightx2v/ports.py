"""Whether a server can listen where it is asked to, said before it starts: one line naming the real cause (the
address or the port) and the flag that changes it, instead of the server's own traceback seconds later.
``lightx2v-serve`` asks for both of its servers, ``python -m lightx2v.tensorboard`` for TensorBoard."""

from __future__ import annotations

import errno
import socket


def bind_problem(host: str, port: int, what: str, port_flag: str, host_source: str = "--host",
                 all_flag: str = "--bind-all") -> str | None:
    """Why the `what` server cannot listen on `host`:`port`, as one line that names the real cause (the address
    or the port) and the flag that changes it (``all_flag``: the one that listens on every interface); None when
    it can."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except socket.gaierror as exc:
        return (f"cannot listen on {host!r} ({host_source}): not an IP address, and no such host name "
                f"({exc.strerror}). Pick another with --host, or {all_flag}.")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            return (f"cannot listen on {host} ({host_source}): {reason}: it is not an address of this machine. "
                    f"Pick another with --host, or {all_flag}.")
        if exc.errno == errno.EACCES and port < 1024:
            return (f"cannot use port {port} for the {what} on {host}: {reason} (ports below 1024 need root). "
                    f"Pick another with {port_flag}.")
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            return f"cannot use port {port} for the {what} on {host}: {reason}. Pick another with {port_flag}."
        return f"cannot listen on {host}:{port} for the {what}: {reason} (check {host_source} and {port_flag})."
    return None
