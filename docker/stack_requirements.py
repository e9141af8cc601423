"""Split this project's requirements (read from its installed metadata) for the image's two interpreters.

Run by the stack's venv python after a `--no-deps` install of the project: prints to `STACK_FILE` what the
viewer stack needs (the core requirements and the `serve` extra, without torch and pillow, which only the
embedded demo uses), and to `DEMO_FILE` what the demo needs that the base python3 lacks or has too old (the
core requirements but torch, which comes from the base image and is never replaced).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from packaging.requirements import Requirement

DIST = "lightx2v-trace-profiling"
DEMO_ONLY = {"torch", "pillow"}
FROM_BASE = {"torch"}


def spec(req: Requirement) -> str:
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def base_versions(names: list[str], base_python: str) -> dict[str, str]:
    probe = ("import importlib.metadata as m, json, sys\nfound = {}\nfor n in sys.argv[1:]:\n"
             "    try: found[n] = m.version(n)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(found))")
    out = subprocess.run([base_python, "-I", "-c", probe, *names], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main(stack_file: str, demo_file: str, base_python: str = "python3") -> None:
    reqs = [Requirement(r) for r in importlib.metadata.requires(DIST) or []]
    core = [r for r in reqs if r.marker is None]
    serve = [r for r in reqs if r.marker is not None and r.marker.evaluate({"extra": "serve"})]
    stack = [spec(r) for r in core + serve if r.name.lower() not in DEMO_ONLY]
    demo = [r for r in core if r.name.lower() not in FROM_BASE]
    have = base_versions([r.name for r in demo], base_python)
    missing = [spec(r) for r in demo if r.name not in have or not r.specifier.contains(have[r.name], prereleases=True)]
    with open(stack_file, "w") as f:
        f.write("".join(line + "\n" for line in stack))
    with open(demo_file, "w") as f:
        f.write("".join(line + "\n" for line in missing))


if __name__ == "__main__":
    main(*sys.argv[1:])
