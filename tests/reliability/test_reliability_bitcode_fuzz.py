"""The IR intake against real bitcode with structure-aware mutations (bitcode_mutations.py): a short bounded
run (the long one is benchmarks/reliability_fuzz_bitcode.py), the crashers that run found, replayed, and
the two intake bugs it found, fixed. Each input is parsed in a forked child (fuzz_isolation.py): LLVM's
bitcode reader aborts on some inputs, and the test run must survive to report them. No service needed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from optserve.compiler.ir import IRError, parse_ir
from optserve.testing.fuzz import bitcode_mutations as bm
from optserve.testing.fuzz import fuzz_targets as ft
from optserve.testing.fuzz.fuzz_isolation import Isolated

CRASHERS = Path(__file__).resolve().parent.parent / "data" / "reliability" / "bitcode_crashers"
FOUND = CRASHERS.parent / "bitcode_found"
ISOLATED = Isolated(ft.check_bitcode)
HANG_S = 5  # a kept hang is cut after this long (it ran past 10 s in the campaign)


def test_the_seeds_are_real_bitcode_whose_blocks_are_found():
    """Every seed module has the four top-level blocks of LLVM's bitcode, back to back to its end:
    IDENTIFICATION (13), MODULE (8), SYMTAB (25), STRTAB (23)."""
    for seed in bm.seeds():
        blocks = bm.top_level_blocks(seed)
        assert [block.block_id for block in blocks] == [13, 8, 25, 23]
        assert blocks[0].start == 4 and blocks[-1].end == len(seed)
        assert all(a.end == b.start for a, b in zip(blocks, blocks[1:], strict=False))
        assert ft.check_bitcode(seed) == "accepted"


def test_block_mutations_keep_the_framing_they_do_not_edit():
    """Dropping, repeating, swapping or splicing whole blocks gives bitcode whose blocks are found again:
    the mutations reach LLVM's record readers, not only its framing checks."""
    rng = random.Random(0)
    operations = (bm._drop_block, bm._repeat_block, bm._swap_blocks, bm._splice_block)
    for _ in range(100):
        seed, other = rng.choice(bm.seeds()), rng.choice(bm.seeds())
        mutated = rng.choice(operations)(rng, seed, other)
        blocks = bm.top_level_blocks(mutated)
        assert blocks and blocks[-1].end == len(mutated)


@settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ft.bitcode_inputs())
def test_mutated_bitcode_is_accepted_or_refused_with_an_irerror(data):
    """The intake's contract on every input: accepted (its text parses to itself) or an IRError with a
    message. A crash of LLVM is not checked here (they are known: the crashers below, and the intake is to
    move into worker processes); any other exception or a hang is a failure."""
    outcome = ISOLATED.run(data)
    assert outcome.kind in ("accepted", "rejected", "crash"), outcome.detail


def crasher_files() -> list[str]:
    index = CRASHERS / "index.json"
    return sorted(json.loads(index.read_text())) if index.exists() else []


@pytest.mark.parametrize("name", crasher_files())
def test_a_kept_crasher_never_gets_past_the_intake(name):
    """Each input the campaign kept (its outcome then in index.json): it is never accepted and never raises
    anything but an IRError. Today most still abort LLVM (in a forked child here; in the ingress in the
    service) and the hang still hangs (cut at HANG_S here); once the intake refuses one with an IRError,
    that passes too. The failures the campaign found are IRErrors now (the tests below)."""
    recorded = json.loads((CRASHERS / "index.json").read_text())[name]
    outcome = Isolated(ft.check_bitcode, hang_s=HANG_S).run((CRASHERS / name).read_bytes())
    assert outcome.kind in ("crash", "rejected", "hang"), f"{recorded} -> {outcome}"


def test_bitcode_whose_text_is_not_utf8_is_an_irerror():
    """Found by the campaign (kept as found): bitcode with an attribute key holding byte 0xe1
    ("no-tr\\xe1pping-math"). LLVM prints attribute strings as they are, and the intake raised
    UnicodeDecodeError (answered INTERNAL) instead of refusing the input."""
    with pytest.raises(IRError, match="its text is not UTF-8"):
        parse_ir((FOUND / "attribute_not_utf8.bc").read_bytes(), 1 << 22)


def test_ir_text_whose_printed_text_is_not_utf8_is_an_irerror():
    """The same bug through IR text (found as the campaign's round trip of accepted bitcode): an escape
    in an attribute key is printed back as the raw byte."""
    text = 'define i32 @f() #0 {\n  ret i32 0\n}\nattributes #0 = { "no-tr\\E1pping-math"="true" }\n'
    with pytest.raises(IRError, match="its text is not UTF-8"):
        parse_ir(text, 1 << 20)


def test_bitcode_that_reads_as_an_empty_module_is_an_irerror():
    """Found by the campaign (kept as found): spliced bitcode that LLVM reads as a module with nothing in
    it, whose text is empty: the intake accepted it, and every later step refused it as empty IR."""
    with pytest.raises(IRError, match="empty module"):
        parse_ir((FOUND / "empty_module.bc").read_bytes(), 1 << 22)
