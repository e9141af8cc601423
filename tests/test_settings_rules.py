"""The settings registry's rules as pure logic (`lightx2v.settings`), fast: how each parser reads a variable's text,
which variables each program checks before it starts (serve: also those of the programs it starts), what a bad
value prints. tests/test_settings.py checks the same on the real programs and the docs' tables."""

from __future__ import annotations

import pytest

from lightx2v import settings
from lightx2v.settings import SettingError, get


@pytest.mark.parametrize("text,value", [("1", 1), (" 65535 ", 65535), ("6006", 6006)])
def test_a_port_is_a_number_from_1_to_65535(text, value):
    assert get("TENSORBOARD_PORT", {"TENSORBOARD_PORT": text}) == value


@pytest.mark.parametrize("text", ["0", "65536", "-1", "1.5", "abc", "¹", "²³", "٣", "１２", "+80", "8_0", "9" * 5000])
def test_a_port_outside_1_to_65535_or_not_a_number_is_refused(text):
    """Only ASCII digits: str.isdigit() also takes ¹ (int() refuses it) and ٣ (int() reads 3)."""
    with pytest.raises(SettingError) as raised:
        get("TENSORBOARD_PORT", {"TENSORBOARD_PORT": text})
    assert str(raised.value) == f"TENSORBOARD_PORT={text!r}: expected a port number 1-65535"


@pytest.mark.parametrize("text,value", [("1", True), ("true", True), ("ON", True), (" Yes ", True), ("0", False),
                                        ("false", False), ("Off", False), ("no", False)])
def test_a_switch_reads_its_on_and_off_words_in_any_case(text, value):
    assert get("LIGHTX2V_INFERENCE", {"LIGHTX2V_INFERENCE": text}) is value


@pytest.mark.parametrize("text", ["flase", "2", "enable", "y"])
def test_an_unknown_switch_word_is_refused_with_the_words_it_takes(text):
    with pytest.raises(SettingError) as raised:
        get("LIGHTX2V_INFERENCE", {"LIGHTX2V_INFERENCE": text})
    assert str(raised.value) == (f"LIGHTX2V_INFERENCE={text!r}: expected one of 1/true/on/yes (on) or "
                                 "0/false/off/no (off)")


@pytest.mark.parametrize("text,value", [("0.0.0.0", "0.0.0.0"), (" ::1 ", "::1"), ("gpu-box.lan", "gpu-box.lan")])
def test_a_bind_host_is_an_ip_address_or_a_host_name(text, value):
    assert get("LIGHTX2V_BIND_HOST", {"LIGHTX2V_BIND_HOST": text}) == value


@pytest.mark.parametrize("text", ["not a host", "a/b", "me@box", "box?x", "box#y"])
def test_a_bind_host_with_a_space_or_url_character_is_refused(text):
    with pytest.raises(SettingError, match="expected an IP address or a host name$"):
        get("LIGHTX2V_BIND_HOST", {"LIGHTX2V_BIND_HOST": text})


@pytest.mark.parametrize("text,value", [("http://h:9001/", "http://h:9001/"), (" https://x.example ",
                                                                              "https://x.example")])
def test_a_url_is_http_or_https(text, value):
    assert get("LIGHTX2V_PERFETTO_UI", {"LIGHTX2V_PERFETTO_UI": text}) == value


@pytest.mark.parametrize("text", ["ftp:/nowhere", "ui.perfetto.dev", "http://a b/", "httpx://a"])
def test_a_url_of_another_scheme_or_with_a_space_is_refused(text):
    with pytest.raises(SettingError, match=r"expected an http:// or https:// URL$"):
        get("LIGHTX2V_PERFETTO_UI", {"LIGHTX2V_PERFETTO_UI": text})


def test_an_unset_or_blank_variable_reads_as_its_default():
    assert get("LIGHTX2V_PERFETTO_UI", {}) == "https://ui.perfetto.dev"
    assert get("LIGHTX2V_PERFETTO_UI", {"LIGHTX2V_PERFETTO_UI": " \t"}) == "https://ui.perfetto.dev"
    assert get("TRACE_BROWSER_PORT", {"TRACE_BROWSER_PORT": ""}) == 9001
    assert get("LIGHTX2V_ALLOWED_HOSTS", {}) == ()


