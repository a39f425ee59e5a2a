"""Mutations of textual LLVM IR, for fuzzing the IR intake's text path (LLVM's LL parser, the verifier,
and the split and normalization that follow).

Seeds are real modules (tests/data/**/*.ll and the text of the bitcode seeds). A mutation is one of: bytes
flipped, a span of lines (or a whole function) spliced in from another module, a truncation (anywhere or at
a line's end), or a token edited: tokens are found by a small lexer (names, numbers, types, keywords,
strings, punctuation) and one is replaced by a token of another module, an interesting number, a type, a
keyword, or removed or repeated. Every mutator takes a `random.Random`, so an input is a function of its
seed (benchmarks/reliability_campaign.py regenerates any input from its index).
"""

from __future__ import annotations

import random
import re

TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"'  # strings
    r"|[%@!#$][-\w$.]+|[%@]\"[^\"\n]*\""  # names, metadata, attribute groups, comdats
    r"|-?\d+(?:\.\d+(?:e[-+]?\d+)?)?|0x[0-9A-Fa-f]+"  # numbers
    r"|[A-Za-z_][\w.]*"  # keywords, types, labels
    r"|\S"  # punctuation
)
NUMBERS = (
    "0",
    "1",
    "-1",
    "2",
    "7",
    "8",
    "31",
    "32",
    "63",
    "64",
    "127",
    "128",
    "255",
    "256",
    "65535",
    "2147483647",
    "-2147483648",
    "4294967295",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "340282366920938463463374607431768211456",
    "1e308",
    "-0.0",
    "0x7FF8000000000000",
    "0xK3FFF8000000000000000",
    "999999999999999999999999999999",
)
TYPES = (
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "i0",
    "i8388608",
    "half",
    "bfloat",
    "float",
    "double",
    "fp128",
    "x86_fp80",
    "ppc_fp128",
    "ptr",
    "ptr addrspace(1)",
    "void",
    "label",
    "metadata",
    "token",
    "x86_amx",
    "<4 x i32>",
    "<vscale x 2 x i64>",
    "[0 x i8]",
    "[4294967295 x i64]",
    "{ i32, ptr }",
    "<{ i8, i64 }>",
    'target("spirv.Image")',
    "opaque",
)
KEYWORDS = (
    "define",
    "declare",
    "global",
    "constant",
    "internal",
    "private",
    "weak",
    "external",
    "alias",
    "ifunc",
    "add",
    "sub",
    "mul",
    "sdiv",
    "udiv",
    "urem",
    "shl",
    "lshr",
    "and",
    "or",
    "xor",
    "fadd",
    "fneg",
    "icmp",
    "fcmp",
    "eq",
    "ne",
    "slt",
    "ult",
    "oeq",
    "uno",
    "br",
    "ret",
    "switch",
    "indirectbr",
    "invoke",
    "resume",
    "unreachable",
    "phi",
    "select",
    "call",
    "tail",
    "musttail",
    "load",
    "store",
    "alloca",
    "getelementptr",
    "inbounds",
    "extractvalue",
    "insertvalue",
    "extractelement",
    "insertelement",
    "shufflevector",
    "bitcast",
    "inttoptr",
    "ptrtoint",
    "addrspacecast",
    "trunc",
    "zext",
    "sext",
    "fptosi",
    "atomicrmw",
    "cmpxchg",
    "fence",
    "landingpad",
    "cleanuppad",
    "catchswitch",
    "freeze",
    "va_arg",
    "align",
    "nsw",
    "nuw",
    "exact",
    "volatile",
    "atomic",
    "seq_cst",
    "undef",
    "poison",
    "zeroinitializer",
    "null",
    "none",
    "true",
    "false",
    "blockaddress",
    "dso_local_equivalent",
    "no_cfi",
    "personality",
    "prologue",
    "prefix",
    "gc",
    "section",
    "partition",
    "comdat",
    "noundef",
    "nonnull",
    "dereferenceable",
    "byval",
    "sret",
    "inalloca",
    "preallocated",
    "swifterror",
    "immarg",
    "range",
    "!dbg",
    "!tbaa",
    "distinct",
    "!DILocation",
    "!DISubprogram",
    "!{",
    "uselistorder",
    "attributes",
    "#0",
    "#1",
    "source_filename",
    "target",
    "datalayout",
    "triple",
    "module",
    "asm",
)
PUNCTUATION = ("(", ")", "[", "]", "{", "}", "<", ">", ",", "=", "*", "!", ":", "...", "x")


def tokens(text: str) -> list[tuple[int, int]]:
    """(start, end) of each token of `text`."""
    return [match.span() for match in TOKEN.finditer(text)]


def random_token(rng: random.Random, text: str) -> tuple[int, int] | None:
    """(start, end) of the token at or after a random offset (the first one if none is after it): a scan
    of the whole text per edit would cost more than checking the input."""
    found = TOKEN.search(text, rng.randrange(len(text))) if text else None
    found = found or TOKEN.search(text)
    return found.span() if found else None


