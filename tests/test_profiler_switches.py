"""The drop-in's on/off environment switches (``_env_flag``): the usual words, and a word it does not know keeps
the default with one warning (per variable and value) instead of switching on."""

from __future__ import annotations

import logging

import pytest

from lightx2v.utils import torch_trace_profiler as dropin

VAR = "LIGHTX2V_TEST_SWITCH"


@pytest.fixture
def warnings_seen(monkeypatch, caplog):
    """No switch warned about yet, as in a new process; the records of the drop-in's warnings."""
    monkeypatch.setattr(dropin, "_FLAGS_WARNED", set())
    monkeypatch.delenv(VAR, raising=False)
    caplog.set_level(logging.WARNING, logger=dropin.__name__)

    def seen() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == dropin.__name__ and r.levelno == logging.WARNING]

    return seen


@pytest.mark.parametrize(("value", "default", "expected"), [
    ("1", False, True), ("true", False, True), ("TRUE", False, True), ("True", False, True),
    ("yes", False, True), ("YES", False, True), ("on", False, True), ("On", False, True),
    (" on ", False, True), ("\ttrue\n", False, True),
    ("0", True, False), ("false", True, False), ("FALSE", True, False), ("False", True, False),
    ("no", True, False), ("No", True, False), ("off", True, False), ("OFF", True, False),
    ("  0  ", True, False), (" no\t", True, False),
    ("", True, True), ("", False, False), ("   ", True, True), ("\t\n", False, False),
    # the words each way round: a known word wins over the default
    ("1", True, True), ("off", False, False),
])
def test_known_words_and_empty(monkeypatch, warnings_seen, value, default, expected):
    monkeypatch.setenv(VAR, value)
    assert dropin._env_flag(VAR, default) is expected
    assert warnings_seen() == []


def test_unset_is_the_default(warnings_seen):
    assert dropin._env_flag(VAR, True) is True
    assert dropin._env_flag(VAR, False) is False
    assert warnings_seen() == []


@pytest.mark.parametrize("value", ["flase", "ture", "2", "-1", "y", "n", "enable", "disabled", "of", "onn",
                                   "0 1", "t", "nope", "yes please"])
@pytest.mark.parametrize("default", [True, False])
def test_an_unknown_word_keeps_the_default_and_warns(monkeypatch, warnings_seen, value, default):
    monkeypatch.setenv(VAR, value)
    assert dropin._env_flag(VAR, default) is default
    (message,) = warnings_seen()
    assert VAR in message and repr(value) in message
    for word in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        assert word in message
    assert message.endswith(f"keeping the default: {'on' if default else 'off'}")


def test_the_warning_comes_once_per_variable_and_value(monkeypatch, warnings_seen):
    monkeypatch.setenv(VAR, "flase")
    for _ in range(5):
        assert dropin._env_flag(VAR, True) is True
    assert len(warnings_seen()) == 1
    monkeypatch.setenv(VAR, "ture")  # another value: said again
    assert dropin._env_flag(VAR, False) is False
    monkeypatch.setenv(VAR + "_OTHER", "flase")  # the same value of another variable: said again
    assert dropin._env_flag(VAR + "_OTHER", True) is True
    monkeypatch.setenv(VAR, "flase")  # back to the first: not again
    assert dropin._env_flag(VAR, True) is True
    seen = warnings_seen()
    assert len(seen) == 3 and "'ture'" in seen[1] and VAR + "_OTHER" in seen[2], seen


def test_a_typo_in_the_profiling_switch_keeps_it_on_and_warns_once(tmp_path, monkeypatch, warnings_seen,
                                                                   fresh_profiler_session):
    """Through the public path: ``LIGHTX2V_TORCH_PROFILE=flase`` neither turns profiling off silently nor is
    read as a new word: the default (on) stays, and the log says so once however many captures consult it."""
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE_REMOTE", "0")  # no watcher thread left in the test process
    monkeypatch.setenv(dropin.ENV_ENABLE, "flase")
    calls = []
    for _ in range(2):
        dropin.TorchTraceProfiler.reset_session()
        dropin.TorchTraceProfileContext("typo", tb_dir="tb", wait=0, warmup=1, active=1).run(calls.append, 1)
    assert len(calls) == 2 * 2 and dropin.TorchTraceProfiler.last_capture().trace_paths
    (message,) = [m for m in warnings_seen() if dropin.ENV_ENABLE in m]
    assert "'flase'" in message and message.endswith("keeping the default: on")
