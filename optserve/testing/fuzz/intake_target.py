"""The IR intake as the service runs it, as one fuzz target, and the campaign's numbered inputs
(no hypothesis, no service: they also run where there is only llvmlite, benchmarks/reliability_campaign.py).

An Optimize request's module goes through compiler/ir.py: `parse_ir` (bitcode or text, verified),
`normalized_lines` of its text (the prompt the engine reads, engine/engine.py: text work only), and
`split_functions` (one module per function for the unit lists, serve/optimize/unit_lists.py, which answer a
unit it cannot split, an IRError, from the coreset and -Oz alone) whose parts are normalized for the tuning
store's keys (`normalized_lines`, tuning/unit_keys.py). The service runs these as jobs of the compiler's
worker pool (compiler/workers.py); here they run in-process, in the fuzzer's own children. The contract
checked: the input is refused by `parse_ir` with an IRError that has a message, or it is accepted and every
later step takes it or refuses it with an IRError. Anything else (another exception) is a failure; a signal
is a crash.
"""

from __future__ import annotations

import hashlib
import random

from optserve.compiler.ir import IRError, normalized_lines, parse_ir, split_functions
from optserve.testing.fuzz import bitcode_mutations, bitcode_records, ir_text_mutations

MAX_BYTES = 4 << 20  # the service's default limit (compiler.max_ir_bytes)


def check_intake(data: bytes) -> str:
    """ "accepted" or "rejected"; raises (AssertionError, or the step's own error) on a broken contract."""
    try:
        text = parse_ir(data, MAX_BYTES)
    except IRError as err:
        assert str(err), "IRError without a message"
        return "rejected"
    normalized_lines(text)
    try:
        parts = split_functions(text)
    except IRError as err:
        assert str(err), "IRError without a message"
        return "accepted"
    for _, part in parts:
        normalized_lines(part)
    return "accepted"


class Corpus:
    """The seeds, bitcode modules and IR texts in a fixed order, and the campaign's inputs made from them:
    input `index` of campaign `seed` depends on nothing else (its own `random.Random`)."""

    def __init__(self) -> None:
        self.bitcode = bitcode_mutations.seeds()
        self.texts = ir_text_mutations.seed_texts()
        for module in self.bitcode:
            bitcode_records.record_fields(module)  # walked once, before workers fork

    def digest(self) -> str:
        """Identifies the seeds: two hosts with the same digest (and llvmlite) make the same inputs."""
        whole = hashlib.blake2b(digest_size=8)
        for item in (*self.bitcode, *(text.encode() for text in self.texts)):
            whole.update(hashlib.blake2b(item, digest_size=8).digest())
        return whole.hexdigest()

    def make(self, seed: int, index: int) -> tuple[str, bytes]:
        """Input `index` of campaign `seed`: ("bitcode" | "text", its bytes). Half are bitcode: record
        fields rewritten in place, then (or instead) block and bit mutations; half are IR text."""
        rng = random.Random((seed << 40) | index)
        if rng.random() < 0.5:
            first, second = rng.choice(self.bitcode), rng.choice(self.bitcode)
            way = rng.randrange(3)
            data = first if way == 2 else bitcode_records.edit_fields(rng, first, rng.choice((1, 1, 2, 3)))
            if way:
                data = bitcode_mutations.mutate(rng, data, second)
            return "bitcode", data
        return "text", ir_text_mutations.mutate(rng, rng.choice(self.texts), rng.choice(self.texts))
