"""Fuzz targets for the three parsers that take untrusted text: the IR intake (`parse_ir`), the pass-list
parser (`parse_pass_list`) and the loop-nest parser (`LoopNestSpec.parse`).

Each target is a hypothesis strategy plus a check: the parser either accepts (and what it returns is
consistent) or raises its own error type with a message; any other exception, a hang or a crash of the
process is a bug. Used by tests/reliability/test_reliability_fuzz.py (short, derandomized) and
benchmarks/reliability_fuzz.py (long, in a supervised child process so a hard crash is caught and kept).
"""

from __future__ import annotations

from hypothesis import strategies as st

from optserve.compiler.ir import IRError, parse_ir
from optserve.compiler.passes import (
    MAX_PASSES,
    META_FLAGS,
    PASS_NAMES,
    PassListError,
    format_pass_list,
    parse_pass_list,
)
from optserve.config import LoopTuneSettings
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.testing import TEST_DATA

DATA = TEST_DATA
MAX_IR_BYTES = 64 * 1024
LOOP_LIMITS = LoopTuneSettings()

# --- IR ---------------------------------------------------------------------------------------------------

SEEDS = [(DATA / "serve" / name).read_text() for name in ("add.ll", "sum.ll", "unrolled_loop.ll")] + [
    (DATA / "reliability" / "foreign_triple.ll").read_text()
]
IR_TOKENS = [
    "define",
    "declare",
    "i32",
    "i64",
    "i1",
    "i8",
    "ptr",
    "float",
    "double",
    "void",
    "label",
    "%x",
    "%0",
    "@f",
    "@g",
    "add",
    "sub",
    "mul",
    "sdiv",
    "udiv",
    "srem",
    "shl",
    "lshr",
    "ashr",
    "and",
    "or",
    "xor",
    "icmp",
    "fcmp",
    "eq",
    "slt",
    "br",
    "ret",
    "switch",
    "phi",
    "select",
    "call",
    "load",
    "store",
    "alloca",
    "getelementptr",
    "inbounds",
    "bitcast",
    "zeroinitializer",
    "undef",
    "poison",
    "unreachable",
    "global",
    "constant",
    "private",
    "internal",
    "x",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    "<",
    ">",
    ",",
    "=",
    "!0",
    "!{",
    "#0",
    "attributes",
    "nsw",
    "nuw",
    "align",
    "4",
    "0",
    "-1",
    "9223372036854775807",
    "entry:",
    "\n",
    "  ",
    '"',
    'c"\\00"',
    'target triple = "x86_64-pc-linux-gnu"',
    'target datalayout = "e-m:e"',
    "addrspace(1)",
    "vscale",
    "<vscale x 4 x i32>",
    "token",
    "metadata",
]


