"""The IR intake against the long campaign's inputs (benchmarks/reliability_campaign.py): its mutators, a
short bounded run of the same numbered inputs, the crashers it kept (tests/data/reliability/intake_crashers),
replayed each in a forked child, and the intake bugs it found, fixed. No service needed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from optserve.compiler.ir import IRError, normalize_ir, parse_ir, split_functions
from optserve.testing.fuzz import bitcode_mutations as bm
from optserve.testing.fuzz import bitcode_records as br
from optserve.testing.fuzz import ir_text_mutations as tm
from optserve.testing.fuzz.bitcode_reduce import Bitstream
from optserve.testing.fuzz.fuzz_isolation import Isolated, shrink
from optserve.testing.fuzz.intake_target import Corpus, check_intake

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


def test_a_bitstream_is_written_again_bit_for_bit_and_without_any_entry():
    """The minimizer's rewrite (bitcode_reduce.py): each seed written again with nothing left out is the seed;
    with one record or one block left out (a function block, with blobs after it in STRTAB), the walker reads
    the result to its end and finds exactly that entry's fields missing."""
    rng = random.Random(1)
    for seed in bm.seeds():
        stream = Bitstream.read(seed)
        assert stream.without(set()) == seed
        fields = len(br.record_fields(seed))
        for entry in (rng.choice(stream.entries("record")), rng.choice(stream.entries("block"))):
            smaller = stream.without({id(entry)})
            assert len(smaller) < len(seed)
            left_out = sum(
                1 for f in br.record_fields(seed) if entry_start(entry) <= f.position < entry_end(entry)
            )
            assert len(br.record_fields(smaller)) == fields - left_out


def entry_start(entry: br.Item) -> int:
    return entry.start


def entry_end(entry: br.Item) -> int:
    """Where an entry's bits end: a record's own end; a block's last entry's end (its END_BLOCK follows)."""
    while entry.kind == "block" and entry.items:
        entry = entry.items[-1]
    return entry.end


def test_bitcode_is_minimized_by_entries_where_bytes_would_break_it():
    """A property that needs one blob record (the name `grid_max`, in the string table) keeps only what
    reaching it needs: the minimized seed is a fraction of its size, still walks, and still has the name."""
    seed = next(s for s in bm.seeds() if b"grid_max" in s)
    small = shrink(
        seed, lambda candidate: b"grid_max" in candidate and bool(br.record_fields(candidate)), keep=4
    )
    assert b"grid_max" in small and br.record_fields(small)
    assert len(small) < len(seed) // 4, (len(small), len(seed))


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
    """ "accepted": `normalize_ir` takes what `parse_ir` accepted; "rejected": `parse_ir` refused it."""
    try:
        text = parse_ir(data, 1 << 22)
    except IRError:
        return "rejected"
    normalize_ir(text)
    return "accepted"


# Kept inputs on which normalize_ir failed (IRError) or whose normalized text aborted LLVM's parser, and what
# each does now: refused by parse_ir where LLVM prints the module as text its own parser refuses.
NORMALIZED_NOW = {
    name: "rejected" if "missing required field" in entry["signature"] else "accepted"
    for name, entry in crashers().items()
    if (entry["found_as"] == "failed" and "parse" in entry["signature"])
    or "Missing self reference" in entry["signature"]
}


@pytest.mark.parametrize("name", sorted(NORMALIZED_NOW))
def test_normalize_ir_takes_what_parse_ir_accepted(name):
    """Found by the campaign on 1,268 inputs (and one abort of LLVM): `normalize_ir` made text that does
    not parse. It left attachments behind whose kind has a `-` (`!d-9 !5`) or whose node is written in place
    (`!llvm.loop !DIExpression()`), referring to metadata it drops; it dropped an `attributes #N` line without
    the second half of an attribute string with a newline (LLVM prints those as they are). Each now
    normalizes to text that parses, or is refused by `parse_ir` (a DICompileUnit whose printed text lacks
    `language`), in a child."""
    outcome = Isolated(_normalizes, hang_s=HANG_S).run((CRASHERS / name).read_bytes())
    assert outcome.kind == NORMALIZED_NOW[name], outcome.detail[-300:]


ATTACHED = """define i32 @f(ptr %p) {
  %v = load i32, ptr %p, align 4, !d-9 !0, !other.kind !DIExpression()
  ret i32 %v
}
!0 = !{}
"""


def test_attachments_of_any_kind_are_dropped_with_the_metadata():
    normalized = normalize_ir(parse_ir(ATTACHED, 1 << 20))
    assert "!" not in normalized and "load i32, ptr %p, align 4" in normalized


def test_an_attribute_string_with_a_newline_goes_with_its_group():
    """LLVM reads `\\0A` in an attribute string and prints a newline: the group spans two lines."""
    ir = 'define void @f() #0 {\n  ret void\n}\nattributes #0 = { "a\\0Ab"="1" nounwind }\n'
    printed = parse_ir(ir, 1 << 20)
    assert '"a\nb"' in printed
    assert normalize_ir(printed) == "define void @f() {\nret void\n}\n"
    ((_, part),) = split_functions(printed)
    assert '"a\nb"' in part


def test_ir_whose_printed_text_does_not_parse_back_is_refused():
    """A DICompileUnit of `language: 0` reads, and prints without the field its parser requires."""
    text = (CRASHERS / "failed-6a933e4b20fd.ll").read_bytes()
    with pytest.raises(IRError, match="does not parse back: .*missing required field 'language'"):
        parse_ir(text, 1 << 22)


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
