"""Bad pass lists. The service's API takes no pass lists from callers (candidates come from the model and
-Oz; feedback rounds are built inside the service), so the parser every pass list goes through is tested
directly: each bad kind gets a PassListError that says what is wrong."""

from __future__ import annotations

import re

import pytest

from optserve.compiler.passes import (
    MAX_PASSES,
    PASS_NAMES,
    PassListError,
    parse_pass_list,
    validate_pass_list,
)

CASES = [
    ("unknown_name", "sroa frobnicate", r"unknown pass 'frobnicate'"),
    ("near_miss_name", "sroa instcombin", r"did you mean 'instcombine'"),
    ("meta_flag_not_first", "sroa -Oz", r"meta flag -Oz must come first"),
    ("absurd_length", " ".join([PASS_NAMES[0]] * 100_000), rf"more than the limit of {MAX_PASSES}"),
    ("one_over_the_limit", " ".join([PASS_NAMES[0]] * (MAX_PASSES + 1)), rf"{MAX_PASSES + 1} passes"),
    ("opt_pipeline_syntax", "function(sroa),instcombine", "unknown pass"),
    ("shell_injection", "sroa; rm -rf /", "unknown pass"),
    ("control_characters", "sroa\x00instcombine", "unknown pass"),
    ("unicode_lookalike", "ѕroa", "unknown pass"),
]


@pytest.mark.parametrize("kind,text,message", CASES, ids=[c[0] for c in CASES])
def test_bad_pass_list_is_refused_with_a_reason(kind, text, message):
    with pytest.raises(PassListError) as caught:
        parse_pass_list(text)
    assert re.search(message, str(caught.value)), str(caught.value)


def test_non_string_entries_are_refused():
    with pytest.raises(PassListError):
        validate_pass_list(["sroa", 42])
