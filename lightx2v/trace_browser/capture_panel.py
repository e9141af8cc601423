"""The trace browser's "Capture next call" panel: which processes write captures under the root, and a button
that arms one (`lightx2v.capture.control`, the same path as `python -m lightx2v.capture arm`).

Routes: GET `/api/capture` (the processes as JSON, a multi-rank job as one row `job:<id>` with its ranks), POST
`/api/capture` with `{"id": "<host>_<pid>"}` or `{"id": "job:<id>"}` (arm it; a job as a whole: `capture.jobs`).
The POST is the page's only write, so it is refused unless it comes from this page. Its `Host` has passed the
server's one Host check (`lightx2v.hostcheck`, every request: no DNS-rebinding page gets here); on top of that, the
`Origin` header must be this server's own origin (the Host it was asked by, or the public URL's), and the body must
be JSON (a cross-site form cannot send that without a CORS preflight, which this server never grants).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from http import HTTPStatus
from typing import Any, Optional

from lightx2v.capture.control import NotArmed, Process, arm, explain, find_processes, select
from lightx2v.capture.jobs import Job, arm_job, arm_state, explain_job, group, job_of

ROUTE = "/api/capture"
MAX_BODY = 4096
SHOWN_NOT_RUNNING = 5  # exited processes keep their status file (so arming them says "exited"); show the latest


def listing(root: str) -> list[dict[str, Any]]:
    """What the panel shows for each process or job, paths relative to the root where they are inside it."""
    entries = group(find_processes(root))  # newest heartbeat first
    running = [e for e in entries if e.state not in ("exited", "gone")]
    stopped = [e for e in entries if e.state in ("exited", "gone")]
    rows = []
    for entry in running + stopped[:SHOWN_NOT_RUNNING]:
        rows.append(_job_row(root, entry) if isinstance(entry, Job) else _process_row(root, entry))
    return rows


def _last(root: str, last: Any) -> Any:
    if not last:
        return None
    return {"finished_at": last.get("finished_at"), "calls": last.get("calls"), "error": last.get("error"),
            "label": last.get("label"), "run_dir": _relative(root, last.get("run_dir")),
            "traces": [_relative(root, t) for t in last.get("trace_paths") or []]}


def _process_row(root: str, p: Process) -> dict[str, Any]:
    s = p.status
    return {"id": p.id, "pid": p.pid, "host": p.host, "command": " ".join(s.get("argv") or []),
            "state": p.state, "armed": bool(s.get("armed")) and p.state == "running",
            "capturing": bool(s.get("capturing")), "armed_at": s.get("armed_at"),
            "armed_by": s.get("armed_by"), "captures": s.get("captures", 0),
            "last_capture": _last(root, s.get("last_capture")),
            "refused": p.remote_refused or p.not_running_reason(),
            "rank": s.get("rank", 0), "world_size": s.get("world_size", 1)}


def _job_row(root: str, job: Job) -> dict[str, Any]:
    """A job as one row: its ranks, its arm's state, its ranks' last capture (the newest)."""
    ranks = [_process_row(root, p) for p in job.ranks]
    newest = max((r for r in ranks if r["last_capture"]), key=lambda r: r["last_capture"]["finished_at"] or 0,
                 default=None)
    arm = arm_state(job) if job.state == "running" else job.state
    refused = next((p.remote_refused for p in job.ranks if p.remote_refused), None)
    return {"id": f"job:{job.id}", "pid": job.launcher_pid, "host": ", ".join(job.hosts),
            "command": ranks[0]["command"], "state": job.state, "armed": arm.startswith("ARMED"),
            "capturing": any(r["capturing"] for r in ranks), "armed_at": None, "armed_by": None,
            "captures": min(r["captures"] for r in ranks), "last_capture": newest and newest["last_capture"],
            "refused": refused or job.not_running_reason(), "rank": None, "world_size": job.world_size,
            "arm": arm, "ranks": ranks}


def refusal(headers, public_url: Optional[str]) -> Optional[str]:
    """Why a POST must be refused as not coming from this page, or None (its Host was checked already)."""
    host = headers.get("Host") or ""
    origin = headers.get("Origin")
    public = urllib.parse.urlsplit(public_url) if public_url else None
    if not origin:
        return "missing Origin header: arm from the page, or with `python -m lightx2v.capture arm`"
    if origin.rstrip("/") not in {f"http://{host}", *([f"{public.scheme}://{public.netloc}"] if public else [])}:
        return f"cross-origin request from {origin} refused"
    if (headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
        return "the body must be application/json"
    return None


def post(root: str, headers, body: bytes, public_url: Optional[str]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, answer) for an arm request."""
    problem = refusal(headers, public_url)
    if problem:
        return HTTPStatus.FORBIDDEN, {"ok": False, "message": problem}
    try:
        ident = json.loads(body or b"{}").get("id")
        if not isinstance(ident, str):
            raise ValueError("id must be a string")
    except (ValueError, AttributeError) as exc:
        return HTTPStatus.BAD_REQUEST, {"ok": False, "message": f"bad request: {exc}"}
    by = f"the trace browser (pid {os.getpid()})"
    try:
        processes = find_processes(root)
        if ident.startswith("job:"):
            job = job_of(group(processes), job_id=ident[len("job:"):])
            if job is None:
                raise NotArmed(f"no job with id {ident[len('job:'):]!r} writes captures here")
            answer = arm_job(job, by=by)
            return HTTPStatus.OK, {"ok": True, "message": explain_job(job, answer), "outcome": answer["outcome"]}
        (process,) = select(processes, ident=ident)
        answer = arm(process, by=by)
    except NotArmed as exc:
        return HTTPStatus.CONFLICT, {"ok": False, "message": str(exc)}
    return HTTPStatus.OK, {"ok": True, "message": explain(process, answer), "outcome": answer["outcome"]}