def test_get_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("TRACE_BROWSER_PORT", "9123")
    assert get("TRACE_BROWSER_PORT") == 9123
    assert settings.is_set("TRACE_BROWSER_PORT")
    monkeypatch.setenv("TRACE_BROWSER_PORT", "  ")
    assert not settings.is_set("TRACE_BROWSER_PORT")
    assert settings.is_set("TRACE_BROWSER_PORT", {"TRACE_BROWSER_PORT": "1"})
    assert not settings.is_set("TRACE_BROWSER_PORT", {})


def test_a_path_expands_the_home_folder(monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    assert get("LIGHTX2V_RESULTS_DIR", {"LIGHTX2V_RESULTS_DIR": " ~/runs "}) == "/home/someone/runs"
    assert get("LIGHTX2V_RESULTS_DIR", {}) == "save_results"


def test_a_name_list_drops_spaces_and_empty_items():
    assert get("LIGHTX2V_ALLOWED_HOSTS", {"LIGHTX2V_ALLOWED_HOSTS": " a.example, ,b ,"}) == ("a.example", "b")
    assert settings.split_names(",,") == ()


def test_names_among_names_every_unknown_name_and_the_known_ones():
    parse = settings.names_among(lambda: {"b", "a"})
    assert parse(" a , b,") == ("a", "b")
    with pytest.raises(ValueError) as one:
        parse("a,c")
    assert str(one.value) == "unknown name c; known: a, b"
    with pytest.raises(ValueError) as two:
        parse("c,a,d")
    assert str(two.value) == "unknown names c, d; known: a, b"
    assert settings.names_among(lambda: None)("any, thing") == ("any", "thing")
    assert parse.bad_example == "bogus"


# What each program checks before it starts: its own variables and, for serve, those of TensorBoard, the trace
# browser and the assets installer that it starts (a bad value must stop serve, not one of its children later).
CHECKED = {
    "serve": ["LIGHTX2V_TORCH_PROFILE_DIR", "LIGHTX2V_TENSORBOARD_PORT", "TENSORBOARD_PORT", "TRACE_BROWSER_PORT",
              "LIGHTX2V_BIND_HOST", "LIGHTX2V_RESULTS_DIR", "LIGHTX2V_TRACE_BROWSER_URL", "LIGHTX2V_ALLOWED_HOSTS",
              "LIGHTX2V_PERFETTO_UI", "LIGHTX2V_TB_SKIP_FIXES", "LIGHTX2V_TB_TRACE_VIEW_MAX_MB", "LIGHTX2V_ASSETS_DIR",
              "LIGHTX2V_SUPERVISOR_CONF", "LIGHTX2V_INFER_CMD"],
    "tensorboard": ["LIGHTX2V_TORCH_PROFILE_DIR", "TENSORBOARD_PORT", "TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST",
                    "LIGHTX2V_RESULTS_DIR", "LIGHTX2V_TRACE_BROWSER_URL", "LIGHTX2V_ALLOWED_HOSTS",
                    "LIGHTX2V_TB_SKIP_FIXES", "LIGHTX2V_TB_TRACE_VIEW_MAX_MB", "LIGHTX2V_ASSETS_DIR"],
    "trace_browser": ["TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST", "LIGHTX2V_RESULTS_DIR", "LIGHTX2V_TRACE_BROWSER_URL",
                      "LIGHTX2V_ALLOWED_HOSTS", "LIGHTX2V_PERFETTO_UI", "LIGHTX2V_ASSETS_DIR"],
    "capture": ["LIGHTX2V_TORCH_PROFILE_DIR", "LIGHTX2V_RESULTS_DIR"],
    "assets": ["LIGHTX2V_ASSETS_DIR"],
}


@pytest.mark.parametrize("program", sorted(CHECKED))
def test_each_program_reads_its_own_variables_and_those_of_the_programs_it_starts(program):
    assert [s.name for s in settings.read_by(program)] == CHECKED[program]


@pytest.mark.parametrize("name,bad", [("LIGHTX2V_TB_SKIP_FIXES", "bogus"), ("LIGHTX2V_PERFETTO_UI", "ftp:/x"),
                                      ("TRACE_BROWSER_PORT", "abc"), ("LIGHTX2V_TRACE_BROWSER_URL", "nowhere")])
def test_serve_refuses_a_bad_value_meant_for_a_program_it_starts(name, bad):
    with pytest.raises(SettingError, match=f"^{name}="):
        settings.check("serve", {name: bad})


def test_a_program_does_not_check_what_only_others_read():
    settings.check("trace_browser", {"LIGHTX2V_TB_SKIP_FIXES": "bogus", "TENSORBOARD_PORT": "abc"})
    settings.check("capture", {"TRACE_BROWSER_PORT": "abc"})


def test_a_bad_value_exits_2_with_one_line_naming_the_program_and_the_variable(capsys):
    with pytest.raises(SystemExit) as exited:
        settings.exit_on_bad_values("serve", {"TRACE_BROWSER_PORT": "abc"})
    assert exited.value.code == 2
    assert capsys.readouterr().err == "serve: TRACE_BROWSER_PORT='abc': expected a port number 1-65535\n"
    with pytest.raises(SystemExit):
        settings.exit_on_bad_values("serve", {"TRACE_BROWSER_PORT": "0"}, label="lightx2v.serve")
    assert capsys.readouterr().err.startswith("lightx2v.serve: TRACE_BROWSER_PORT='0': ")
    settings.exit_on_bad_values("serve", {})  # all unset: nothing printed, no exit
    assert capsys.readouterr().err == ""


def test_the_help_lists_the_programs_own_user_settings_with_defaults():
    text = settings.help_text("capture")
    assert text.splitlines() == [
        "environment (each flag's default comes from its variable; docs/settings.md):",
        "  LIGHTX2V_TORCH_PROFILE_DIR  the TensorBoard logdir captures land in (replaces tb_dir); the viewers watch it "
        "too (default: save_results/torch_profile)",
        "  LIGHTX2V_RESULTS_DIR        the folder the trace browser lists (captures, chrome traces, the demo's "
        "outputs) (default: save_results)",
    ]
    assert settings.help_text("nobody") == "environment (each flag's default comes from its variable; " \
                                           "docs/settings.md):"


def test_a_default_is_shown_in_words_unset_or_as_its_value():
    assert settings.SETTINGS["LIGHTX2V_ALLOWED_HOSTS"].shown_default == "none"
    assert settings.SETTINGS["LIGHTX2V_INFER_CMD"].shown_default == "the embedded demo"
    assert settings.SETTINGS["LIGHTX2V_STACK_PYTHON"].shown_default == "unset"
    assert settings.SETTINGS["LIGHTX2V_TB_SKIP_FIXES"].shown_default == "none"
    assert settings.SETTINGS["TRACE_BROWSER_PORT"].shown_default == "9001"
    assert settings.SETTINGS["BASE_IMAGE"].shown_default == "unset"


def test_a_text_or_path_parser_refuses_a_blank_value_saying_it_wants_one():
    # get() reads a blank variable as unset; the parsers themselves are what a caller with its own text uses
    for parse in (settings.parse_text, settings.parse_path, settings.parse_host, settings.parse_url):
        with pytest.raises(ValueError) as raised:
            parse(" \t")
        assert str(raised.value) == "expected a non-empty value"
    assert settings.parse_text("  docker.example/base:1 ") == "docker.example/base:1"


@pytest.mark.parametrize("text", ["X", "Xeon-box", "box-X.lan"])
def test_a_bind_host_may_hold_any_letter_including_an_upper_case_x(text):
    assert get("LIGHTX2V_BIND_HOST", {"LIGHTX2V_BIND_HOST": text}) == text


def test_declaring_a_setting_records_each_of_its_fields_once(monkeypatch):
    monkeypatch.setattr(settings, "SETTINGS", {})
    name = settings._declare("LIGHTX2V_EXAMPLE", 7, settings.parse_port, "an example", ["serve", "capture"],
                             scope=settings.INTERNAL, default_doc="seven")
    assert name == "LIGHTX2V_EXAMPLE"
    assert settings.SETTINGS == {name: settings.Setting(name, 7, settings.parse_port, "an example",
                                                        ("serve", "capture"), "internal", "seven")}
    plain = settings._declare("LIGHTX2V_PLAIN", None, settings.parse_text, "plain")
    assert settings.SETTINGS[plain] == settings.Setting(plain, None, settings.parse_text, "plain", (), "user", None)
    with pytest.raises(AssertionError, match="LIGHTX2V_PLAIN declared twice"):
        settings._declare(plain, None, settings.parse_text, "again")


def test_megabytes_are_whole_and_at_least_one():
    parse = settings.parse_megabytes
    assert parse(" 12 ") == 12 and parse("1") == 1
    for bad in ("0", "1.5", "-3", "12MB", "", "lots", "¹", "²³", "٣", "+5", "9" * 5000):
        with pytest.raises(ValueError) as raised:
            parse(bad)
        assert str(raised.value) == "expected a whole number of megabytes, 1 or more"
