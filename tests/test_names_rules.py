"""Readable names (`lightx2v.trace_summary.names`), fast: kernel names shortened for a terminal, cut columns,
worker and rank names from trace file names; each expected name written by hand.
tests/test_trace_summary_analysis.py has the short names of real kernels."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.names import cut, rank_from_name, short_name, worker_name

# --- the kernel's own name ------------------------------------------------------------------------------------

@pytest.mark.parametrize("anonymous", ["(anonymous namespace)::", "{anonymous}::"])
def test_an_anonymous_namespace_is_no_part_of_the_name(anonymous):
    # a generic "kernel" keeps the namespace before it: here ns, not the anonymous one
    assert short_name(f"void ns::{anonymous}kernel<Functor>(int)") == "ns::kernel<Functor>"


def test_a_kernel_defined_in_a_function_is_named_by_its_own_name_and_first_named_argument():
    assert short_name("void ns::run(void (*)(int))::kernel_impl<4, Functor>(int)") == "kernel_impl<Functor>"


def test_a_one_letter_kernel_loses_its_parameters_and_return_type():
    assert short_name("f(int)") == "f"
    assert short_name("void f(int)") == "f"


def test_a_return_type_of_any_name_is_dropped():
    assert short_name("MatrixXf my_kernel<Functor>(int)") == "my_kernel<Functor>"


def test_a_truncated_name_shows_the_template_argument_it_got_to():
    assert short_name("void k<Functor") == "k<Functor>"


# --- template arguments ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arg", ["float const*", "float const&", "int* const", "double const* const"])
def test_a_pointer_or_reference_to_a_builtin_type_names_nothing(arg):
    assert short_name(f"void k<{arg}, Functor>(int)") == "k<Functor>"


@pytest.mark.parametrize("arg", ["c10::Half const*", "c10::Half const&", "c10::Half* const", "c10::Half&&"])
def test_a_pointer_or_reference_argument_is_named_by_its_type_alone(arg):
    assert short_name(f"void k<{arg}>(int)") == "k<Half>"


# --- return type and parameters -------------------------------------------------------------------------------

def test_a_space_before_the_parameter_list_still_drops_the_return_type():
    assert short_name("void k<Functor> (int, float)") == "k<Functor>"
    assert short_name("void my_kernel (int)") == "my_kernel"


@pytest.mark.parametrize("arg", ["Foo const", "Foo*", "Foo&", "ns::Foo const"])
def test_a_const_pointer_or_reference_argument_is_named_without_its_qualifier(arg):
    assert short_name(f"void k<{arg}>(int)") == "k<Foo>"


def test_a_name_ending_in_x_keeps_its_x():
    assert short_name("void k<4, GemmX, Functor>(int)") == "k<GemmX>"
    assert short_name("void k<ns::GemmX<float>>(int)") == "k<GemmX>"
    assert short_name("void k<GemmX*>(int)") == "k<GemmX>"


def test_a_cast_value_argument_names_nothing_and_the_next_named_one_shows():
    assert short_name("void k<(ns::Op<ns::Mode<int>>)3, Functor>(int)") == "k<Functor>"
    assert short_name("void k<(Op)3, Functor>(int)") == "k<Functor>"


def test_a_one_letter_template_argument_is_named_without_its_own_arguments():
    assert short_name("void k<F<float>>(int)") == "k<F>"


def test_an_msvc_lambda_argument_keeps_its_angle_brackets():
    assert short_name("void k<<lambda_1>>(int)") == "k<<lambda_1>>"


# --- mangled names ----------------------------------------------------------------------------------------------

def test_a_mangled_function_name_outside_a_namespace_is_demangled():
    assert short_name("_Z9my_kernelPf") == "my_kernel"


def test_a_mangled_name_cut_right_after_its_name_is_demangled():
    assert short_name("_Z9my_kernel") == "my_kernel"
    assert short_name("_ZN3foo6KernelI") == "foo::Kernel"
    assert short_name("_ZN3foo6KernelIN") == "foo::Kernel"


def test_a_mangled_component_cut_short_by_the_end_of_the_name_is_left_out():
    assert short_name("_ZN3foo20abc") == "foo"


@pytest.mark.parametrize("name,short", [("_Z¹foo", "_Z¹foo"), ("_Z٣fooPf", "_Z٣fooPf"), ("_ZN3foo²barEv", "foo")])
def test_a_digit_that_is_not_ascii_ends_a_mangled_name_not_the_summary(name, short):
    """Mangled lengths are ASCII digits: ``¹`` made int() raise out of the summary, ``٣`` was read as 3."""
    assert short_name(name) == short


def test_a_template_argument_after_a_non_ascii_digit_is_no_name():
    assert short_name("_ZN3fooI٣barEEv") == "foo"


def test_a_mangled_name_without_a_name_to_show_is_kept_whole():
    assert short_name("_ZL3foov") == "_ZL3foov"
    assert short_name("_Z12") == "_Z12"


def test_a_one_letter_mangled_namespace_is_kept_before_a_generic_kernel():
    assert short_name("_ZN1a6kernelEv") == "a::kernel"


def test_a_mangled_template_argument_that_is_a_name_is_shown():
    assert short_name("_ZN3foo6KernelI7FunctorEEvv") == "foo::Kernel<Functor>"
    assert short_name("_ZN3foo6KernelIN1a2ns7FunctorEEEvv") == "foo::Kernel<Functor>"


@pytest.mark.parametrize("std", ["St", "Sa", "Sb", "Ss", "Si", "So", "Sd"])
def test_a_mangled_std_abbreviation_is_skipped_for_the_named_argument_after_it(std):
    assert short_name(f"_ZN3foo6KernelI{std}7FunctorEEvv") == "foo::Kernel<Functor>"


@pytest.mark.parametrize("qualifier", ["K", "V", "r", "N"])
def test_a_mangled_qualifier_is_skipped_for_the_name_it_qualifies(qualifier):
    assert short_name(f"_ZN3foo6KernelI{qualifier}7FunctorEEvv") == "foo::Kernel<Functor>"


def test_a_mangled_substitution_is_skipped_and_an_unfinished_one_ends_the_search():
    assert short_name("_ZN3foo6KernelIS0_7FunctorEEvv") == "foo::Kernel<Functor>"
    assert short_name("_ZN3foo6KernelIS0") == "foo::Kernel"


@pytest.mark.parametrize("arg", ["Li4E", "f", "X7FunctorE"])
def test_a_mangled_literal_builtin_or_expression_argument_names_nothing(arg):
    assert short_name(f"_ZN3foo6KernelI{arg}EEvv") == "foo::Kernel"


# --- widths -------------------------------------------------------------------------------------------------------

def test_a_column_is_cut_to_its_width_with_an_ellipsis_and_a_name_that_fits_is_whole():
    assert cut("abcdefgh", 5) == "ab..."
    assert cut("abcde", 5) == "abcde"
    assert cut("abcd", 5) == "abcd"


def test_a_mangled_name_is_cut_to_the_width_only_when_one_is_given():
    name = "_Z30" + "a" * 30 + "v"
    assert short_name(name) == "a" * 30
    assert short_name(name, width=10) == "aaaaaaa..."


# --- workers and ranks from file names ----------------------------------------------------------------------------

@pytest.mark.parametrize("path, worker", [
    ("/runs/tb/rank1_node7.1732873.pt.trace.json.gz", "rank1_node7"),
    ("rank1_node7.pt.trace.json", "rank1_node7"),
    ("/runs/chrome/trace.rank0.json", "trace.rank0"),
    ("trace.json.gz", "trace"),
    ("capture.gz", "capture"),
    ("notes.txt", "notes.txt"),
])
def test_a_workers_name_is_its_file_name_without_the_trace_suffix(path, worker):
    assert worker_name(path) == worker


@pytest.mark.parametrize("path, rank", [
    ("trace.rank3.json", 3),
    ("/x/rank12_host.1.pt.trace.json.gz", 12),
    ("host.RANK-4.json", 4),
    ("rank_7.json", 7),
    ("/runs/rank5/trace.json", None),
    ("myrank2.json", None),
    ("trace.json", None),
])
def test_a_rank_is_read_from_the_file_name_alone(path, rank):
    assert rank_from_name(path) == rank