def mutate(rng: random.Random, seed: str, other: str) -> bytes:
    """`seed` with 1-4 mutations, mostly one (a text with several is seldom past the parser); `other`: a
    second module to splice from. As the bytes a client sends."""
    text = seed
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        text = rng.choice(MUTATORS)(rng, text, other)
    if rng.randrange(8) == 0:  # bytes that are not UTF-8 text, now and then
        return _flip_bytes(rng, text.encode())
    return text.encode()


def _flip_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    edited = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        edited[rng.randrange(len(edited))] ^= 1 << rng.randrange(8)
    return bytes(edited)


def _flip_chars(rng, text, other):
    """Characters changed to nearby ASCII (a flipped low bit), which keeps the text UTF-8."""
    if not text:
        return text
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(chars))
        chars[at] = chr((ord(chars[at]) ^ (1 << rng.randrange(6))) % 128 or 32)
    return "".join(chars)


def _splice_lines(rng, text, other):
    """A span of lines replaced by a span of the other module's lines."""
    mine, theirs = text.splitlines(keepends=True), other.splitlines(keepends=True)
    if not mine or not theirs:
        return text + other
    start = rng.randrange(len(mine) + 1)
    end = min(len(mine), start + rng.randint(0, 6))
    take = rng.randrange(len(theirs))
    span = theirs[take : take + rng.randint(1, 8)]
    return "".join(mine[:start] + span + mine[end:])


def _functions(text: str) -> list[tuple[int, int]]:
    spans, at = [], 0
    while (start := text.find("\ndefine ", at)) >= 0:
        end = text.find("\n}\n", start)
        if end < 0:
            break
        spans.append((start + 1, end + 3))
        at = end
    return spans


def _splice_function(rng, text, other):
    """A whole function of the other module added, or put in place of one of this module's (names, types and
    globals it uses may be missing or differ here)."""
    mine, theirs = _functions(text), _functions(other)
    if not theirs:
        return _splice_lines(rng, text, other)
    donor = other[slice(*rng.choice(theirs))]
    if mine and rng.randrange(2):
        start, end = rng.choice(mine)
        return text[:start] + donor + text[end:]
    return text + "\n" + donor


def _truncate(rng, text, other):
    if not text:
        return text
    if rng.randrange(2):
        return text[: rng.randrange(len(text))]
    ends = [i for i, char in enumerate(text) if char == "\n"]
    return text[: rng.choice(ends) + 1] if ends else text[: rng.randrange(len(text))]


def _edit_token(rng, text, other):
    """One token replaced (by one of the other module's tokens, a number, a type, a keyword or punctuation),
    removed or repeated."""
    span = random_token(rng, text)
    if span is None:
        return text + " " + rng.choice(KEYWORDS)
    start, end = span
    choice = rng.randrange(8)
    if choice == 0:
        donor = random_token(rng, other)
        new = other[slice(*donor)] if donor else ""
    elif choice == 1:
        new = rng.choice(NUMBERS)
    elif choice == 2:
        new = rng.choice(TYPES)
    elif choice == 3:
        new = rng.choice(KEYWORDS)
    elif choice == 4:
        new = rng.choice(PUNCTUATION)
    elif choice == 5:
        new = ""
    elif choice == 6:
        new = text[start:end] + " " + text[start:end]
    else:  # a number nudged, or a name's last character changed
        old = text[start:end]
        new = str(int(old) + rng.choice((-1, 1, 1 << 32))) if old.lstrip("-").isdigit() else old[:-1] + "x"
    return text[:start] + new + text[end:]


def _edit_tokens(rng, text, other):
    for _ in range(rng.randint(2, 6)):
        text = _edit_token(rng, text, other)
    return text


MUTATORS = (
    _flip_chars,
    _splice_lines,
    _splice_function,
    _truncate,
    _edit_token,
    _edit_token,
    _edit_token,
    _edit_tokens,
)


def seed_texts() -> tuple[str, ...]:
    """The seed modules: every tests/data/**/*.ll the intake accepts, as written, and the bitcode seeds'
    text (debug info, attributes, metadata: what clang writes), in a fixed order."""
    from optserve.compiler.ir import IRError, parse_ir
    from optserve.testing.fuzz.bitcode_mutations import DATA, seeds

    texts = []
    for path in sorted(DATA.rglob("*.ll")):
        if "intake_crashers" in path.parts:  # the campaign's own finds (some abort LLVM)
            continue
        try:
            text = path.read_bytes().decode()
            parse_ir(text, 1 << 22)
        except (UnicodeDecodeError, IRError):
            continue
        texts.append(text)
    return (*texts, *(parse_ir(module, 1 << 22) for module in seeds()))
