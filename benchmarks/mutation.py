"""Mutation score per module: how many small bugs (mutmut's mutants) the fast tests that cover a module catch.

    python benchmarks/mutation.py                                   # the modules changed vs main (git diff main...HEAD)
    python benchmarks/mutation.py lightx2v/hostcheck.py lightx2v/settings.py
    python benchmarks/mutation.py --survivors lightx2v/hostcheck.py # and list the mutants no test caught

A line coverage figure says a test ran the code; a mutation score says a test would notice it was wrong. For each
module the script copies the checkout (``lightx2v/``, ``tests/``, ``pyproject.toml``) into a scratch directory, tells
mutmut to mutate only that module and to run only the fast test files mapped to it below (``-m "not slow"``: never a
Docker, browser or torchrun test), runs it under ``nice -n 10`` with one worker (mutation runs are CPU-heavy and this
machine is shared), and prints a table: module, mutants, killed, survived, timeout, score %. The score is killed /
(mutants - the ones listed in ``EQUIVALENT``), timeouts counting as killed (a mutant that makes a test hang is
caught). Modules run one at a time, smallest first. Exit status 1 when a module is under ``--goal`` (85%).

A module without an entry in ``FAST_TESTS`` is reported and skipped: map it to the unit tests that cover it first.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 85.0
# a mutant whose tests take this many times their usual time is a timeout (caught); mutmut's default, 15 (with its
# CPU limit at twice that), lets each looping mutant of the step pass hold this shared machine for minutes
TIMEOUT_MULTIPLIER = 4.0

# module -> the fast tests that cover it: test files, and ``-k`` leaving out those that start a program in a child
# process (mutmut's copy can neither track nor switch mutants there; they are the end-to-end checks).
_DIFF = ["tests/test_diff_rules.py", "tests/test_trace_summary_diff.py", "-k", "not cli"]
_CAPTURE = ["tests/test_capture_rules.py", "tests/test_capture_states.py"]
# the one pass on hand-made traces, the H200 fixture and HTA's corpus (not the HTA cross-check: it imports HTA)
# (not the real CPU capture: seconds a mutant; test_launch_rules.py has the no-GPU case)
_ANALYSIS = ["tests/test_launch_rules.py", "tests/test_steps_rules.py", "tests/test_trace_summary_launch_steps.py",
             "tests/test_trace_summary_analysis.py", "tests/test_trace_corpus.py",
             "tests/test_trace_summary_attribution.py", "tests/test_diff_rules.py", "-k",
             "not importing and not agree_with_hta and not real_cpu and not cpu_trace_gzip"]
FAST_TESTS: dict[str, list[str]] = {
    "lightx2v/hostcheck.py": ["tests/test_host_check_rules.py"],
    "lightx2v/settings.py": ["tests/test_settings_rules.py", "tests/test_settings.py", "-k",
                             "not exit_2 and not drop_in_reads"],
    "lightx2v/trace_summary/noise.py": ["tests/test_noise_rules.py", "tests/test_trace_summary_noise.py", "-k",
                                        "not doubled_matmul and not smaller_than_the_noise"],
    "lightx2v/trace_summary/diff.py": _DIFF,
    "lightx2v/trace_summary/render_diff.py": _DIFF,
    # not the tests on real torch captures (a capture per run: seconds a mutant) nor the 20,000-event curve (2 s):
    # tests/test_memory_events.py has their rules on a few events each
    "lightx2v/trace_summary/memory.py": ["tests/test_memory_events.py", "tests/test_memory_rules.py",
                                         "tests/test_trace_summary_memory.py", "-k",
                                         "not json_and_the_capture_summary and not known_allocations and not "
                                         "a_leak_is_flagged and not without_memory_events and not "
                                         "curve_is_downsampled"],
    "lightx2v/trace_summary/snapshot.py": ["tests/test_memory_rules.py", "tests/test_memory_snapshot_reader.py",
                                           "-k", "not finds_each_ranks_snapshot"],
    "lightx2v/trace_browser/compare.py": ["tests/test_compare_rules.py", "tests/test_compare_page.py"],
    # the index and windows against a filter of the whole file written from the rule (not the server tests: slow)
    "lightx2v/trace_browser/step_index.py": ["tests/test_step_index_rules.py", "tests/test_window_rules.py",
                                             "tests/test_timeline_window.py"],
    "lightx2v/trace_browser/window.py": ["tests/test_window_rules.py", "tests/test_timeline_window.py"],
    "lightx2v/trace_browser/flame.py": ["tests/test_flame_rules.py", "tests/test_compare_page.py"],
    "lightx2v/trace_summary/intervals.py": ["tests/test_intervals_rules.py"],
    "lightx2v/trace_summary/ids.py": ["tests/test_ids_rules.py", "tests/test_launch_rules.py"],
    "lightx2v/trace_browser/gzip_seek.py": ["tests/test_gzip_seek.py"],
    # the step pass runs under every summary test: its own few, so a looping mutant times out in seconds, not minutes
    "lightx2v/trace_summary/steps.py": ["tests/test_steps_rules.py", "tests/test_trace_summary_launch_steps.py",
                                        "tests/test_trace_summary_analysis.py", "-k",
                                        "not importing and not real_cpu and not cpu_trace_gzip"],
    "lightx2v/trace_summary/launch.py": _ANALYSIS,
    "lightx2v/trace_summary/attribution.py": _ANALYSIS,
    "lightx2v/trace_summary/kernels.py": _ANALYSIS,
    "lightx2v/capture/jobs.py": _CAPTURE,
    "lightx2v/utils/torch_trace_profiler.py": ["tests/test_dropin_rules.py", "tests/test_dropin_more_rules.py",
                                               "tests/test_profiler_switches.py", "tests/test_profiler_environment.py",
                                               "tests/test_capture_states.py", "tests/test_capture_rules.py", "-k",
                                               "not typo_in_the_profiling_switch"],
    "lightx2v/capture/control.py": _CAPTURE,
    "lightx2v/trace_summary/enclosing.py": ["tests/test_enclosing_rules.py", "tests/test_launch_rules.py"],
    "lightx2v/trace_summary/ratios.py": ["tests/test_ratios_rules.py"],
    "lightx2v/trace_summary/peaks.py": ["tests/test_peaks_rules.py"],
    "lightx2v/trace_summary/optree.py": ["tests/test_optree_rules.py"],
    "lightx2v/trace_summary/cpu_ops.py": ["tests/test_cpu_ops_rules.py"],
    "lightx2v/trace_summary/efficiency.py": ["tests/test_efficiency_rules.py"],
    "lightx2v/trace_summary/efficiency_diff.py": ["tests/test_efficiency_diff_rules.py"],
    # the pass's rules on dicts, and typed against generic on a trace of each malformed class
    "lightx2v/trace_summary/collect.py": ["tests/test_collect_rules.py", "tests/test_typed_reading.py",
                                          "tests/test_halves.py", "-k",
                                          "collect_rules or malformed_class or rejected or collective or every_cut"],
    # a file read in halves: cut everywhere, damaged, its progress (not the corpus: 60 cases, seconds a mutant)
    "lightx2v/trace_summary/halves.py": ["tests/test_halves.py", "-k", "not a_trace_read_in_halves"],
    # workers forked in this process (mutants reach them); not the script started as a child process
    "lightx2v/trace_summary/parallel.py": ["tests/test_parallel_reading.py", "-k", "not main_guard"],
    # the models on hand-made shapes (not tests/test_trace_summary_flops.py: a torch capture per case)
    "lightx2v/trace_summary/flops.py": ["tests/test_flops_rules.py", "tests/test_flops_models_rules.py"],
    # the reader against json.load on hand-made documents, and its parts (a file's halves) cut everywhere and damaged
    # (not the H200 fixture's whole-file comparisons, the corpora, nor the real CPU capture: seconds a mutant)
    "lightx2v/trace_summary/reader.py": ["tests/test_reader_rules.py", "tests/test_trace_summary_reader.py",
                                         "tests/test_gzip_reading.py", "tests/test_typed_reading.py",
                                         "tests/test_halves.py", "-k",
                                         "not h200 and not skipping_drops and not corpus and not diff_json and not "
                                         "step_index and not overview and not along and not plain_twin and not "
                                         "a_trace_read_in_halves"],
    # names.py: its rules, and the short names of real kernels (not the summaries built from traces)
    "lightx2v/trace_summary/names.py": ["tests/test_names_rules.py", "tests/test_trace_summary_analysis.py", "-k",
                                        "names_rules or short_kernel or short_names"],
    "lightx2v/trace_summary/devices.py": ["tests/test_devices_rules.py"],
    "lightx2v/trace_summary/ranks.py": ["tests/test_ranks_rules.py"],
    "lightx2v/trace_summary/series.py": ["tests/test_series_rules.py"],
    "lightx2v/trace_summary/discover.py": ["tests/test_discover_rules.py"],
    # the one error type: its message and fields, as discovery and the command line report them
    "lightx2v/trace_summary/errors.py": ["tests/test_discover_rules.py", "tests/test_trace_summary_main_rules.py"],
    "lightx2v/trace_summary/render_efficiency.py": ["tests/test_render_efficiency_rules.py"],
    "lightx2v/trace_summary/render_frames.py": ["tests/test_render_frames_rules.py"],
    "lightx2v/trace_summary/render.py": ["tests/test_render_rules.py"],
    # analyze.py: the front over the one pass, on small hand-written traces (the real captures are left out)
    "lightx2v/trace_summary/analyze.py": ["tests/test_analyze_rules.py"],
    "lightx2v/trace_summary/model.py": ["tests/test_model_rules.py"],
    "lightx2v/trace_summary/frames_diff.py": ["tests/test_frames_diff_rules.py"],
    # frames.py: the rules on a frame tree, and the tree built from small hand-written traces (not the captures)
    "lightx2v/trace_summary/frames.py": ["tests/test_frames_rules.py", "tests/test_frame_tree_rules.py"],
    "lightx2v/trace_browser/files.py": ["tests/test_files_rules.py"],
    "lightx2v/trace_browser/roofline.py": ["tests/test_roofline_rules.py"],
    "lightx2v/trace_browser/html_page.py": ["tests/test_html_page_rules.py"],
    "lightx2v/trace_browser/page.py": ["tests/test_page_rules.py"],
    "lightx2v/trace_browser/capture_panel.py": ["tests/test_capture_panel_rules.py"],
    "lightx2v/trace_browser/timeline.py": ["tests/test_timeline_rules.py"],
    "lightx2v/trace_browser/overview.py": ["tests/test_overview_rules.py"],
    # the routes called in this process on a results folder made by the test (not the server tests: a child process)
    "lightx2v/trace_browser/offline.py": ["tests/test_offline_rules.py"],
    # the handler fed requests from memory, the discovery file, the root check (not the server tests: a child process)
    "lightx2v/trace_browser/server.py": ["tests/test_server_rules.py"],
    "lightx2v/trace_summary/summarize.py": ["tests/test_summarize_rules.py"],
    "lightx2v/trace_summary/hook.py": ["tests/test_hook_rules.py"],
    "lightx2v/trace_summary/__main__.py": ["tests/test_trace_summary_main_rules.py"],
    "lightx2v/capture/__main__.py": ["tests/test_capture_main_rules.py"],
    # main() in this process: its refusals, a taken port, and a real serve stopped by an interrupt
    "lightx2v/trace_browser/__main__.py": ["tests/test_trace_browser_main_rules.py"],
}

# module -> the only functions mutated in it, by mutmut's names for them (``x_name``; a method: ``xǁClassǁmethod``),
# for a module too large to mutate whole here: its score is then the score of those functions (see docs/development.md).
ONLY_FUNCTIONS: dict[str, list[str]] = {
    # the drop-in (1,870 lines, ~2,350 mutants): what runs in-process without a capture (switches, config checks,
    # call sites, file names and moves, the export's file handling and progress line on a stand-in profiler, a
    # capture's outputs, record and report, the output lines, the original module's names, the status file and
    # the requests read from files); left to the end-to-end tests: the capture itself (_Capture.run,
    # _capture_claimed, the runs of TorchTraceProfileContext and TorchTraceProfiler), torch's CUDA memory history,
    # the export watch's thread and RSS samples, process-group defaults, and the watcher thread with its c10d
    # job-arm polling (_watch, _poll_job, _job_store)
    "lightx2v/utils/torch_trace_profiler.py": [
        "x__env_flag", "x__warn_env_once", "x_whole_number", "x_env_path", "x__cut_short",
        "x__find_bad_field", "x__job_plan", "x__read_plan", "x__text", "x__with_rank_suffix", "x__slug",
        "x__size", "xǁ_JobArmǁmove", "xǁ_JobArmǁdescribe", "xǁ_Sessionǁ*",
        "xǁTorchTraceProfileConfigǁ*", "x_resolve_log_dir", "xǁTorchTraceProfilerǁ__init__",
        "xǁTorchTraceProfilerǁreset_session", "xǁTorchTraceProfilerǁsession_done", "xǁTorchTraceProfilerǁlast_capture",
        "xǁTorchTraceProfilerǁcapture_status", "xǁTorchTraceProfilerǁset_summary_handler", "xǁTorchTraceProfilerǁran",
        "xǁTorchTraceProfilerǁtry_claim", "xǁTorchTraceProfileContextǁ__init__", "xǁTorchTraceProfileContextǁconfig",
        "xǁ_Siteǁ*", "x__new_site", "x__qualified_name", "x__memory_snapshot_on", "x__snapshot_path",
        "x_write_memory_snapshot", "x__distributed_identity", "x__env_int", "x__shared_run_dir", "x__make_unique_dir",
        "x__process_start_time", "x__replaced_atomically", "x__remove_if_there", "xǁ_ExportStatsǁdescribe",
        "xǁ_ExportWatchǁ_report", "xǁ_Countedǁ*", "x__export_atomically", "x__format_bytes", "x__log",
        "x__viewing_hints", "x__fixed_tensorboard_command", "x__module_available", "x__hint_port",
        "x__discovery_entries", "x_trace_browser_url", "x__summary_handler", "x__capture_summary_lines",
        "x_make_on_trace_ready", "x_log_profile_start", "x_log_profile_done", "xǁ_RemoteControlǁstart_once",
        "xǁ_RemoteControlǁafter_capture", "xǁ_RemoteControlǁ_shown_state", "xǁ_RemoteControlǁ_take_request",
        "xǁ_RemoteControlǁ_write_status", "xǁ_RemoteControlǁstatus", "xǁ_RemoteControlǁ_key",
        "xǁ_RemoteControlǁ_request_job_arm", "xǁ_RemoteControlǁ_job_status", "xǁ_RemoteControlǁ_mark_exited",
        "xǁ_RemoteControlǁ_log_failure_once", "x__multi_rank_refusal",
        "xǁ_RemoteControlǁ__init__", "xǁ_JobArmǁ__init__", "xǁ_Captureǁ__init__", "xǁ_Captureǁ_output_root",
        "xǁ_Captureǁ_plan_outputs", "xǁ_Captureǁ_export", "xǁ_Captureǁ_stop", "xǁ_Captureǁ_rank_tag",
        "xǁ_Captureǁ_report_failure", "xǁ_Captureǁ_finish", "xǁ_Captureǁ_record", "xǁ_Captureǁ_report"],
    # the server: its request handling (the handler fed requests from memory), the discovery file and the root
    # check; not serve() (it blocks in serve_forever and sets the SIGTERM handler: left to the child-process tests)
    "lightx2v/trace_browser/server.py": [
        "xǁTraceBrowserServerǁ__init__", "xǁHandlerǁ*", "x_write_discovery", "x__remove_stale", "x_remove_discovery",
        "x_root_problem"],
}

# mutant -> why it cannot change behaviour (an equivalent mutant: no test can kill it). mutmut names a mutant
# after its module and function (``lightx2v.hostcheck.x_build__mutmut_5``; a method: ``xǁClassǁmethod``) and numbers
# it within the function, so a name holds while that function is unchanged; `mutmut show NAME` prints its diff.
_LOWERED = "urlsplit() lower-cases the host name, so stripping an upper-case X as well as the dot changes nothing"
_STRICT = "zip's strict only checks equal lengths, which these lists always have"
_NO_STATE = "a block without a state reads 'None' or 'XXXX' instead of '': none of them starts with 'active'"
_NAMELESS = ("the type's name is a fallback for an exception without a message: the unpickler raises none such "
             "(MemoryError aside)")
_AT_DEADLINE = ("a wait that ends at its deadline or a clock tick later says the same: no test can stop the "
                "monotonic clock on the deadline itself")
_POLL_PACE = "the pace of a polling loop: the same answer, at most a second later"
_GENERATION = ("a session generation only has to differ from every earlier one (a key, an equality test), on "
               "every rank alike: starting at 1, counting by 2 or downwards does")
_EARLIER_START = ("clip starting at an earlier interval: those end before the window's start and clip to nothing "
                  "(only slower)")
_PLANNED = "an arm past WAITING has had its plan (plan_job sets decided), so the wait returns at once"
_CHANGES = "the watcher only compares the job-arm change count with its last value: -1 or +2 is a change as +1 is"
_INT_ZERO = "sum() of no items starts at 0 instead of 0.0: the same number (==, and in the JSON)"
_IN_ORDER = ("the ops' External ids were just found ascending: checking again, or sorting them (a stable sort: "
             "positions 0, 1, 2, ...), gives the same index")
_CACHE = "a cache of keys built once: missing it builds the same key again"
_TAG_CASE = "HTML tag and attribute names are case-insensitive: </SECTION>, <BR>, <H3>, SELECTED are the same"
_DONE_FIRST = ("log_profile_done replaces the hints' first line, the only one showing the fallback result's label, "
               "format, rank, world size, calls and seconds (the other lines read the config and the folders)")
_FOLDER_ONLY = "only the fallback trace path's folder is read (where a trace browser is looked for), not its file name"
_GZIP_NAME = "gzip.GzipFile drops a .gz ending from the name it writes in the header itself"
_CHUNK = "the size of the pieces copied through gzip: the same bytes written, in other pieces"
_NOT_JSON = ("every value in the status is JSON already (str, int, float, None, lists, dicts): default=str is "
             "never called")
_SET_BY_START = ("start_once sets it before it sets status_path, and nothing reads it before then (the status file "
                 "is written and the watcher started only with a status_path)")
_TRUTH_ONLY = "only ever tested for truth (if / if not): None reads as False does"
_NONZERO = "inside `if delta` (or after `not delta` returned): the delta is never 0, so >= 0 and > 0 agree"
_SEVEN_ROWS = "the figures table always has its seven rows: the sentence for an empty one is never shown"
_UNSIGNED = ("an array of indices typed 'L' (unsigned) instead of 'l': indices are never negative, so it holds "
             "the same values (and compares equal)")
_ALWAYS_SORTED = ("sorting ops that are already in (start, -duration) order keeps that order (a stable sort): "
                  "the walk nests them the same, only slower")
_FLAG = "a bytearray flag only tested for truth: 2 is as true as 1"
_EMPTY_GET = "looking anything up in an empty dict finds None, as the shortcut gives"
_PLUS_ONE_EACH = ("one more unit on every entry's total (each starts at 1, not 0): the ranking by total is the same "
                  "(entries are only ranked)")
_SET_TOGETHER = ("a row's flops, bytes and dtype come from one cost (a cost's dtype is never '': unknown reads "
                 "'?'): none is set without the others")
_UNIT_NAMES = ("units are ops whose names are in shapes_of (the pass's MODELED, all in CLASS_OF), whose model's "
               "class is CLASS_OF's: neither the cost's class nor CLASS_OF's default is ever different")
_FALSE_NONE = "a flag only tested for truth: None is as false as False"
_CODEC_CASE = "codec names are case-insensitive: 'UTF-8' is 'utf-8'"
_NO_LEADING_BACKSLASH = ("the search starts at the event's '{': a backslash found is after it, never at 0, so < 0, "
                         "<= 0 and < 1 agree")
_WINDOW = "how the exact decode's window grows and fills: the same value or error, only found with more or less work"
_LEN_NONE = ("a shape left None then reaches len(None): cost() catches that TypeError and gives None, as the "
             "first test does")
_NO_DTYPE = "'' and 'XXXX' are alike no dtype name: the default is looked up either way"
_GZIP_MODE = "GzipFile's mode defaults to its file object's, opened 'rb'"
_AT_BRACE = "start is at an event's '{'"
_ORJSON_FAILS = "orjson given None fails, and the stdlib parser reads the same value (slower)"
_PIECE_OR_CUTS = ("the buffer's events decoded one cut at a time instead of as one piece: the same batch, slower "
                  "(bench_reading.py)")
_UNSIGNED_IDS = ("an array of thread or name ids typed 'L' (unsigned) instead of 'l': ids count up from 0, never "
                 "negative, so it holds the same values (and compares equal)")
_SPAN_TIE = "widening the span to a value equal to its end: the same span"
_MATCHED = ("_run_order sorts only folders whose name run_label matched (previous_runs groups by label): its "
            "no-match branch never runs")
# reasons for names, series, discover, render_*, frames*, files, roofline
_STRIPPED = ("_drop_params strips the text it returns (trailing spaces of the name, the spaces before its "
             "parameter list): the text never ends in a space")
_LEADING = ("a space at 0 stays on the base name, which _own_name strips: the same short name (short_name strips "
            "the name; only removing '(anonymous namespace)::' can leave a space there)")
_MIRRORED = "counting the brackets with the signs swapped reaches 0 at the same place"
_NO_SUCH_THREAD = ("an allocation on a thread without ops or frames: their nesting holds no thread None or NONE, "
                   "so looking either up finds no interval (NONE), as the shortcut gives")
_UNUSED_REST = "short_name throws away _split_angle's third part (the text after the template arguments)"
_ADD_ZERO = "adding a self time of 0 to a step's sum leaves it as it is"
_MS_NUMBER = "every caller gives _ms a time divided by the steps, never None: its '-' branch never runs"
_NO_FOLLOW = ("os.walk does not follow links to folders: the folders' inside-the-root filter drops none it "
              "would walk")
_CLASSIFIED = ("classify refuses a hidden name and one without a trace suffix as well: the early test only saves "
               "it the work")
_ISABS = "posixpath.isabs(rel) is rel.startswith('/'): either test alone refuses the same paths"
_TWO_DECIMALS = "101 x 0.0005 = 0.0505%, printed to two decimals, reads 0.05% as 100 x 0.0005 does"
_OPS_OF_A_LEAF = ("frames._Builder adds each value to one of its node's op rows too: a leaf without ops has no time "
                  "and is left out before its ops are read")
_REAL_SPREAD = ("a change beyond noise has a side of >= 2 steps with a median >= 5 us (its effect): its spread is "
                "never None")
_MAIN_NAME = "'__main__' is not in sys.stdlib_module_names: the guard never changes a frame's kind"
_NO_ROOT_WORK = "node 1's parent is the root: the ancestry walk stops at once for it, as for the root itself"
_SHIFTED = "each (frame, op) sum starts once at 1 instead of 0: all of a frame's ops shift alike, the top one stays"
_NO_GPU = ("has_gpu is False only for a trace without GPU events, whose frames hold no GPU time: percent(0, 0) is "
           "None as well")
_PLOTTED = "roofline_section plots only ops with an intensity and a rate: the 'or' fallback never applies"
_ROOTS_DIFFER = ("the runs' roots differ, so the tuples sort by (mtime, root) either way and never compare the "
                 "RunFiles")
# reasons for render.py, analyze.py, model.py
_WHOLE_PERCENT = ("a threshold printed as a whole percent: 101 x 0.05 = 5.05 and 101 x 0.20 = 20.2 read 5 and 20 as "
                  "100 x does")
_UNUSED_SHIFT = ("op_ts only feeds memory.summarize, which answers [] without memory events (and is not called "
                 "without them): shifting it then changes nothing")
_TABLES_DELETED = ("_asdict deletes each rank's tables from the converted dict: converting them first (not set to "
                   "None) gives the same document, only slower")
_OWN_INDEX = "frame_tree builds the same FrameIndex itself when it is not given the pass's (only slower)"
# reasons for trace_browser/window.py
_FRAMES_DECODED = ("a window without frames drops Python frames by their cat: decoding them instead of skipping "
                   "them gives the same events (only slower)")
_ORJSON_REFUSED = ("orjson refusing the bytes falls back to json.loads of the piece's right bytes, which reads the "
                   "same events (only slower)")
_NO_OWNER = "owner()'s 'no step' is only tested by j >= 0: -2 is as negative as -1"
# reasons for trace_browser/step_index.py
_ASCII_INDEX = "the index file is written by json.dumps (ASCII only): any locale's encoding reads it back alike"
_PLACEHOLDER = ("step_index, build_index's only caller, sets the index's size and mtime_ns right after: the "
                "placeholders are never read")
_NO_STEP = "a step number is only tested by k >= 0 (and compared with one): -2 is as much no step as -1"
_NO_OWNER_YET = ("the first id's owner is compared with a step number k >= 0 only: None, -2 and -3 equal none of "
                 "them alike")
# reasons for trace_browser/flame.py
_NOT_A_FRAME = "layout tells its items apart only by what == 'frame': any other tag is an op, as 'op' is"
_NARROWER_AFTER = ("items are placed largest first: after a box too narrow to draw every later one is as narrow, so "
                   "no drawn box reads x again")
_ROOT_SHARE = "_share is only given the root's value as total, > 0 (layout draws nothing otherwise): never the '–'"
_LAST_PART = "the last part of a split on every '/' (or on the last two) is the last part of a split on the last one"
_QUOTE_SAFE = "quote() never escapes letters: safe='XXXX' quotes what safe='' does"
_NO_ROWS = "the longest figure's default is only taken with no rows, when no bar is drawn to scale by it"
_INT_SIZE = "a rank's file size is always an int (os.stat): format_bytes' text for None never shows"
_SIDES_READ = ("unreachable: summarize_run (without keep_going) raises TraceError for a rank it cannot read, so "
               "each side has a rank and compare_runs never raises its ValueError here")
_WINDOW_INDEX = "range_window without the trace's index reads the whole file for the same events (only slower)"
_HEADER_CASE = "HTTP header names are case-insensitive (the handler's email.message headers): 'host' finds Host"
_MADE_IF_MISSING = ("makedirs runs only once the root was found missing: exist_ok matters only if another process "
                    "creates it in between")
_UNRANKED = ("the files without a rank all get one middle key (None, 0 or 1) after the ranked ones (the first "
             "key): they sort by worker among themselves either way, None == None never comparing with <")
_TQDM_FILE = "tqdm writes to sys.stderr when given no file (file=None): the same stream"
_ARGPARSE_NONE = "argparse's default for an option not given is None"
_DIFF_TOP = ("the diff reads each side's tables, efficiency classes and frame tree, none cut to --top (render_diff "
             "cuts its rows itself): sides summarized with every row give the same diff")
_TABLES = "analyze_trace always sets a summary's tables: the test is never false"
_PASSED = "main passes every argument of _diff: its defaults are never used"
_PATH_SETTINGS = ("the capture command reads only path settings ($LIGHTX2V_TORCH_PROFILE_DIR, $LIGHTX2V_RESULTS_DIR), "
                  "which take any value: checking them (or, for another program name, none) never exits")
EQUIVALENT: dict[str, str] = {
    "lightx2v.hostcheck.x_host_name__mutmut_16": _LOWERED,
    "lightx2v.hostcheck.x_build__mutmut_5": "the hostname is lower-cased before the strip: " + _LOWERED,
    "lightx2v.hostcheck.x_build__mutmut_14": _LOWERED,
    # settings.py
    "lightx2v.settings.x__host__mutmut_3": "ip_address(None) raises the ValueError a host name raises: every value "
                                           "then takes the name check, which no IP address fails (no space, /@?#)",
    "lightx2v.settings.x_help_text__mutmut_13": "the width is used only to pad the lines of a non-empty list",
    # capture/jobs.py
    "lightx2v.capture.jobs.xǁJobǁdescribe__mutmut_45": _STRICT,
    "lightx2v.capture.jobs.xǁJobǁdescribe__mutmut_48": _STRICT,
    "lightx2v.capture.jobs.xǁJobǁdescribe__mutmut_49": _STRICT,
    "lightx2v.capture.jobs.x_wait_for_job_capture__mutmut_67": _AT_DEADLINE,
    "lightx2v.capture.jobs.x_wait_for_job_capture__mutmut_84": _POLL_PACE,
    # capture/control.py
    "lightx2v.capture.control.x_find_control_dirs__mutmut_20": "follow_symlinks=None is false as False is",
    "lightx2v.capture.control.x__surely_dead__mutmut_3": "pid 0 names our own process group: os.kill(0, 0) succeeds, "
                                                         "so it is not surely dead either way",
    "lightx2v.capture.control.x__surely_dead__mutmut_4": "pid 1 is init, which always exists: not surely dead "
                                                         "either way",
    "lightx2v.capture.control.x__float__mutmut_2": "a missing exit time reads as 1970 plus 0 or 1 s: older than any "
                                                   "real one, and as far past the age limit",
    "lightx2v.capture.control.x_arm__mutmut_26": _AT_DEADLINE,
    "lightx2v.capture.control.x_arm__mutmut_28": _POLL_PACE,
    "lightx2v.capture.control.x_wait_for_capture__mutmut_3": _AT_DEADLINE,
    "lightx2v.capture.control.x_wait_for_capture__mutmut_20": _POLL_PACE,
    # the drop-in (its ONLY_FUNCTIONS)
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁ_arm_locked__mutmut_4": _GENERATION,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁ_arm_locked__mutmut_5": _GENERATION,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_43": _GENERATION,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_44": _GENERATION,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁ__init____mutmut_7": _GENERATION,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁrelease__mutmut_7": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁrelease__mutmut_8": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjoin_job__mutmut_9": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjoin_job__mutmut_10": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁplan_job__mutmut_6": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁplan_job__mutmut_7": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁplan_job__mutmut_16": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁplan_job__mutmut_17": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_35": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_36": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_47": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_48": _CHANGES,
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_4": _PLANNED,
    # the drop-in's in-process functions (widened ONLY_FUNCTIONS)
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_20":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_21":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_22":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_23":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_24":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_25":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_26":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_28":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_29":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_33":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_35":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_46":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_47":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_56":
        _DONE_FIRST,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_54":
        _FOLDER_ONLY,
    "lightx2v.utils.torch_trace_profiler.x_log_profile_done__mutmut_55":
        _FOLDER_ONLY,
    "lightx2v.utils.torch_trace_profiler.x__new_site__mutmut_12":
        _STRICT,
    "lightx2v.utils.torch_trace_profiler.x__new_site__mutmut_15":
        _STRICT,
    "lightx2v.utils.torch_trace_profiler.x__new_site__mutmut_16":
        _STRICT,
    "lightx2v.utils.torch_trace_profiler.x__summary_handler__mutmut_4":
        "this file sits two levels below its package (lightx2v.utils): partition and "
        "rpartition of 'lightx2v.utils' both give 'lightx2v'",
    "lightx2v.utils.torch_trace_profiler.x_trace_browser_url__mutmut_21":
        "returning at the root folder instead of breaking out of the loop returns the same None",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ_take_request__mutmut_21":
        "a request file that is no JSON object has no id either way: request.get('id') is None",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ_take_request__mutmut_22":
        "as xǁ_RemoteControlǁ_take_request__mutmut_21",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ_write_status__mutmut_37":
        _NOT_JSON,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ_write_status__mutmut_40":
        _NOT_JSON,
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_15":
        "growing is only tested for truth: '' and None both mean no partial file to measure",
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_38":
        _GZIP_NAME,
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_44":
        _GZIP_NAME,
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_45":
        _GZIP_NAME,
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_60":
        "GzipFile over a file object opened 'wb' takes its mode from it: None is 'wb'",
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_71":
        _CHUNK,
    "lightx2v.utils.torch_trace_profiler.x__export_atomically__mutmut_74":
        _CHUNK,
    "lightx2v.utils.torch_trace_profiler.x_whole_number__mutmut_3":
        "no text reads as 'XXXX' instead of '': neither is digits, both are no number",
    "lightx2v.utils.torch_trace_profiler.xǁ_Captureǁ__init____mutmut_13":
        "'' and None both name no logdir: after_capture compares it with the watcher's, never ''",
    "lightx2v.utils.torch_trace_profiler.x__cut_short__mutmut_20":
        "one byte more of the trace's end read: the rule looks at its last non-blank byte, within both",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_2": _TRUTH_ONLY,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_17": _TRUTH_ONLY,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_5": _SET_BY_START,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_7": _SET_BY_START,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_15": _SET_BY_START,
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_9":
        "armed_at is shown only when armed_generation is the session's, and the note that sets that sets it too",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_10":
        "as xǁ_RemoteControlǁ__init____mutmut_9, for armed_by",
    "lightx2v.utils.torch_trace_profiler.xǁ_RemoteControlǁ__init____mutmut_16":
        "written_state is only compared with _shown_state()'s tuple: '' and None both differ from it",
    "lightx2v.utils.torch_trace_profiler.xǁ_JobArmǁ__init____mutmut_9":
        "an arm's generation is only compared with a session generation (an int): '' and None both differ",
    "lightx2v.utils.torch_trace_profiler.xǁ_Sessionǁjob_turn__mutmut_22":
        "an ARMED arm is always the session's job: only its ends (ABANDONED, MISSED) and "
        "CAPTURING clear it, so the and reads as the or",
    # intervals.py
    "lightx2v.trace_summary.intervals.x_merge__mutmut_5": "setting the end to the value it already has changes nothing",
    "lightx2v.trace_summary.intervals.x_clip__mutmut_4": _EARLIER_START,
    "lightx2v.trace_summary.intervals.x_clip__mutmut_17": "float('INF') is the same infinity",
    "lightx2v.trace_summary.intervals.x_clip__mutmut_18": _EARLIER_START,
    "lightx2v.trace_summary.intervals.x_clip__mutmut_21": "an interval starting at the window's end clips to nothing, "
                                                          "and so does every one after it: not breaking adds none",
    # noise.py
    "lightx2v.trace_summary.noise.x_noise_pct__mutmut_6": "an empty side's median is never used (fewer than 2 steps)",
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_5": "the side tag only orders equal values; 1 or 2 sort "
                                                               "the same after 0",
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_8": "every doubled rank is written before it is read",
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_34": "every doubled rank one higher shifts the observed "
                                                                "sum and each subset's sum alike: the same p",
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_43": _STRICT,
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_46": _STRICT,
    "lightx2v.trace_summary.noise.x_mann_whitney_p__mutmut_47": _STRICT,
    # snapshot.py
    "lightx2v.trace_summary.snapshot.x__summaries__mutmut_57": _NO_STATE,
    "lightx2v.trace_summary.snapshot.x__summaries__mutmut_59": _NO_STATE,
    "lightx2v.trace_summary.snapshot.x__summaries__mutmut_62": _NO_STATE,
    "lightx2v.trace_summary.snapshot.x_user_frame__mutmut_6": "a frame without a file name reads 'None' instead of '': "
                                                              "neither ends with .py",
    "lightx2v.trace_summary.snapshot.x_load_snapshot__mutmut_24": _NAMELESS,
    "lightx2v.trace_summary.snapshot.x_load_snapshot__mutmut_25": _NAMELESS,
    "lightx2v.trace_summary.snapshot.x_user_frame__mutmut_8": "as x_user_frame__mutmut_6",
    "lightx2v.trace_summary.snapshot.x_user_frame__mutmut_11": "a frame without a file name reads 'XXXX': it does "
                                                               "not end with .py either",
    # render_diff.py
    "lightx2v.trace_summary.render_diff.x_render_diff__mutmut_32": "a side has at least as many ranks as there are "
                                                                   "pairs: two pairs make 'b.ranks > 1' true anyway",
    "lightx2v.trace_summary.render_diff.x_render_diff__mutmut_85": _STRICT,
    "lightx2v.trace_summary.render_diff.x_render_diff__mutmut_88": _STRICT,
    "lightx2v.trace_summary.render_diff.x_render_diff__mutmut_89": _STRICT,
    "lightx2v.trace_summary.snapshot.x__live_at__mutmut_3": "the action after ``index`` is undone last: an alloc "
                                                            "there is popped, whatever frames it recorded",
    # trace_summary/memory.py
    "lightx2v.trace_summary.memory.x_memory_problem__mutmut_49": "Total Reserved is the last key looked at: break "
                                                                 "ends the loop as continue does",
    # trace_summary/kernels.py, attribution.py, launch.py
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_11": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_14": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_15": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_101": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_104": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_105": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_114": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_118": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_119": _STRICT,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_33": _INT_ZERO,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_41": _INT_ZERO,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_146": _INT_ZERO,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_154": _INT_ZERO,
    "lightx2v.trace_summary.kernels.x_gpu_work__mutmut_108": "merging no intervals gives an empty Spans, as the "
                                                             "shortcut does",
    "lightx2v.trace_summary.attribution.x_launches__mutmut_5": _STRICT,
    "lightx2v.trace_summary.attribution.x_launches__mutmut_9": _STRICT,
    "lightx2v.trace_summary.attribution.x_launches__mutmut_10": _STRICT,
    "lightx2v.trace_summary.attribution.x_group_keys__mutmut_6": _STRICT,
    "lightx2v.trace_summary.attribution.x_group_keys__mutmut_9": _STRICT,
    "lightx2v.trace_summary.attribution.x_group_keys__mutmut_10": _STRICT,
    "lightx2v.trace_summary.attribution.x_group_keys__mutmut_11": _CACHE,
    "lightx2v.trace_summary.attribution.x_group_keys__mutmut_12": _CACHE,
    "lightx2v.trace_summary.launch.x_launch_chain__mutmut_115": "with no External id at all, trusting it links "
                                                                "nothing",
    "lightx2v.trace_summary.launch.x__ops_by_external_id__mutmut_5": "an empty index finds no id whatever its "
                                                                     "arrays' type code",
    "lightx2v.trace_summary.launch.x__ops_by_external_id__mutmut_8": _IN_ORDER,
    "lightx2v.trace_summary.launch.x__ops_by_external_id__mutmut_10": _IN_ORDER,
    "lightx2v.trace_summary.launch.x__ops_by_external_id__mutmut_11": _IN_ORDER,
    "lightx2v.trace_summary.launch.x__ops_by_external_id__mutmut_21": "op indices typed 'Q' (unsigned) instead "
                                                                      "of 'q': indices are never negative, so the "
                                                                      "same values",
    "lightx2v.trace_summary.launch.x__labels__mutmut_17": "only an op that is not NONE is compared with last_op: it "
                                                          "differs from a start of None as from NONE",
    # trace_summary/enclosing.py
    "lightx2v.trace_summary.enclosing.xǁEnclosingǁwalk__mutmut_3": _STRICT,
    "lightx2v.trace_summary.enclosing.xǁEnclosingǁwalk__mutmut_6": _STRICT,
    "lightx2v.trace_summary.enclosing.xǁEnclosingǁwalk__mutmut_7": _STRICT,
    "lightx2v.trace_summary.enclosing.x_by_thread_in_order__mutmut_8": _UNSIGNED,
    "lightx2v.trace_summary.enclosing.x_by_thread_in_order__mutmut_23": _UNSIGNED,
    # trace_summary/peaks.py
    "lightx2v.trace_summary.peaks.x_peak_tflops__mutmut_19": "a peak's tflops are keyed by dtype names only: "
                                                             "looking up no column (None) finds None, as the "
                                                             "shortcut gives",
    # trace_summary/optree.py
    "lightx2v.trace_summary.optree.x_op_tree__mutmut_3": _ALWAYS_SORTED,
    "lightx2v.trace_summary.optree.x_op_tree__mutmut_19": "check=None is false as False is",
    "lightx2v.trace_summary.optree.x_op_tree__mutmut_35": "the walk's check never fails on the order the walk was "
                                                          "sorted into: checking it gives the same result",
    # trace_summary/cpu_ops.py
    "lightx2v.trace_summary.cpu_ops.x_cpu_op_stats__mutmut_8": _STRICT,
    "lightx2v.trace_summary.cpu_ops.x_cpu_op_stats__mutmut_11": _STRICT,
    "lightx2v.trace_summary.cpu_ops.x_cpu_op_stats__mutmut_12": _STRICT,
    "lightx2v.trace_summary.cpu_ops.x_cpu_op_stats__mutmut_15": "a self time of exactly 0 set to 0: the same number "
                                                                "(x - x is +0.0; only a file's dur of -0.0 would "
                                                                "then print 0.0 instead of -0.0)",
    # trace_summary/efficiency.py
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_12": _UNSIGNED,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_119": "thread ids typed 'L' (unsigned) instead of 'l': "
                                                                  "they are never negative",
    "lightx2v.trace_summary.efficiency.x__units__mutmut_44": _UNSIGNED,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_27": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_30": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_31": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_136": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_139": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_140": _STRICT,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_39": _EMPTY_GET,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_102": _FLAG,
    "lightx2v.trace_summary.efficiency.x__units__mutmut_30": _FLAG,
    "lightx2v.trace_summary.efficiency.x__units__mutmut_36": _FLAG,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_132": "the first GPU event's op differs from None as "
                                                                  "from NONE unless it is NONE, and then both find "
                                                                  "no unit",
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_174": _PLUS_ONE_EACH,
    "lightx2v.trace_summary.efficiency.x__classes__mutmut_35": _PLUS_ONE_EACH,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_211": _SET_TOGETHER,
    "lightx2v.trace_summary.efficiency.x_efficiency__mutmut_212": _SET_TOGETHER,
    "lightx2v.trace_summary.efficiency.xǁ_Groupǁ__init____mutmut_7": "_rank_kernels sets every group's labels "
                                                                     "before any row reads them",
    "lightx2v.trace_summary.efficiency.x__op_row__mutmut_29": _UNIT_NAMES,
    "lightx2v.trace_summary.efficiency.x__op_row__mutmut_32": _UNIT_NAMES,
    "lightx2v.trace_summary.efficiency.x__op_row__mutmut_34": _UNIT_NAMES,
    "lightx2v.trace_summary.efficiency.x__op_row__mutmut_35": _UNIT_NAMES,
    "lightx2v.trace_summary.efficiency.x__classes__mutmut_20": "with no row of known dtype _rates(0, 0, 0) gives "
                                                               "(None, None, None) too",
    # trace_summary/collect.py
    **{f"lightx2v.trace_summary.collect.xǁCollectedǁ__init____mutmut_{n}": _UNSIGNED_IDS
       for n in (24, 27, 40, 43, 64, 67, 86, 97, 100)},
    "lightx2v.trace_summary.collect.xǁCollectedǁ__init____mutmut_118": "float('INF') is the same infinity",
    "lightx2v.trace_summary.collect.xǁCollectedǁ__init____mutmut_121": "float('-INF') is the same infinity",
    **{f"lightx2v.trace_summary.collect.xǁCollectedǁfeed__mutmut_{n}": _SPAN_TIE for n in (122, 124, 313, 315)},
    **{f"lightx2v.trace_summary.collect.xǁCollectedǁfeed_records__mutmut_{n}": _SPAN_TIE for n in (128, 130, 297, 299)},
    **{f"lightx2v.trace_summary.collect.xǁCollectedǁ{f}__mutmut_{n}": "a batch without a usable X event's ts keeps "
       "no timed event: the base it returns is never used" for f, n in (("_base_of", 33), ("_base_of_records", 20))},
    # trace_summary/flops.py
    "lightx2v.trace_summary.flops.x__mm__mutmut_9": _LEN_NONE,
    **{f"lightx2v.trace_summary.flops.x__attention__mutmut_{n}": _LEN_NONE for n in (9, 10, 11)},
    **{f"lightx2v.trace_summary.flops.x__conv__mutmut_{n}": _LEN_NONE for n in (6, 7)},
    "lightx2v.trace_summary.flops.x__scaled_mm__mutmut_9": _LEN_NONE,
    "lightx2v.trace_summary.flops.x__fill__mutmut_4": "a shape left None then reaches math.prod(None): cost() "
                                                      "catches that TypeError and gives None, as the test does",
    "lightx2v.trace_summary.flops.x__conv__mutmut_68": "groups is only read for a transposed convolution, and "
                                                       "every transposed lowering has a groups argument: the "
                                                       "default for the others is never read",
    "lightx2v.trace_summary.flops.x__addmm__mutmut_9": _LEN_NONE,
    "lightx2v.trace_summary.flops.x__bmm__mutmut_10": _LEN_NONE,
    "lightx2v.trace_summary.flops.x__bmm__mutmut_11": _LEN_NONE,
    "lightx2v.trace_summary.flops.x__matmul__mutmut_6": _LEN_NONE,
    "lightx2v.trace_summary.flops.x__linear__mutmut_8": _LEN_NONE,
    "lightx2v.trace_summary.flops.x_cost__mutmut_4": "an op without a model then calls None: cost() catches that "
                                                     "TypeError and gives None; dims that are no list fit no model",
    "lightx2v.trace_summary.flops.xǁ_Argsǁitemsize__mutmut_8": _NO_DTYPE,
    "lightx2v.trace_summary.flops.xǁ_Argsǁdtype__mutmut_8": _NO_DTYPE,
    "lightx2v.trace_summary.flops.xǁ_Argsǁitemsize__mutmut_10": "itemsize reads the default's size, not its name",
    "lightx2v.trace_summary.flops.xǁ_Argsǁdtype__mutmut_9": "dtype reads the default's name, not its size",
    "lightx2v.trace_summary.flops.x_signature__mutmut_8": "signature reads shapes and types only, never the "
                                                          "concrete inputs",
    **{f"lightx2v.trace_summary.flops.x__matmul__mutmut_{n}": _STRICT for n in (58, 61, 62, 71, 74, 75)},
    # trace_summary/halves.py
    **{f"lightx2v.trace_summary.halves.x_find_cut__mutmut_{n}": "the first bytes are read to see the document's "
       "'{' after a byte order mark or whitespace: more of them (all, 65), or X stripped too (a document starting "
       "with X is no trace: its first half fails and one pass reads it), give the same answers" for n in (26, 27, 28)},
    "lightx2v.trace_summary.halves.x__json_size__mutmut_20": "a signed trailer below 0 gains 2**32 in the loop: the "
                                                             "unsigned value",
    **{f"lightx2v.trace_summary.halves.x__json_size__mutmut_{n}": "after seek(-4, SEEK_END) any read gets the same "
       "four bytes" for n in (21, 22)},
    **{f"lightx2v.trace_summary.halves.x_read_halves__mutmut_{n}": "the child's byte count: a RawValue starts at 0, "
       "fork is Linux's default context, counts are never negative" for n in (5, 6, 10)},
    "lightx2v.trace_summary.halves.x_read_halves__mutmut_11": "a count starting at 1 tells one byte early and one "
                                                              "less at the end: the same total",
    "lightx2v.trace_summary.halves.x_read_halves__mutmut_16": "on_read(0) moves no bar",
    **{f"lightx2v.trace_summary.halves.x_read_halves__mutmut_{n}": "the dict pass gives the same answers as the "
       "typed one (tests/test_typed_reading.py), only slower (bench_reading.py)" for n in (29, 33, 35, 58, 62, 64)},
    **{f"lightx2v.trace_summary.halves.x_read_halves__mutmut_{n}": "analyze catches NotACut and reads the file in "
       "one pass: its words are never shown" for n in (89, 90, 92)},
    # trace_summary/reader.py
    "lightx2v.trace_summary.reader.x_last_cut__mutmut_1": "rfind's end None is the buffer's length",
    "lightx2v.trace_summary.reader.x_last_cut__mutmut_13": _AT_BRACE + ": a '{' right after it is no cut",
    **{f"lightx2v.trace_summary.reader.x_last_cut__mutmut_{n}": "a '{' is found after start >= 0, never at 0"
       for n in (14, 15)},
    **{f"lightx2v.trace_summary.reader.x_last_cut__mutmut_{n}": _AT_BRACE + ", no whitespace: the walk back stops "
       "there either way" for n in (20, 30)},
    "lightx2v.trace_summary.reader.x_generic_value__mutmut_1": _ORJSON_FAILS,
    "lightx2v.trace_summary.reader.x__typed_event__mutmut_2": _ORJSON_FAILS,
    "lightx2v.trace_summary.reader.x_generic_value__mutmut_10": _CODEC_CASE,
    **{f"lightx2v.trace_summary.reader.x_inflating__mutmut_{n}": _GZIP_MODE for n in (6, 8, 12, 14)},
    **{f"lightx2v.trace_summary.reader.xǁTraceStreamǁ_gunzip_with_zlib__mutmut_{n}": _GZIP_MODE for n in (11, 13)},
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_gunzip_with_zlib__mutmut_1": _FALSE_NONE,
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_gunzip_with_zlib__mutmut_2": "zlib's reader failing goes to zlib "
        "again, which fails at the same byte in the same words",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_gunzip_with_zlib__mutmut_4": "closing a part's reader closes the "
                                                                               "gzip reader in it",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_gunzip_with_zlib__mutmut_22": "the bytes skipped were read once "
        "already: the file does not end before them",
    **{f"lightx2v.trace_summary.reader.xǁ_PartReaderǁread__mutmut_{n}": "a part's end left unset: the next read "
       "of the spent stream gets no bytes and sets it" for n in (5, 33)},
    "lightx2v.trace_summary.reader.xǁ_PartReaderǁread__mutmut_20": "at its end a part reads 0 bytes, gets none "
                                                                    "and ends the same way",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_fill__mutmut_10": "on_read(0) moves no bar",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ__init____mutmut_40": _FALSE_NONE,
    **{f"lightx2v.trace_summary.reader.xǁTraceStreamǁ_event_batches__mutmut_{n}": _PIECE_OR_CUTS for n in (13, 14)},
    **{f"lightx2v.trace_summary.reader.xǁTraceStreamǁ_typed_piece__mutmut_{n}": _PIECE_OR_CUTS
       for n in (2, 12, 13, 14)},
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_event_batches__mutmut_17": _FALSE_NONE,
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_cut_events__mutmut_16": _FALSE_NONE,
    **{f"lightx2v.trace_summary.reader.xǁTraceStreamǁ_cut_events__mutmut_{n}": _NO_LEADING_BACKSLASH for n in (55, 56)},
    "lightx2v.trace_summary.reader.x__skip_ws__mutmut_7": "the whitespace pattern matches the empty string: there "
                                                          "is always a match",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_document__mutmut_29": _FALSE_NONE,
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_document__mutmut_31": _FALSE_NONE,
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_document__mutmut_2": "one chunk more read before looking for the "
                                                                       "byte order mark: the same bytes",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_7": _WINDOW + " (it fills later, once the "
                                                                          "window has outgrown the buffer)",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_9": _WINDOW + " (one chunk more read first)",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_16": _WINDOW + " (one more try, with a "
                                                                           "window past the end, before the same "
                                                                           "answer)",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_42": _WINDOW + " (grown x5, not x4)",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_64": _WINDOW + " (grown x5, not x4)",
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_exact_value__mutmut_23": _CODEC_CASE,
    "lightx2v.trace_summary.reader.xǁTraceStreamǁ_snippet__mutmut_9": _CODEC_CASE,
    # trace_browser/compare.py
    "lightx2v.trace_browser.compare.x__run_order__mutmut_5": _MATCHED,
    "lightx2v.trace_browser.compare.x__run_order__mutmut_15": _MATCHED,
    "lightx2v.trace_browser.compare.x__run_order__mutmut_16": _MATCHED,
    "lightx2v.trace_browser.compare.x_previous_runs__mutmut_5": "run_label('') is None: the root has no label "
                                                                "either way",
    "lightx2v.trace_browser.compare.x_previous_runs__mutmut_18": _STRICT,
    "lightx2v.trace_browser.compare.x_previous_runs__mutmut_21": _STRICT,
    "lightx2v.trace_browser.compare.x_previous_runs__mutmut_25": _STRICT,
    "lightx2v.trace_browser.compare.x__change_class__mutmut_9": _NONZERO,
    "lightx2v.trace_browser.compare.x_delta_bar__mutmut_22": _NONZERO,
    "lightx2v.trace_browser.compare.x_delta_bar__mutmut_28": _NONZERO,
    "lightx2v.trace_browser.compare.x_render_compare__mutmut_41": "a side has at least as many ranks as there are "
                                                                  "pairs: two pairs make a side's ranks > 1 anyway",
    "lightx2v.trace_browser.compare.x__ranks_section__mutmut_84": _TAG_CASE,
    "lightx2v.trace_browser.compare.x__rank_pair__mutmut_3": _TAG_CASE,
    "lightx2v.trace_browser.compare.x__rank_pair__mutmut_72": _TAG_CASE,
    "lightx2v.trace_browser.compare.x__pair_bars__mutmut_17": _TAG_CASE,
    "lightx2v.trace_browser.compare.x_render_chooser__mutmut_23": _TAG_CASE,
    "lightx2v.trace_browser.compare.x_render_chooser__mutmut_47": _TAG_CASE,
    "lightx2v.trace_browser.compare.x_render_chooser__mutmut_25": "an unknown attribute (xxxx) on an unselected "
                                                                  "option: nothing shown or submitted changes",
    "lightx2v.trace_browser.compare.x_render_chooser__mutmut_2": "with BASE given and NEW not, no NEW option is "
                                                                 "selected either way (no side's path is 'XXXX')",
    "lightx2v.trace_browser.compare.x__figures__mutmut_54": _SEVEN_ROWS,
    "lightx2v.trace_browser.compare.x__figures__mutmut_58": _SEVEN_ROWS,
    "lightx2v.trace_browser.compare.x__figures__mutmut_71": _SEVEN_ROWS,
    # trace_summary/names.py
    "lightx2v.trace_summary.names.x__own_name__mutmut_5": "a one-part name's last two parts are that one part",
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_5": "no top-level space found: -2 fails 'last >= 0' "
                                                                  "as -1 does",
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_24": _STRIPPED + " (the text after the last space "
                                                                   "is never empty, s[0:] is s)",
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_27": _STRIPPED + " (s[0:] is s)",
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_28": _LEADING,
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_29": _LEADING,
    "lightx2v.trace_summary.names.x__drop_return_type__mutmut_30": _STRIPPED + " (the text from before the last "
                                                                   "space is never empty)",
    "lightx2v.trace_summary.names.x__drop_params__mutmut_2": "short_name strips the name: only removing "
                                                             "'(anonymous namespace)::' can leave a space at "
                                                             "an end, and _own_name strips that later",
    "lightx2v.trace_summary.names.x__mangled__mutmut_69": "find('_', j) from j >= 3 is -1 or >= 3, never 0",
    "lightx2v.trace_summary.names.x__mangled__mutmut_70": "find('_', j) from j >= 3 is -1 or >= 3, never 0",
    "lightx2v.trace_summary.names.x__split_angle__mutmut_26": _MIRRORED,
    "lightx2v.trace_summary.names.x__drop_params__mutmut_20": _MIRRORED,
    "lightx2v.trace_summary.names.x__split_angle__mutmut_41": _UNUSED_REST,
    "lightx2v.trace_summary.names.x__split_angle__mutmut_42": _UNUSED_REST,
    "lightx2v.trace_summary.names.x__split_angle__mutmut_45": _UNUSED_REST,
    "lightx2v.trace_summary.names.x__split_angle__mutmut_47": _UNUSED_REST,
    "lightx2v.trace_summary.names.x__cut_at__mutmut_3": "s[:None] is s[:len(s)]",
    "lightx2v.trace_summary.names.x__last_component__mutmut_4": "the last part of a split on every '::' is the "
                                                                "last part of a split on the last one",
    "lightx2v.trace_summary.names.x__last_component__mutmut_7": "the last part of a split on every '::' is the "
                                                                "last part of a split on the last one",
    # trace_summary/series.py, render_efficiency.py, discover.py
    "lightx2v.trace_summary.series.x_step_series__mutmut_57": _STRICT,
    "lightx2v.trace_summary.series.x_step_series__mutmut_61": _STRICT,
    "lightx2v.trace_summary.series.x_step_series__mutmut_62": _STRICT,
    "lightx2v.trace_summary.series.x_step_series__mutmut_87": _ADD_ZERO,
    "lightx2v.trace_summary.render_efficiency.x__ms__mutmut_1": _MS_NUMBER,
    "lightx2v.trace_summary.render_efficiency.x__ms__mutmut_3": _MS_NUMBER,
    "lightx2v.trace_summary.discover.x__runs_below__mutmut_27": _ROOTS_DIFFER,
    "lightx2v.trace_summary.discover.x__runs_below__mutmut_29": _ROOTS_DIFFER,
    # trace_browser/files.py
    "lightx2v.trace_browser.files.x_list_traces__mutmut_19": _NO_FOLLOW,
    "lightx2v.trace_browser.files.x_list_traces__mutmut_20": _CLASSIFIED,
    "lightx2v.trace_browser.files.x_list_traces__mutmut_22": _CLASSIFIED,
    "lightx2v.trace_browser.files.x__real_path_under__mutmut_14": _ISABS,
    "lightx2v.trace_browser.files.x__real_path_under__mutmut_16": _ISABS,
    "lightx2v.trace_browser.files.x_resolve_run__mutmut_35": _CLASSIFIED,
    # trace_summary/render_frames.py
    "lightx2v.trace_summary.render_frames.x_tree_lines__mutmut_40": _TWO_DECIMALS,
    "lightx2v.trace_summary.render_frames.x_tree_lines__mutmut_172": _TWO_DECIMALS,
    "lightx2v.trace_summary.render_frames.x_tree_lines__mutmut_44": "the root's parent (-1) is no node: the "
                                                                    "children listed under it are never read",
    "lightx2v.trace_summary.render_frames.x_tree_lines__mutmut_128": _OPS_OF_A_LEAF,
    "lightx2v.trace_summary.render_frames.x_tree_lines__mutmut_130": _OPS_OF_A_LEAF,
    # trace_summary/frames_diff.py, frames.py, trace_browser/roofline.py
    "lightx2v.trace_summary.frames_diff.x__kinds__mutmut_4": _STRICT,
    "lightx2v.trace_summary.frames_diff.x__kinds__mutmut_7": _STRICT,
    "lightx2v.trace_summary.frames_diff.x__kinds__mutmut_10": _STRICT,
    "lightx2v.trace_summary.frames_diff.x__line__mutmut_16": _REAL_SPREAD,
    "lightx2v.trace_summary.frames_diff.x__line__mutmut_18": _REAL_SPREAD,
    "lightx2v.trace_summary.frames.x_frame_kind__mutmut_52": _MAIN_NAME,
    "lightx2v.trace_summary.frames.x_frame_kind__mutmut_53": _MAIN_NAME,
    "lightx2v.trace_summary.frames.x__outermost__mutmut_7":
        "the root has no parent: the ancestry walk does nothing for it",
    "lightx2v.trace_summary.frames.x__outermost__mutmut_9": _NO_ROOT_WORK,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_23":
        "the root's inclusive series is never read (frames are nodes 1 on)",
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_31": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_34": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_35": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_56": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_59": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_60": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_65": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_68": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_series__mutmut_69": _STRICT,
    "lightx2v.trace_summary.frames.x__top_ops__mutmut_24": _SHIFTED,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_10": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_13": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_14": _STRICT,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_99": _NO_GPU,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_175": _NO_GPU,
    "lightx2v.trace_summary.frames.x_frame_summary__mutmut_130": "a sixth sum per module class is never read",
    "lightx2v.trace_summary.frames.x_collapsed_stacks__mutmut_3": _CACHE,
    "lightx2v.trace_summary.frames.x_collapsed_stacks__mutmut_4": _CACHE,
    "lightx2v.trace_summary.frames.x_collapsed_stacks__mutmut_18":
        "the (node, op) keys are unique: sorting the items sorts by them",
    "lightx2v.trace_summary.frames.x_collapsed_stacks__mutmut_20":
        "the (node, op) keys are unique: sorting the items sorts by them",
    "lightx2v.trace_summary.frames.x_frame_tree__mutmut_21": _UNSIGNED,
    "lightx2v.trace_summary.frames.x_frame_tree__mutmut_22":
        "the walk sets each frame's node before a child reads it (parents come first): the start value is never read",
    "lightx2v.trace_summary.frames.xǁ_Aroundǁ_root__mutmut_2": _CACHE,
    "lightx2v.trace_summary.frames.xǁ_Aroundǁ_root__mutmut_3": _CACHE,
    "lightx2v.trace_summary.frames.xǁ_Aroundǁ_root__mutmut_19":
        "pos is only read on a thread with frames: without them (starts None) the op is never taken as mixed",
    **{f"lightx2v.trace_summary.frames.x__allocations__mutmut_{n}": _NO_SUCH_THREAD for n in (13, 15, 42, 52)},
    "lightx2v.trace_summary.frames.xǁ_Builderǁcpu__mutmut_4":
        "cpu() runs once per (node, top-level op name), the keys of frame_tree's CPU sums: its row's CPU column is "
        "still 0 then, so = and += agree",
    "lightx2v.trace_browser.roofline.x__ms__mutmut_1": "every caller gives _ms a class's or op's time, never None",
    "lightx2v.trace_browser.roofline.x_roofline_chart__mutmut_38": _PLOTTED,
    "lightx2v.trace_browser.roofline.x_roofline_chart__mutmut_45": _PLOTTED,
    "lightx2v.trace_browser.roofline.x_roofline_chart__mutmut_201": _PLOTTED,
    "lightx2v.trace_browser.roofline.x_roofline_chart__mutmut_204": _PLOTTED,
    "lightx2v.trace_browser.roofline.x_roofline_chart__mutmut_40":
        "without a peak there are no roofs to divide; with one, each roof divides by its bandwidth further on anyway",
    # trace_summary/render.py
    "lightx2v.trace_summary.render.x_render_run__mutmut_103": _WHOLE_PERCENT,
    "lightx2v.trace_summary.render.x__idle_line__mutmut_5": _WHOLE_PERCENT,
    "lightx2v.trace_summary.render.x__idle_line__mutmut_8": _WHOLE_PERCENT,
    # trace_summary/analyze.py
    "lightx2v.trace_summary.analyze.x_analyze_trace__mutmut_7":
        "without frames the pass skips every python_function event by its category before reading a field: the "
        "folded skip pattern only leaves some of them decoded first (only slower)",
    "lightx2v.trace_summary.analyze.x_analyze_trace__mutmut_23":
        "shapes are only read by efficiency, which with_efficiency=False leaves out (only slower)",
    "lightx2v.trace_summary.analyze.x_summarize_collected__mutmut_79": _UNUSED_SHIFT,
    "lightx2v.trace_summary.analyze.x_summarize_collected__mutmut_127":
        "frame_tree's folded only drops the library frames the pass kept: folding, the pass (keeps(True)) kept "
        "none, and unfolded both keep all",
    "lightx2v.trace_summary.analyze.x_summarize_collected__mutmut_128": _OWN_INDEX,
    "lightx2v.trace_summary.analyze.x_summarize_collected__mutmut_135": _OWN_INDEX,
    "lightx2v.trace_summary.analyze.x_summarize_collected__mutmut_194":
        "a trace whose span ends where it starts: hi - lo is 0.0 as the fallback is",
    # trace_summary/model.py
    "lightx2v.trace_summary.model.x__asdict__mutmut_5": _TABLES_DELETED,
    "lightx2v.trace_summary.model.x__asdict__mutmut_8": _TABLES_DELETED,
    # trace_browser/window.py
    **{f"lightx2v.trace_browser.window.x__window__mutmut_{n}": _FRAMES_DECODED for n in (15, 17, 19)},
    **{f"lightx2v.trace_browser.window.x__pieces__mutmut_{n}": _ORJSON_REFUSED for n in (33, 36, 37)},
    "lightx2v.trace_browser.window.x__pieces__mutmut_25":
        "rstrip(None) strips \\v and \\f as well: neither is JSON whitespace, so no trace file holds them "
        "between events",
    "lightx2v.trace_browser.window.x__pieces__mutmut_27":
        "a piece ends after its last event's '}', its comma and the spaces after it: never with an X to strip",
    **{f"lightx2v.trace_browser.window.x_step_window__mutmut_{n}": _NO_OWNER for n in (10, 27, 54)},
    # trace_browser/step_index.py
    "lightx2v.trace_browser.step_index.x__cache_file__mutmut_9": _CODEC_CASE,
    **{f"lightx2v.trace_browser.step_index.x__read__mutmut_{n}": _ASCII_INDEX for n in (2, 4, 6)},
    **{f"lightx2v.trace_browser.step_index.x_build_index__mutmut_{n}": _PLACEHOLDER for n in (152, 153, 170, 171)},
    **{f"lightx2v.trace_browser.step_index.x_frame_span__mutmut_{n}": _STRICT for n in (18, 21, 22)},
    **{f"lightx2v.trace_browser.step_index.x__windows__mutmut_{n}": _NO_STEP for n in (21, 35, 62)},
    **{f"lightx2v.trace_browser.step_index.x__windows__mutmut_{n}": _NO_OWNER_YET for n in (22, 24)},
    "lightx2v.trace_browser.step_index.x__windows__mutmut_84": "only the default's second item is read: its first "
                                                               "(0.0 or 1.0) never is",
    # trace_browser/flame.py
    "lightx2v.trace_browser.flame.x_layout__mutmut_21": "the root's parent (-1) is never placed: listing the root "
                                                         "among its children adds no box",
    "lightx2v.trace_browser.flame.x_layout__mutmut_75": _NOT_A_FRAME,
    "lightx2v.trace_browser.flame.x_layout__mutmut_76": _NOT_A_FRAME,
    "lightx2v.trace_browser.flame.x_layout__mutmut_94": _NARROWER_AFTER,
    "lightx2v.trace_browser.flame.x_layout__mutmut_95": _NARROWER_AFTER,
    **{f"lightx2v.trace_browser.flame.x__svg__mutmut_{n}": _STRICT for n in (11, 15, 16)},
    **{f"lightx2v.trace_browser.flame.x__mix__mutmut_{n}": _STRICT for n in (27, 30, 31)},
    **{f"lightx2v.trace_browser.flame.x_diff_flame_section__mutmut_{n}": _STRICT for n in (95, 98, 99)},
    "lightx2v.trace_browser.flame.x__svg__mutmut_54": _TAG_CASE,
    "lightx2v.trace_browser.flame.x_flame_section__mutmut_59": _TAG_CASE,
    "lightx2v.trace_browser.flame.x_flame_section__mutmut_119": _TAG_CASE,
    "lightx2v.trace_browser.flame.x__share__mutmut_2": _ROOT_SHARE,
    "lightx2v.trace_browser.flame.x__share__mutmut_6": _ROOT_SHARE,
    "lightx2v.trace_browser.flame.x__mix__mutmut_15": "a delta of 0 gives t = 0: grey, whichever colour it runs to",
    "lightx2v.trace_browser.flame.x_diff_flame_section__mutmut_13":
        "tb and tn are None whenever base or new is: the later tests only narrow the types",
    # trace_browser/page.py
    "lightx2v.trace_browser.page.x_render_index__mutmut_13": _QUOTE_SAFE,
    "lightx2v.trace_browser.page.x_render_index__mutmut_18": _LAST_PART,
    "lightx2v.trace_browser.page.x_render_index__mutmut_21": _LAST_PART,
    # trace_browser/overview.py
    **{f"lightx2v.trace_browser.overview.x_{fn}__mutmut_{n}": _NO_ROWS
       for fn, n in (("_ranks_section", 5), ("_ranks_section", 8), ("_steps", 12), ("_steps", 15), ("_kernels", 8),
                     ("_kernels", 11))},
    **{f"lightx2v.trace_browser.overview.x__rank_section__mutmut_{n}": _INT_SIZE for n in (61, 63, 64)},
    **{f"lightx2v.trace_browser.overview.x_memory_curve__mutmut_{n}": _STRICT for n in (33, 36, 37)},
    "lightx2v.trace_browser.overview.x__idle__mutmut_6": _WHOLE_PERCENT,
    "lightx2v.trace_browser.overview.x__idle__mutmut_8": _WHOLE_PERCENT,
    # trace_browser/capture_panel.py
    "lightx2v.trace_browser.capture_panel.x_refusal__mutmut_7":
        "only a client without a Host header (no browser: it always sends one) gets the own origin 'http://' or, "
        "so mutated, 'http://XXXX'; such a client sets any Origin it likes either way",
    "lightx2v.trace_browser.capture_panel.x_refusal__mutmut_15":
        "urlsplit(None) gives empty bytes parts: the extra origin reads \"b''://b''\", which no browser sends",
    "lightx2v.trace_browser.capture_panel.x_refusal__mutmut_23":
        "a browser's Origin has its host in lower case and no path: it never ends in an upper-case X",
    "lightx2v.trace_browser.capture_panel.x_refusal__mutmut_33":
        "a missing Content-Type reads '' or 'XXXX': neither is application/json",
    # trace_browser/server.py (its ONLY_FUNCTIONS)
    **{f"lightx2v.trace_browser.server.xǁHandlerǁ{fn}__mutmut_{n}": _HEADER_CASE
       for fn, n in (("parse_request", 7), ("parse_request", 8), ("do_POST", 10), ("do_POST", 11), ("_answer", 22),
                     ("_answer", 23))},
    "lightx2v.trace_browser.server.xǁHandlerǁdo_HEAD__mutmut_1": _FALSE_NONE,
    "lightx2v.trace_browser.server.xǁHandlerǁdo_POST__mutmut_12": "a missing Content-Length reads 'XX0XX', not "
                                                                  "digits: no body is read, as for '0'",
    "lightx2v.trace_browser.server.xǁHandlerǁ_send_page__mutmut_1": "_send_bytes reads `extra or {}`: '' is as "
                                                                    "empty as None",
    **{f"lightx2v.trace_browser.server.x_root_problem__mutmut_{n}": _MADE_IF_MISSING for n in (5, 7, 8)},
    # trace_browser/offline.py
    "lightx2v.trace_browser.offline.x_timeline_window__mutmut_32": "a step that is not all digits reads -1 or -2: "
                                                                   "either is refused as no such step (k < 0)",
    "lightx2v.trace_browser.offline.x_timeline_window__mutmut_80": _WINDOW_INDEX,
    "lightx2v.trace_browser.offline.x_timeline_window__mutmut_85": _WINDOW_INDEX,
    "lightx2v.trace_browser.offline.x__run_files__mutmut_32": "a single trace's run path (its folder) shows on no "
                                                              "page: the Overview shows a run's path only for "
                                                              "several ranks, Compare not at all",
    **{f"lightx2v.trace_browser.offline.x_compare_page__mutmut_{n}": _SIDES_READ for n in range(69, 82)},
    "lightx2v.trace_browser.offline.x_compare_page__mutmut_90": "overview_url('') is '/overview/' as "
                                                                "run_overview_url('') is",
    "lightx2v.trace_browser.offline.x_runs_section__mutmut_3": "only the number of a folder's traces is read",
    "lightx2v.trace_browser.overview.x__steps__mutmut_4": "at exactly 64 steps the first 60 and the last 4 are all "
                                                          "of them: the same rows either way",
    # trace_summary/summarize.py
    "lightx2v.trace_summary.summarize.x_summarize_run__mutmut_27": _UNRANKED,
    "lightx2v.trace_summary.summarize.x_summarize_run__mutmut_29": _UNRANKED,
    # trace_summary/__main__.py
    "lightx2v.trace_summary.__main__.x_build_parser__mutmut_82": _ARGPARSE_NONE,
    "lightx2v.trace_summary.__main__.x_main__mutmut_40": _TQDM_FILE,
    "lightx2v.trace_summary.__main__.x_main__mutmut_47": _TQDM_FILE,
    "lightx2v.trace_summary.__main__.x__diff__mutmut_34": _TQDM_FILE,
    "lightx2v.trace_summary.__main__.x__diff__mutmut_41": _TQDM_FILE,
    "lightx2v.trace_summary.__main__.x__diff__mutmut_54": _DIFF_TOP,
    "lightx2v.trace_summary.__main__.x_write_collapsed__mutmut_5": _TABLES,
    "lightx2v.trace_summary.__main__.x__diff__mutmut_1": _PASSED,
    # capture/__main__.py
    "lightx2v.capture.__main__.x_main__mutmut_1": _PATH_SETTINGS,
    "lightx2v.capture.__main__.x_main__mutmut_36": "argparse's default for an optional positional not given is None",
}

# the project's addopts (--durations, -ra) only add noise to thousands of runs; pytest-randomly, if installed, off
PYTEST_ARGS = ["-m", "not slow", "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "addopts=", "-q"]
MUTANT_NAME = re.compile(r"^\s*(\S+__mutmut_\d+): (\w[\w ]*)$")


def changed_modules() -> list[str]:
    """The Python modules this branch changed against main (``git diff --name-only main...HEAD``)."""
    out = subprocess.run(["git", "diff", "--name-only", "main...HEAD"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return [p for p in out.split() if p.startswith("lightx2v/") and p.endswith(".py") and (REPO / p).is_file()]


def mutmut_config(module: str, tests: list[str], also_copy: list[str]) -> str:
    """The ``[tool.mutmut]`` table for one module (mutmut reads its options only from the project's config)."""
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return ("\n[tool.mutmut]\n"
            'source_paths = ["lightx2v"]\n'
            f"only_mutate = {toml_list([module])}\n"
            f"also_copy = {toml_list(also_copy)}\n"
            f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
            f"pytest_add_cli_args = {toml_list(PYTEST_ARGS)}\n"
            "use_git_change_detection = false\n"
            f"timeout_multiplier = {TIMEOUT_MULTIPLIER}\n")


def run_module(module: str, scratch: Path, *, survivors: bool) -> dict[str, object]:
    """mutmut on one module in a fresh copy of the checkout; its counts and surviving mutants' names."""
    work = scratch / module.replace("/", "_")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, work / name)
    # mutmut runs the tests in its own copy (mutants/): what they read besides the code (docs, scripts) goes too
    others = sorted({name.split("/")[0] for name in filter(None, files)} - {"lightx2v", "tests", "pyproject.toml"})
    (work / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text()
                                         + mutmut_config(module, FAST_TESTS[module], others))
    env = dict(os.environ, PYTHONPATH=str(work), CI="")
    env.pop("PYTEST_ADDOPTS", None)
    patterns = mutant_patterns(module)
    cmd = ["nice", "-n", "10", sys.executable, "-m", "mutmut", "run", "--max-children", "1", *patterns]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"mutmut on {module} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=work, env=env, check=True,
                   capture_output=True)
    stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
    listing = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, env=env,
                             capture_output=True, text=True, check=True).stdout
    every = [(m.group(1), m.group(2).strip()) for m in map(MUTANT_NAME.match, listing.splitlines()) if m]
    if patterns:  # mutmut's own counts include the functions left unchecked
        every = [(name, state) for name, state in every if any(fnmatch.fnmatchcase(name, p) for p in patterns)]
        stats = counts(state for _, state in every)
    not_killed = [(name, state) for name, state in every if state != "killed"]
    surviving = [name for name, state in not_killed if state.strip() in {"survived", "no tests"}]
    excluded = [name for name in surviving if equivalent_reason(name)]
    diffs = {}
    if survivors:  # the excluded too: a listed number that an edit gave to another mutant shows its reason is stale
        for name in surviving:
            diffs[name] = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env,
                                         capture_output=True, text=True).stdout
    return {"stats": stats, "surviving": surviving, "excluded": excluded, "diffs": diffs}


