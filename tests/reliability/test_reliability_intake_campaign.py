"""The IR intake against the long campaign's inputs (benchmarks/reliability_campaign.py): its mutators, a
short bounded run of the same numbered inputs, the crashers it kept (tests/data/reliability/intake_crashers),
replayed each in a forked child, and the intake bugs it found, fixed. No service needed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from optserve.compiler.ir import IRError, normalize_ir, parse_ir, split_functions
from tests.reliability import bitcode_mutations as bm
from tests.reliability import bitcode_records as br
from tests.reliability import ir_text_mutations as tm
from tests.reliability.fuzz_isolation import Isolated
from tests.reliability.intake_target import Corpus, check_intake

DATA = Path(__file__).resolve().parent.parent / "data" / "reliability"
CRASHERS = DATA / "intake_crashers"
HANG_S = 5  # a kept hang is cut after this long


def test_the_record_walker_reads_every_seed_to_its_end_and_edits_in_place():
    """Every seed's records are found (thousands of fields each); writing a field's own value back changes
    nothing, and an edit changes the bits of that field alone, so the framing after it holds."""
    rng = random.Random(0)
    for seed in bm.seeds():
        fields = br.record_fields(seed)
        assert len(fields) > 1000
        for field in rng.sample(fields, 50):
            assert br.write_field(seed, field, field.value) == seed
            edited = br.write_field(seed, field, field.value + 1)
            changed = [i for i in range(len(seed)) if seed[i] != edited[i]]
            assert changed and field.position // 8 <= min(changed)
            assert max(changed) <= (field.position + field.bits - 1) // 8
        assert bm.top_level_blocks(br.edit_fields(rng, seed, 3))[-1].end == len(seed)


def test_inputs_are_a_function_of_seed_and_index():
    """A chunk of the campaign is checked the same in any process and call (the lent host made the same
    inputs as this machine: its kept crashers were made again from their indices here)."""
    corpus = Corpus()
    assert [corpus.make(38, i) for i in (0, 7, 123_456)] == [corpus.make(38, i) for i in (0, 7, 123_456)]
    kinds = {corpus.make(38, i)[0] for i in range(40)}
    assert kinds == {"bitcode", "text"}
    assert tm.mutate(random.Random(5), corpus.texts[0], corpus.texts[1]) == tm.mutate(
        random.Random(5), corpus.texts[0], corpus.texts[1]
    )


def test_a_short_bounded_campaign_breaks_no_contract():
    """300 of the campaign's inputs (seed 38) through the intake, in forked children: each is accepted,
    refused with an IRError, or kills its child (LLVM's aborts, contained); no other exception."""
    corpus = Corpus()
    inputs = [corpus.make(38, index)[1] for index in range(300)]
    outcomes = Isolated(check_intake, HANG_S).run_many(inputs)
    failed = [o.detail[-300:] for o in outcomes if o.kind == "failed"]
    assert not failed
    assert {o.kind for o in outcomes} >= {"accepted", "rejected"}


def crashers() -> dict[str, dict]:
    index = CRASHERS / "index.json"
    return json.loads(index.read_text()) if index.exists() else {}


@pytest.mark.parametrize("name", sorted(crashers()))
def test_a_kept_crasher_is_contained(name):
    """Each input the campaign kept (index.json: what it did then) ends its child or is answered: a crash
    (the child dies, this process goes on), a refusal with an IRError, a hang cut at HANG_S, or an
    acceptance (some crashed only in `normalize_ir`, which the service does not run; some crash LLVM on the
    lent host and are refused here); never another exception."""
    recorded = crashers()[name]
    outcome = Isolated(check_intake, hang_s=HANG_S).run((CRASHERS / name).read_bytes())
    assert outcome.kind != "failed", f"{recorded} -> {outcome.detail[-500:]}"


def _normalizes(data: bytes) -> str:
    normalize_ir(parse_ir(data, 1 << 22))
    return "accepted"


@pytest.mark.xfail(strict=True, reason="normalize_ir's own re-parse refuses what it made (corpus tooling)")
@pytest.mark.parametrize(
    "name",
    sorted(n for n, e in crashers().items() if e["found_as"] == "failed" and "parse" in e["signature"]),
)
def test_normalize_ir_takes_what_parse_ir_accepted(name):
    """Known, not fixed: on these accepted modules `normalize_ir` (passlm/corpus tooling; the engine
    normalizes text only, `normalized_lines`) makes text that does not parse: metadata it drops is still
    referenced, or LLVM's printed text does not parse back. The outcome is an IRError, in a child."""
    outcome = Isolated(_normalizes, hang_s=HANG_S).run((CRASHERS / name).read_bytes())
    assert outcome.kind == "accepted", outcome.detail[-300:]


def test_bitcode_whose_target_triple_is_not_utf8_is_an_irerror():
    """Found by the campaign (kept as found): a record field edit put byte 0xff in the triple; reading it
    raised UnicodeDecodeError (INTERNAL) instead of refusing the input."""
    with pytest.raises(IRError, match="target triple is not UTF-8"):
        parse_ir((DATA / "bitcode_found" / "triple_not_utf8.bc").read_bytes(), 1 << 22)


def test_a_unit_with_a_name_that_is_not_utf8_is_refused_by_the_split():
    """Found by the campaign: valid IR may name a function with any bytes (`@"\\FF"`); the split read the
    names through llvmlite, which decodes UTF-8, and raised UnicodeDecodeError, which the service's unit
    lists do not expect. It is an IRError (the unit gets the coreset's lists and -Oz) now."""
    text = parse_ir('define void @"\\FFab"() {\n  ret void\n}\n', 1 << 20)
    with pytest.raises(IRError, match="name is not UTF-8"):
        split_functions(text)
