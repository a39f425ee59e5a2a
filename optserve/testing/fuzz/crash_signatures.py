"""What the intake's fuzzing campaign (benchmarks/reliability_campaign.py) and its report share: one name per
bug (`signature`, `canonical`), how long a check may run before it is a hang, and where the kept crashers
and the known bitcode crashers live."""

from __future__ import annotations

import re

from optserve.config import REPO_ROOT
from optserve.testing.fuzz.fuzz_isolation import Outcome

HANG_S = 5  # a child still checking one input after this long is a hang
CRASHERS = REPO_ROOT / "tests" / "data" / "reliability" / "intake_crashers"
KNOWN = REPO_ROOT / "tests" / "data" / "reliability" / "bitcode_crashers" / "index.json"

_NUMBER = re.compile(r"(?<![\w-])(?:0x[0-9a-fA-F]+|\d+)")


def signature(kind: str, outcome: Outcome) -> str:
    """What makes two outcomes the same bug, with the input's kind (bitcode and text go through different
    readers): a crash's signal and LLVM's message; a failure's exception type and message with numbers
    blanked (so that one bug at many offsets counts once); a hang."""
    if outcome.kind == "failed":
        lines = [line for line in outcome.detail.splitlines() if line.strip()]
        last = _NUMBER.sub("N", lines[-1] if lines else "")[:200]
        return canonical(f"{kind} | failed: {last}")
    return canonical(f"{kind} | {outcome.signature}")


def canonical(key: str) -> str:
    """One name per bug where the last line varies with the input: LLVM's fatal error without whatever the
    verifier printed just before it on the same line; a crash whose last output is a warning (or a dump of
    the module) as one with no message; any UnicodeDecodeError as one (where in the string differs)."""
    kind, _, rest = key.partition(" | ")
    name, _, message = rest.partition(": ")
    if "UnicodeDecodeError" in message:
        message = "UnicodeDecodeError (a string LLVM gives back is not UTF-8)"
    elif "LLVM ERROR:" in message:
        message = message[message.index("LLVM ERROR:") :]
    elif name.startswith("SIG") and "Assertion" not in message and "UNREACHABLE" not in message:
        named = ("double free", "std::bad_alloc", "(no output)")
        message = next((word for word in named if word in message), "(no message; it printed only warnings)")
    return f"{kind} | {name}: {message}" if message else f"{kind} | {rest}"
