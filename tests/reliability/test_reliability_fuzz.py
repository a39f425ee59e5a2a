"""Short, derandomized fuzz runs of the three untrusted-text parsers (the long run is
benchmarks/reliability_fuzz.py). No service needed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optserve.testing.fuzz import fuzz_targets as ft
from tests.reliability.reliability_inputs import deep_type

CI = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@CI
@given(ft.ir_inputs)
def test_fuzz_parse_ir_accepts_or_says_why(data):
    assert ft.check_ir(data) in ("accepted", "rejected")


@CI
@given(ft.pass_list_texts)
def test_fuzz_pass_list_parser(text):
    assert ft.check_pass_list(text) in ("accepted", "rejected")


@CI
@given(ft.loop_nest_inputs())
def test_fuzz_loop_nest_parser(nest):
    einsum, sizes = nest
    assert ft.check_loop_nest(einsum, sizes) in ("accepted", "rejected")


@settings(max_examples=50, derandomize=True, database=None, deadline=None)
@given(st.integers(1, 3000))
def test_deep_nesting_is_refused_not_a_crash(depth):
    """The segfault found by fuzzing (LLVM's parser recursing per nesting level) is refused up front."""
    assert ft.check_ir(deep_type(depth)) == ("accepted" if depth <= 1000 else "rejected")


GC_REPRO = """
import gc
from optserve.compiler.ir import IRError, parse_ir
rejected = [
    "define i32 @f(i32 %a) {\\nentry:\\n  %x = add i32 %y, 1\\n  %y = add i32 %a, 2\\n  ret i32 %x\\n}\\n",
    'target triple = "hexagon-unknown-linux-musl"\\ndefine i32 @f() {\\n  ret i32 0\\n}\\n',
]

def call(text):
    try:
        parse_ir(text, 1 << 20)
    except IRError as err:
        error = err  # a reference cycle: error -> traceback -> this frame -> error
    return None

gc.disable()
for i in range(2000):
    call(rejected[i % 2])
    if i % 50 == 0:
        gc.collect()
print("survived")
"""


def test_rejected_modules_do_not_crash_the_garbage_collector():
    """Regression: a rejected module collected after its own LLVM context segfaulted the process (seen as a
    dead ingress replica). Run in a child process, so a regression fails this test instead of pytest."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", GC_REPRO], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "survived" in done.stdout, (done.returncode, done.stderr[-2000:])
