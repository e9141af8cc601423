"""Readable names (`lightx2v.trace_summary.names`), fast: kernel names shortened for a terminal, cut columns,
worker and rank names from trace file names; each expected name written by hand.
tests/test_trace_summary_analysis.py has the short names of real kernels."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.names import short_name

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