def _relative(root: str, path: Any) -> Any:
    if not isinstance(path, str):
        return path
    rel = os.path.relpath(path, os.path.realpath(root)) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def with_panel(page: str) -> str:
    """The trace list page with the panel added at the end of its body."""
    return page.replace("</body>", PANEL + "</body>", 1)


PANEL = """<section id=capture>
<h2>Capture next call</h2>
<p>Processes writing captures under this folder. <b>Capture next call</b> makes the next first
<code>.run()</code> of any call site in that process capture again (5 calls by default) into a new run directory;
TensorBoard lists it and this page shows it on reload. A torchrun job is one row: all its ranks capture the same
call.</p>
<div id=capture-message></div>
<table id=processes><thead><tr><th>Process</th><th>Command</th><th>State</th><th>Last capture</th><th></th></tr></thead>
<tbody><tr><td colspan=5>Loading ...</td></tr></tbody></table>
</section>
<script>
(() => {
  const clock = (t) => t ? new Date(t * 1000).toLocaleString() : '';
  const cell = (row, text, cls) => {
    const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td;
  };
  const say = (text) => { document.getElementById('capture-message').textContent = text; };
  async function arm(id, button) {
    button.disabled = true;
    try {
      const response = await fetch('/api/capture', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                    body: JSON.stringify({id: id})});
      say((await response.json()).message);
    } catch (error) { say('Could not reach the trace browser: ' + error); }
    shown = null;  // redraw even if nothing changed yet: the button comes back when the arm did not take
    refresh();
  }
  let shown = null;  // the listing the rows show: rebuilt only when it changes, so a click never lands on a row
                     // that a refresh is replacing
  async function refresh() {
    let text;
    try { text = await (await fetch('/api/capture')).text(); } catch (error) { return; }
    if (text === shown) return;
    shown = text;
    const processes = JSON.parse(text);
    const body = document.querySelector('#processes tbody');
    body.replaceChildren();
    if (!processes.length) {
      cell(body.insertRow(),
           'No process has written captures here yet (one shows up after its first capture).').colSpan = 5;
    }
    for (const p of processes) {
      const row = body.insertRow();
      row.dataset.id = p.id;
      cell(row, p.ranks ? p.id + ' (' + p.world_size + ' ranks on ' + p.host + ')' :
                p.id + (p.world_size > 1 ? ' (rank ' + p.rank + '/' + p.world_size + ')' : ''), 'path');
      cell(row, p.command, 'path');
      cell(row, p.ranks ? p.arm : p.state !== 'running' ? p.state : p.capturing ? 'capturing now' :
                p.armed ? 'armed' + (p.armed_at ? ' since ' + clock(p.armed_at) : '') + ': captures at its next run()'
                        : 'running, not armed', 'state');
      const last = p.last_capture;
      cell(row, last ? clock(last.finished_at) + ' -> ' + last.run_dir + ' (' + last.calls + ' calls' +
                       (last.error ? ', error: ' + last.error : '') + ')' : 'none', 'last');
      const td = row.insertCell();
      const button = document.createElement('button');
      button.className = 'arm';
      button.textContent = 'Capture next call';
      button.disabled = p.state !== 'running' || !!p.refused || p.armed;
      if (p.refused) button.title = p.refused;
      button.addEventListener('click', () => arm(p.id, button));
      td.append(button);
      if (p.refused && p.state === 'running') cell(row, p.refused, 'refused');
    }
  }
  refresh();
  setInterval(refresh, 2000);
})();
</script>
"""