@st.composite
def mutated_ir(draw) -> str:
    """A valid seed module with a few random edits: cut, duplicate, insert tokens, swap bytes."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        if not text:
            break
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["cut", "dup", "insert", "char", "nest"]))
        if edit == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif edit == "dup":
            text = text[:at] + text[at : at + draw(st.integers(1, 80))] * draw(st.integers(2, 5)) + text[at:]
        elif edit == "insert":
            tokens = draw(st.lists(st.sampled_from(IR_TOKENS), min_size=1, max_size=8))
            text = text[:at] + " " + " ".join(tokens) + " " + text[at:]
        elif edit == "char":
            text = text[:at] + draw(st.characters()) + text[at + 1 :]
        else:
            depth = draw(st.integers(1, 400))
            text = text[:at] + "[1 x " * depth + "i32" + "]" * depth + text[at:]
    return text


token_soup = st.lists(st.sampled_from(IR_TOKENS), max_size=60).map(" ".join)
ir_inputs = st.one_of(
    mutated_ir(),
    token_soup,
    st.text(max_size=300),
    st.binary(max_size=300),
    st.binary(max_size=200).map(lambda b: b"BC\xc0\xde" + b),  # bitcode magic, garbage after it
)


def bitcode_inputs():
    """Real bitcode with structure-aware mutations (bitcode_mutations.py), drawn through hypothesis."""
    from optserve.testing.fuzz import bitcode_mutations

    return st.randoms(use_true_random=False).map(bitcode_mutations.mutated_bitcode)


def check_bitcode(data: bytes) -> str:
    """parse_ir accepts bitcode (and its text is IR text that parses to itself) or raises IRError with a
    message. Bitcode's text differs from its own text's only by the `; ModuleID` line the text parse adds,
    so the round trip is checked from the first text on."""
    try:
        text = parse_ir(data, MAX_IR_BYTES * 64)
    except IRError as err:
        assert str(err), "IRError without a message"
        return "rejected"
    again = parse_ir(text, MAX_IR_BYTES * 128)
    assert parse_ir(again, MAX_IR_BYTES * 128) == again, "parse_ir output of bitcode does not round-trip"
    return "accepted"


def check_ir(data: str | bytes) -> str:
    """parse_ir accepts (and its output parses again to itself) or raises IRError with a message."""
    try:
        text = parse_ir(data, MAX_IR_BYTES * 4)
    except IRError as err:
        assert str(err), "IRError without a message"
        return "rejected"
    assert parse_ir(text, MAX_IR_BYTES * 8) == text, "parse_ir output does not round-trip"
    return "accepted"


# --- pass lists -------------------------------------------------------------------------------------------

pass_names = st.one_of(
    st.sampled_from(PASS_NAMES), st.sampled_from(META_FLAGS), st.text(min_size=1, max_size=12)
)
pass_list_texts = st.one_of(
    st.lists(pass_names, max_size=MAX_PASSES + 8).map(" ".join),
    st.lists(st.sampled_from(PASS_NAMES), min_size=MAX_PASSES - 2, max_size=MAX_PASSES * 40).map(" ".join),
    st.text(max_size=200),
)


def check_pass_list(text: str) -> str:
    try:
        parsed = parse_pass_list(text)
    except PassListError as err:
        assert str(err)
        return "rejected"
    assert len(parsed) <= MAX_PASSES + 1
    assert parse_pass_list(format_pass_list(parsed)) == parsed
    return "accepted"


# --- loop nests -------------------------------------------------------------------------------------------

index_names = st.sampled_from(list("ijkmnpq") + ["k2", "xx", "1", "", "m+n", "A"])


@st.composite
def tensor_text(draw, name: str | None = None) -> str:
    name = name or draw(st.sampled_from(["A", "B", "C", "D", "X", "", "a b"]))
    dims = draw(
        st.lists(st.one_of(index_names, st.tuples(index_names, index_names).map("+".join)), max_size=5)
    )
    return f"{name}[{','.join(dims)}]"


@st.composite
def einsums(draw) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=80))
    out, a, b = draw(tensor_text("C")), draw(tensor_text("A")), draw(tensor_text("B"))
    op = draw(st.sampled_from(["+=", "+=", "+=", "=", "-="]))
    star = draw(st.sampled_from(["*", "*", "*", "+", "* D[m] *"]))
    return f"{out} {op} {a} {star} {b}"


sizes_maps = st.dictionaries(
    index_names,
    st.one_of(
        st.integers(-10, 5000), st.integers(-(2**70), 2**70), st.booleans(), st.floats(), st.text(max_size=3)
    ),
    max_size=8,
)


TEMPLATES = [
    "C[m,n] += A[m,k] * B[k,n]",
    "C[m] += A[m,k] * B[k]",
    "O[n,k,p] += I[n,c,p+r] * W[k,c,r]",
    "C[i,j] += A[i,j] * B[i,j]",
    "Y[b,m,n] += X[b,m,k] * Z[b,k,n]",
]


@st.composite
def loop_nest_inputs(draw) -> tuple[str, dict]:
    """(contraction, sizes): half from well-formed templates with sizes for exactly their indices (so that
    many are accepted and the limits are what decides), half free-form."""
    if draw(st.booleans()):
        return draw(einsums()), draw(sizes_maps)
    einsum = draw(st.sampled_from(TEMPLATES))
    indices = sorted(
        {
            i
            for i in einsum.replace("+", ",").replace("[", ",").replace("]", ",").split(",")
            if i.strip().isalpha() and i.strip().islower()
        }
    )
    sizes = {i.strip(): draw(st.one_of(st.integers(1, 64), st.integers(-4, 10_000))) for i in indices}
    if draw(st.integers(0, 4)) == 0:
        sizes[draw(index_names)] = draw(st.integers(-(2**40), 2**40))
    return einsum, sizes


def check_loop_nest(einsum: str, sizes: dict) -> str:
    try:
        spec = LoopNestSpec.parse(einsum, sizes, LOOP_LIMITS)
    except SpecError as err:
        assert str(err)
        return "rejected"
    assert all(1 <= size <= LOOP_LIMITS.max_dim for _, size in spec.sizes)
    assert len(spec.sizes) <= LOOP_LIMITS.max_loops
    assert LoopNestSpec.parse(spec.text(), dict(spec.sizes), LOOP_LIMITS) == spec
    return "accepted"