def mutant_patterns(module: str) -> list[str]:
    """mutmut's name patterns for the mutants of ``module``'s ONLY_FUNCTIONS; empty: every mutant of it."""
    dotted = module.removesuffix(".py").replace("/", ".")
    return [f"{dotted}.{function}__mutmut_*" for function in ONLY_FUNCTIONS.get(module, [])]


def counts(states: Iterable[str]) -> dict[str, int]:
    """mutmut's CI/CD stats (``killed``, ``survived``, ``no_tests``, ...) of the mutants in these states."""
    stats = dict.fromkeys(("killed", "survived", "no_tests", "skipped", "suspicious", "timeout", "segfault"), 0)
    stats["total"] = 0
    for state in states:
        key = state.replace(" ", "_")
        stats[key] = stats.get(key, 0) + 1
        stats["total"] += 1
    return stats


def equivalent_reason(mutant: str) -> str | None:
    """The reason a surviving mutant is listed as equivalent, or None."""
    return EQUIVALENT.get(mutant)


def score(stats: dict[str, int], excluded: int) -> float:
    """Killed (timeouts included) over the mutants that could be killed, in percent."""
    counted = stats["total"] - stats.get("skipped", 0) - excluded
    caught = stats["killed"] + stats["timeout"] + stats.get("segfault", 0)
    return 100.0 * caught / counted if counted else 100.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="module paths (default: the ones changed vs main)")
    parser.add_argument("--survivors", action="store_true", help="print each surviving mutant's diff")
    parser.add_argument("--goal", type=float, default=GOAL, help="lowest score accepted, percent (default 85)")
    args = parser.parse_args(argv)
    modules = args.modules or changed_modules()
    unknown = [m for m in modules if m not in FAST_TESTS]
    for m in unknown:
        print(f"skipped {m}: no fast tests mapped to it in FAST_TESTS", file=sys.stderr)
    modules = sorted((m for m in modules if m in FAST_TESTS), key=lambda m: (REPO / m).stat().st_size)
    if not modules:
        print("no mapped module to mutate", file=sys.stderr)
        return 0
    rows: list[tuple[str, dict[str, int] | None, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        for module in modules:
            print(f"mutating {module} ...", file=sys.stderr, flush=True)
            try:
                result = run_module(module, Path(tmp), survivors=args.survivors)
            except RuntimeError as exc:  # e.g. a test that fails without any mutant: said, and the next module
                print(exc, file=sys.stderr, flush=True)
                rows.append((module, None, 0, 0.0))
                continue
            stats, excluded, diffs = result["stats"], result["excluded"], result["diffs"]
            assert isinstance(stats, dict) and isinstance(excluded, list) and isinstance(diffs, dict)
            rows.append((module, stats, len(excluded), score(stats, len(excluded))))
            for name, diff in diffs.items():
                if name not in excluded:
                    print(f"--- survived: {name}\n{diff}", flush=True)
            for name in excluded:
                print(f"equivalent, excluded: {name}: {equivalent_reason(name)}\n{diffs.get(name, '')}", flush=True)
            print(table_row(rows[-1], len(module)), file=sys.stderr, flush=True)
    width = max(len("module"), *(len(r[0]) for r in rows))
    print(f"{'module':<{width}}  mutants  killed  survived  timeout  score %")
    for row in rows:
        print(table_row(row, width))
    return 0 if all(r[1] is not None and r[3] >= args.goal for r in rows) else 1


def table_row(row: tuple[str, dict[str, int] | None, int, float], width: int) -> str:
    module, stats, excluded, pct = row
    if stats is None:
        return f"{module:<{width}}  (not measured: mutmut failed, see above)"
    return (f"{module:<{width}}  {stats['total']:>7}  {stats['killed']:>6}  {stats['survived'] + stats['no_tests']:>8}"
            f"  {stats['timeout']:>7}  {pct:>7.1f}" + (f"  ({excluded} equivalent excluded)" if excluded else ""))


if __name__ == "__main__":
    sys.exit(main())
