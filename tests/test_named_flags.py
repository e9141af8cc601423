"""Every flag and variable a message, hint or doc names exists where it is named for.

A hint once said "start the server with --allowed-host gpubox.lan" to a server without that flag. Here each
command's own parser is asked for its flags (its ``--help``, run as users run it; TensorBoard's ``--helpfull``), and
every command line the docs, the README and the code's strings show is checked against the command it calls: a
flag after ``lightx2v-serve`` (or ``python -m lightx2v.serve``) must be ``lightx2v-serve``'s. Any other ``--flag``
written anywhere must be some command's of ours, or one of the foreign commands' below, each with the command it
belongs to. Every ``LIGHTX2V_*`` variable named must be one the code declares (the settings registry, the drop-in's
``ENV_*`` names).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest

from lightx2v import settings

from conftest import REPO_ROOT, subprocess_env

# our commands: the words that call them -> the module whose --help lists their flags
COMMANDS = {
    "lightx2v-serve": "lightx2v.serve", "lightx2v-trace-summary": "lightx2v.trace_summary",
    "lightx2v-trace-browser": "lightx2v.trace_browser", "lightx2v-tensorboard": "lightx2v.tensorboard",
    "lightx2v-capture": "lightx2v.capture", "lightx2v-assets": "lightx2v.assets",
    "lightx2v-install-profiler": "lightx2v.install_profiler", "lightx2v-demo": "lightx2v.infer",
}
MODULES = sorted(set(COMMANDS.values()))
SUBCOMMANDS = {"lightx2v.assets": ("install", "status")}  # their flags are in each subcommand's --help
SCRIPT_OF = {"benchmarks/gpu_check.sh": "benchmarks/gpu_check.py"}  # a wrapper that passes its flags on
CALL = re.compile(r"(?:-m\s+(lightx2v\.[a-z_]+(?:\.[a-z_]+)?)\b(?!\.)|(?<![\w./-])(lightx2v-[a-z-]+)\b(?!\.\w)"
                  r"|(?<![\w-])((?:benchmarks|tests/programs|scripts)/\w+\.(?:py|sh))\b)")
FLAG = re.compile(r"(?<![\w./-])--[a-zA-Z][\w-]*")
VARIABLE = re.compile(r"\bLIGHTX2V_[A-Z0-9_]*[A-Z0-9]\b")
END_OF_COMMAND = re.compile(r"\||;|&&|`|\)|\n")  # where one command line ends in a text

# Flags of other programs that our docs and hints name, by program (a flag here is not ours to check).
FOREIGN = {
    "torchrun": {"--standalone", "--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--master_addr",
                 "--master_port", "--rdzv_backend", "--rdzv_endpoint", "--rdzv_id", "--rdzv-backend",
                 "--rdzv-endpoint", "--rdzv-id", "--node-rank", "--master-addr", "--master-port"},
    "docker / docker compose": {"--gpus", "--rm", "--network", "--ipc", "--name", "--build", "--volume",
                                "--entrypoint", "--env", "--user", "--shm-size", "--no-cache", "--tag", "--file",
                                "--detach", "--profile", "--pull", "--follow", "--tail", "--publish", "--privileged",
                                "--progress", "--load", "--build-arg", "--platform", "--env-file", "--workdir",
                                "--interactive", "--tty", "--init", "--cap-add", "--runtime"},
    "pip / python": {"--upgrade", "--no-deps", "--index-url", "--extra-index-url", "--find-links", "--user",
                     "--break-system-packages", "--no-build-isolation", "--editable", "--quiet", "--version",
                     "--help", "--require-hashes", "--no-index", "--target", "--pre", "--system-site-packages"},
    "pytest": {"--durations", "--timeout", "--maxfail", "--lf", "--ff", "--collect-only", "--co", "--junitxml",
               "--basetemp", "--runslow", "--deselect", "--tb", "--showlocals", "--strict-markers"},
    "ssh / curl / git / npm / apt / supervisorctl / bash": {
        "--output", "--fail", "--silent", "--show-error", "--location", "--head", "--compressed", "--max-time",
        "--depth", "--branch", "--recurse-submodules", "--prefix", "--no-save", "--no-audit", "--no-fund",
        "--omit", "--no-install-recommends", "--configuration", "--serverurl", "--login", "--norc",
        "--variant", "--include", "--ignore-scripts", "--global", "--all", "--quiet", "--oneline"},
    "LightX2V's own scripts (the user's checkout)": {
        "--model_cls", "--task", "--model_path", "--config_json", "--prompt", "--negative_prompt",
        "--save_result_path", "--seed", "--image_path", "--use_prompt_enhancer", "--save_video_path",
        "--infer_steps", "--target_video_length", "--lora_path"},
    "Inductor / torch": {"--compile"},
    "Dockerfile (HEALTHCHECK, COPY --from), supervisord": {"--from", "--interval", "--retries", "--start-period",
                                                          "--timeout", "--nodaemon"},
    "docker compose in docker/smoke-gpu.sh, docker run --hostname": {"--project-name", "--wait-timeout", "--no-color",
                                                                     "--filter", "--hostname"},
    "npm / node, driven by lightx2v-assets": {"--cache", "--loglevel", "--no-input", "--pack-destination",
                                             "--use-system-ca"},
    "git, driven by lightx2v-install-profiler": {"--error-unmatch", "--is-inside-work-tree", "--porcelain"},
    "uv / venv / pip freeze / apt-get in docker/ and scripts/": {"--python", "--requirement", "--without-pip", "--yes",
                                                                "--disable-pip-version-check", "--exclude-editable"},
    "rsync, unshare / nsenter, torchrun's --local-addr, convmv (docs' recipes)": {"--exclude", "--uts", "--local-addr",
                                                                                  "--notest"},
}
FOREIGN_FLAGS = set().union(*FOREIGN.values())


def _help(*command: str) -> frozenset[str]:
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, (command, done.stderr[-2000:])
    return frozenset(f.split("=", 1)[0] for f in FLAG.findall(done.stdout))


@cache
def flags_of(command: str) -> frozenset[str] | None:
    """The long flags a command's ``--help`` lists: a module's (``python -m``; TensorBoard's launcher:
    ``--helpfull``, its own and ours; and each subcommand's), or a script's of the repository; None for a script
    that parses no flags (a shell script of its own)."""
    if command.endswith(".sh"):
        command = SCRIPT_OF.get(command, command)
        if command.endswith(".sh"):
            return None
    if command.endswith(".py"):
        text = (REPO_ROOT / command).read_text(encoding="utf-8")
        return _help(command, "--help") if "argparse" in text else None
    ask = "--helpfull" if command == "lightx2v.tensorboard" else "--help"
    return _help("-m", command, ask).union(*(_help("-m", command, sub, "--help")
                                             for sub in SUBCOMMANDS.get(command, ())))


def scripts_named() -> set[str]:
    return {m.group(3) for _, text in TEXTS for m in CALL.finditer(text) if m.group(3)}


def our_flags() -> frozenset[str]:
    """Our commands' flags and the repository's scripts' (a table may name a benchmark without its folder); their
    --help asked side by side (each a Python start: 30 of them)."""
    benchmarks = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "benchmarks").glob("*.py")}
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(flags_of, [*MODULES, *sorted(scripts_named() | benchmarks)]))
    return frozenset().union(*(flags or () for flags in found))


def _texts() -> list[tuple[str, str]]:
    """(where, text) for each doc page and for each string the package's code holds (an f-string's literal parts
    joined), the texts users read."""
    texts = [(str(p.relative_to(REPO_ROOT)), p.read_text(encoding="utf-8"))
             for p in sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md")])]
    for path in sorted((REPO_ROOT / "lightx2v").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                               for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            texts.append((f"{path.relative_to(REPO_ROOT)}:{node.lineno}", text))
    for path in sorted([*(REPO_ROOT / "docker").glob("*"), REPO_ROOT / "compose.yaml", REPO_ROOT / "Dockerfile",
                        *(REPO_ROOT / "scripts").glob("*.sh")]):
        if path.is_file():
            texts.append((str(path.relative_to(REPO_ROOT)), path.read_text(encoding="utf-8", errors="replace")))
    return texts


TEXTS = _texts()


def command_lines(text: str) -> list[tuple[str, str]]:
    """(module, the flags' part of its command line) for each call of one of our commands in ``text``: what
    follows the command up to the end of that command (a pipe, ``;``, ``&&``, a closing backtick or parenthesis,
    the line's end; a backslash continues the line), or to the next command."""
    text = text.replace("\\\n", " ")
    calls = [(m.start(), m.end(), m.group(1) or COMMANDS.get(m.group(2)) or m.group(3)) for m in CALL.finditer(text)]
    found = []
    for k, (_, end, module) in enumerate(calls):
        if module is None:
            continue
        stop = END_OF_COMMAND.search(text, end)
        limit = min(stop.start() if stop else len(text), calls[k + 1][0] if k + 1 < len(calls) else len(text))
        found.append((module, text[end:limit]))
    return found


def test_the_command_calls_are_found_as_written():
    assert command_lines("run `lightx2v-serve --port 1 --browser-port 2` then `python -m lightx2v.trace_summary "
                         "--diff a b | head --lines 3`") == [("lightx2v.serve", " --port 1 --browser-port 2"),
                                                              ("lightx2v.trace_summary", " --diff a b ")]
    assert command_lines("torchrun --nproc_per_node=2 -m lightx2v.infer \\\n  --seq_p_size 2") == [
        ("lightx2v.infer", "    --seq_p_size 2")]
    assert command_lines("from lightx2v.trace_summary import x; lightx2v-demo.py --x") == []


def test_every_flag_after_one_of_our_commands_is_that_commands():
    our_flags()  # every command's --help, side by side, once
    wrong = set()
    for where, text in TEXTS:
        for module, rest in command_lines(text):
            if "/" not in module and module not in MODULES:
                wrong.add(f"{where}: python -m {module}: not one of our commands ({', '.join(MODULES)})")
                continue
            if "/" in module and not (REPO_ROOT / module).is_file():
                wrong.add(f"{where}: {module}: no such script")
                continue
            flags = flags_of(module)
            for flag in FLAG.findall(rest) if flags is not None else ():
                flag = flag.split("=", 1)[0]
                if flag not in flags and flag not in FOREIGN_FLAGS:
                    wrong.add(f"{where}: {module} has no {flag}")
    assert sorted(wrong) == []


def test_every_flag_named_anywhere_is_ours_or_a_named_programs():
    known = our_flags() | FOREIGN_FLAGS
    unknown = sorted({f"{where}: {flag}" for where, text in TEXTS for flag in FLAG.findall(text)
                      if flag.split("=", 1)[0] not in known})
    assert unknown == []


def declared_variables() -> set[str]:
    """The settings registry's names and the drop-in's and the stack's ``ENV_*`` constants."""
    names = set(settings.SETTINGS)
    for path in (REPO_ROOT / "lightx2v").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                    isinstance(node.value.value, str) and VARIABLE.fullmatch(node.value.value):
                names.add(node.value.value)
    return names


def test_every_lightx2v_variable_named_is_one_the_code_declares():
    declared = declared_variables()
    unknown = sorted({f"{where}: {name}" for where, text in TEXTS for name in VARIABLE.findall(text)
                      if name not in declared})
    assert unknown == []


@pytest.mark.parametrize("planted", ["lightx2v-serve --allowd-host gpubox.lan", "python -m lightx2v.tensorboard "
                                     "--bind-all", "LIGHTX2V_ALLOWED_HOST=x"])
def test_a_planted_wrong_name_is_caught(planted):
    """The checks above on a text with one wrong name each (seen failing, as the 403 hint's --allowed-host was)."""
    declared = declared_variables()
    wrong = [flag for module, rest in command_lines(planted) for flag in FLAG.findall(rest)
             if flag not in flags_of(module)] + [v for v in VARIABLE.findall(planted) if v not in declared]
    assert len(wrong) == 1
