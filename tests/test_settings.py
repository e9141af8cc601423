"""The settings registry (`lightx2v/settings.py`): it agrees with the drop-in's own names, the docs list exactly its
user settings, nothing in the stack reads one of our variables behind its back, and a bad value of any variable
gives every program that reads it one line and exit status 2 (the cases are derived from the registry, so a new
variable is covered as soon as it is declared)."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v import settings
from lightx2v.settings import SETTINGS, USER

from conftest import REPO_ROOT, free_port, subprocess_env


# ------------------------------------------------------------------------------------------- the drop-in agrees
def test_the_drop_in_names_are_declared_with_its_defaults():
    from lightx2v.utils import torch_trace_profiler as dropin

    declared = {dropin.ENV_ENABLE: settings.TORCH_PROFILE, dropin.ENV_DIR: settings.TORCH_PROFILE_DIR,
                dropin.ENV_PORT: settings.HINT_PORT, dropin.ENV_REMOTE: settings.TORCH_PROFILE_REMOTE,
                dropin.ENV_MEMORY_SNAPSHOT: settings.TORCH_PROFILE_MEMORY_SNAPSHOT}
    for name, registry_name in declared.items():
        assert name == registry_name
        assert SETTINGS[name].scope == USER and settings.PROFILER in SETTINGS[name].read_by
    assert SETTINGS[dropin.ENV_DIR].default_doc == dropin.DEFAULT_TB_DIR
    port_default = {f.name: f.default for f in dataclasses.fields(dropin.TorchTraceProfileConfig)}["tensorboard_port"]
    assert port_default == settings.DEFAULT_TENSORBOARD_PORT == SETTINGS[settings.TENSORBOARD_PORT].default
    assert str(port_default) in SETTINGS[dropin.ENV_PORT].default_doc
    assert SETTINGS[dropin.ENV_ENABLE].default is True and SETTINGS[dropin.ENV_REMOTE].default is True
    assert set(dropin.ON_WORDS) == set(settings.ON_WORDS) and set(dropin.OFF_WORDS) == set(settings.OFF_WORDS)
    defaults = {f.name: f.default for f in dataclasses.fields(dropin.TorchTraceProfileConfig)}
    assert defaults["memory_snapshot"] is False and "off" in SETTINGS[dropin.ENV_MEMORY_SNAPSHOT].default_doc


def test_the_drop_in_reads_the_registry_s_on_off_words(tmp_path, monkeypatch):
    """Each off word of the registry turns the real profiler off (a plain call, nothing written); each on word
    leaves it on (one capture)."""
    import torch

    from lightx2v.utils.torch_trace_profiler import ENV_DIR, ENV_ENABLE, TorchTraceProfileContext, TorchTraceProfiler

    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE_REMOTE", "0")  # no watcher thread left in the test process
    calls = []

    def target(x):
        calls.append(1)
        return x + 1

    for words, captures in ((settings.OFF_WORDS, False), (settings.ON_WORDS, True)):
        for word in (*words, *(w.upper() for w in words)):
            logdir = tmp_path / f"{captures}_{word}"
            monkeypatch.setenv(ENV_DIR, str(logdir))
            monkeypatch.setenv(ENV_ENABLE, word)
            assert settings.get(ENV_ENABLE) is captures
            TorchTraceProfiler.reset_session()
            TorchTraceProfileContext(f"w{word}", wait=0, warmup=1, active=1).run(target, torch.ones(2))
            assert logdir.exists() is captures, word
    TorchTraceProfiler.reset_session()
    assert calls


def test_the_assets_package_s_own_names_are_declared():
    """lightx2v.assets stands alone in the image's assets stage, so it keeps its own names: the registry's."""
    import lightx2v.assets as assets
    import lightx2v.assets.__main__ as assets_main

    for name in (assets.ENV_ASSETS_DIR, assets.ENV_STACK_HOME, assets_main.ENV_NPM_REGISTRY,
                 assets_main.BUILD_ARG_REQUIRE):
        assert name in settings.SETTINGS, name


def test_capture_reads_the_drop_in_s_variable_name():
    source = (REPO_ROOT / "lightx2v" / "capture" / "__main__.py").read_text()
    assert '"LIGHTX2V_' not in source  # names come from the drop-in or the registry, never spelled out


# ----------------------------------------------------------------------------------------------- the docs agree
def table_names(doc: Path, heading: str) -> dict[str, str]:
    """{variable: its row} of the table under ``heading`` (up to the next heading of the same or a higher level)."""
    lines = doc.read_text().splitlines()
    (start,) = [i for i, line in enumerate(lines) if re.fullmatch(r"#+\s+" + re.escape(heading) + r"\s*", line)]
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    rows: dict[str, str] = {}
    for line in lines[start + 1:]:
        if re.match(r"#{1,%d}\s" % level, line):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]) if cells else []
        for name in names:
            assert name not in rows, f"{doc.name}: {name} listed twice"
            rows[name] = line
    return rows


@pytest.mark.parametrize("doc,heading", [("README.md", "Settings (environment variables)"),
                                         ("docs/zh/settings.md", "设置（环境变量）")])
def test_the_settings_tables_list_every_user_setting_and_no_other(doc, heading):
    rows = table_names(REPO_ROOT / doc, heading)
    user = {name for name, s in SETTINGS.items() if s.scope == USER}
    assert set(rows) - user == set(), f"{doc} lists variables the registry does not declare as user settings"
    assert user - set(rows) == set(), f"{doc} misses user settings"
    for name, row in rows.items():
        default = SETTINGS[name].default
        if SETTINGS[name].default_doc is None and isinstance(default, (int, str)) and not isinstance(default, bool):
            assert str(default) in row.split("|")[2], f"{doc}: {name}'s default is {default}"


# ------------------------------------------------------------------------ every read goes through the registry
OURS = re.compile(r"^(LIGHTX2V_[A-Z0-9_]+|TENSORBOARD_PORT|TRACE_BROWSER_PORT)$")
STANDALONE = {
    "lightx2v/settings.py": "the registry itself",
    "lightx2v/utils/torch_trace_profiler.py": "the drop-in stands alone in a user's checkout (names checked above)",
    "lightx2v/assets/__init__.py": "the image's assets stage copies lightx2v/assets alone (name checked above)",
    "lightx2v/assets/__main__.py": "the image's assets stage copies lightx2v/assets alone (name checked above)",
    "lightx2v/assets/trust.py": "reads pip's and OpenSSL's CA variables (PIP_CERT, SSL_CERT_FILE, ...), none of ours",
}


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def environment_reads(source: str) -> list[str]:
    """``lineno: source`` of each read of one of our variables (or of a variable named by a non-literal) from
    ``os.environ`` / ``environ`` / ``os.getenv``; assignments (setting a child's environment) are not reads."""
    tree = ast.parse(source)
    aliases = {"environ"} | {  # `env = os.environ` and `def f(env=os.environ)` name the environment too
        target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_os_environ(node.value)
        for target in node.targets if isinstance(target, ast.Name)} | {
        arg.arg for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for arg, default in zip(node.args.args[::-1], node.args.defaults[::-1], strict=False)
        if _is_os_environ(default)}

    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id in aliases) or _is_os_environ(node)

    def ours(arg: ast.AST) -> bool:
        return not isinstance(arg, ast.Constant) or bool(OURS.match(str(arg.value)))

    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and (
                    (func.attr in ("get", "pop") and is_environ(func.value)) or func.attr == "getenv"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            key = node.slice
        if key is not None and ours(key):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_outside_the_registry_reads_our_variables():
    reads = {}
    for path in sorted((REPO_ROOT / "lightx2v").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel not in STANDALONE and (found := environment_reads(path.read_text())):
            reads[rel] = found
    assert reads == {}, "read these through lightx2v.settings.get"


def test_the_read_finder_finds_reads():
    """The check above is only as good as its finder: every way of reading is found, writes and others' are not."""
    source = "\n".join([
        'import os', 'from os import environ', 'NAME = "LIGHTX2V_X"',
        'a = os.environ.get("TENSORBOARD_PORT")', 'b = environ["LIGHTX2V_BIND_HOST"]',
        'c = os.getenv("TRACE_BROWSER_PORT")',
        'd = os.environ.get(NAME)', 'e = environ.pop("LIGHTX2V_Y", None)',
        'os.environ["LIGHTX2V_TORCH_PROFILE"] = "0"', 'f = os.environ.get("LOCAL_RANK")', 'g = {}.get("LIGHTX2V_Z")',
        'env = os.environ', 'h = env.get("LIGHTX2V_A")', 'def f(e=os.environ):', '    return e["TENSORBOARD_PORT"]',
        'child = dict(env)', 'i = child["LIGHTX2V_B"]',
    ])
    assert [line.split(":")[0] for line in environment_reads(source)] == ["4", "5", "6", "7", "8", "13", "15"]


# ---------------------------------------------------------------------------------------------- bad values
# Each program and the variables with a refusable value it must check before it starts, written out (not read
# from the registry under test): serve checks those of TensorBoard and the trace browser too, which it starts.
BAD_VALUES = {"LIGHTX2V_TENSORBOARD_PORT": "abc", "TENSORBOARD_PORT": "abc", "TRACE_BROWSER_PORT": "abc",
              "LIGHTX2V_BIND_HOST": "not a host", "LIGHTX2V_TRACE_BROWSER_URL": "ftp:/nowhere",
              "LIGHTX2V_PERFETTO_UI": "ftp:/nowhere", "LIGHTX2V_TB_SKIP_FIXES": "bogus"}
CHECKED_BEFORE_START = {
    settings.SERVE: ["LIGHTX2V_TENSORBOARD_PORT", "TENSORBOARD_PORT", "TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST",
                     "LIGHTX2V_TRACE_BROWSER_URL", "LIGHTX2V_PERFETTO_UI", "LIGHTX2V_TB_SKIP_FIXES"],
    settings.TENSORBOARD: ["TENSORBOARD_PORT", "TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST",
                           "LIGHTX2V_TRACE_BROWSER_URL", "LIGHTX2V_TB_SKIP_FIXES"],
    settings.TRACE_BROWSER: ["TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST", "LIGHTX2V_TRACE_BROWSER_URL",
                             "LIGHTX2V_PERFETTO_UI"],
}


def bad_value_cases() -> list[tuple[str, str, str]]:
    return [(program, name, BAD_VALUES[name]) for program, names in CHECKED_BEFORE_START.items() for name in names]


def test_the_bad_value_cases_are_the_registrys_bad_examples():
    for name, bad in BAD_VALUES.items():
        assert SETTINGS[name].parse.bad_example == bad


# Flags that keep a program from touching the machine's usual ports should its check ever be skipped.
SAFE_ARGS = {
    settings.SERVE: lambda: ["--no-inference", "--port", str(free_port()), "--browser-port", str(free_port())],
    settings.TENSORBOARD: lambda: ["--port", str(free_port())],
    settings.TRACE_BROWSER: lambda: ["--port", str(free_port())],
    settings.CAPTURE: lambda: ["list"],
    settings.ASSETS: lambda: ["status"],
}


@pytest.mark.parametrize("program,name,bad", bad_value_cases())
def test_a_bad_value_is_one_line_naming_the_variable_and_exit_2(program, name, bad, tmp_path):
    clean = {n: "" for n in SETTINGS}
    result = subprocess.run([sys.executable, "-m", f"lightx2v.{program}", *SAFE_ARGS[program]()], cwd=tmp_path,
                            env=subprocess_env(**{**clean, name: bad}), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0] and repr(bad) in lines[0] and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_parsers_refuse_their_bad_examples_and_read_good_values():
    for setting in SETTINGS.values():
        if setting.parse.bad_example is not None:
            with pytest.raises(settings.SettingError, match=re.escape(setting.name)):
                settings.get(setting.name, {setting.name: setting.parse.bad_example})
        assert settings.get(setting.name, {}) == setting.default
        assert settings.get(setting.name, {setting.name: "  "}) == setting.default
    assert settings.get(settings.TENSORBOARD_PORT, {"TENSORBOARD_PORT": " 17000 "}) == 17000
    for text in ("0", "65536", "-1", "1.5", "abc"):
        with pytest.raises(settings.SettingError):
            settings.get(settings.TENSORBOARD_PORT, {"TENSORBOARD_PORT": text})
    assert settings.get(settings.BIND_HOST, {"LIGHTX2V_BIND_HOST": "::1"}) == "::1"
    assert settings.get(settings.TB_SKIP_FIXES, {"LIGHTX2V_TB_SKIP_FIXES": " rescan , all,"}) == ("rescan", "all")
    with pytest.raises(settings.SettingError, match="unknown name bogus; known: all, "):
        settings.get(settings.TB_SKIP_FIXES, {"LIGHTX2V_TB_SKIP_FIXES": "rescan,bogus"})


def test_names_among_checks_against_the_owner_s_names():
    parse = settings.names_among(lambda: {"a", "b"})
    assert parse("a, b") == ("a", "b")
    with pytest.raises(ValueError, match="unknown names c, d; known: a, b"):
        parse("a,c,d")
    assert settings.names_among(lambda: None)("anything") == ("anything",)
