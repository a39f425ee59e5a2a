"""One intake input per forked process: a fuzzing loop that survives LLVM's aborts and segfaults, knows which
input caused each, and keeps LLVM's last words.

The parent imports LLVM once; each input is parsed in a child forked from it (about a millisecond), which
reports its outcome by exit status and dies of the signal LLVM raises, if any; an alarm ends a child that
hangs. Used by tests/reliability/test_reliability_bitcode_fuzz.py and
benchmarks/reliability_fuzz_bitcode.py.
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from optserve.testing.fuzz.delta import drop_chunks

HANG_S = 30  # default seconds before a child still checking one input is a hang
# A child's address space beyond the parent's: an input that makes LLVM allocate without bound ("LLVM ERROR:
# out of memory") fails in the child at this much more, instead of swapping the machine (and the test run
# beside it) into the OOM killer.
CHILD_MEMORY_BYTES = 2 << 30
_EXIT = {0: "accepted", 1: "rejected", 2: "failed"}


def _limit_memory() -> None:
    """In a child: its address space may grow CHILD_MEMORY_BYTES beyond what it has mapped now, and
    SIGALRM (the hang cut) kills it. pytest-timeout leaves a Python handler for SIGALRM, which would run
    only once LLVM returns: a child looping inside LLVM then never ended, nor did the test waiting on it."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + CHILD_MEMORY_BYTES,) * 2)


@dataclass(frozen=True)
class Outcome:
    """What one input did: `kind` accepted | rejected | failed (another exception, or a broken round
    trip) | crash (a signal) | hang (over the checker's `hang_s`); `detail`: the signal's name and LLVM's
    last stderr line, or the failure's traceback."""

    kind: str
    detail: str = ""

    @property
    def signature(self) -> str:
        """What makes two outcomes the same bug: a crash's signal and message, a failure's exception type
        (its traceback's last line up to the colon), else the kind."""
        if self.kind == "crash":
            return self.detail
        if self.kind == "failed":
            lines = [line for line in self.detail.splitlines() if line.strip()]
            return "failed: " + (lines[-1].split(":", 1)[0] if lines else "")
        return self.kind


class Isolated:
    """Runs `check(data)` (it returns "accepted" or "rejected", raises otherwise) in a forked child per
    input."""

    def __init__(self, check: Callable[[bytes], str], hang_s: int = HANG_S):
        self.check = check
        self.hang_s = hang_s
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the children's stderr for this object's life

    def run(self, data: bytes) -> Outcome:
        descriptor = self.stderr.fileno()
        os.ftruncate(descriptor, 0)
        os.lseek(descriptor, 0, os.SEEK_SET)
        pid = os.fork()
        if pid == 0:  # the child: one check, then out without Python's cleanup
            code = 2
            try:
                faulthandler.disable()  # LLVM's own message is the one wanted (pytest enables it)
                os.dup2(descriptor, 2)
                _limit_memory()
                signal.alarm(self.hang_s)
                code = 0 if self.check(data) == "accepted" else 1
            except BaseException:  # noqa: BLE001 - reported to the parent as a failure
                os.write(2, traceback.format_exc(limit=4)[-2000:].encode())
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            if number == signal.SIGALRM:
                return Outcome("hang", f"over {self.hang_s} s")
            return Outcome("crash", f"{signal.Signals(number).name}: {self.last_words()}")
        kind = _EXIT.get(os.WEXITSTATUS(status), "failed")
        return Outcome(kind, self.last_words(whole=True) if kind == "failed" else "")

    def run_many(self, inputs: list[bytes]) -> list[Outcome]:
        """Every input's outcome, as `run` gives it, at less cost: a forked child checks inputs one after
        the other and reports each through a pipe, until one kills it; a new child takes the rest."""
        outcomes: list[Outcome] = []
        while len(outcomes) < len(inputs):
            outcomes += self._batch(inputs[len(outcomes) :])
        return outcomes

    def _batch(self, inputs: list[bytes]) -> list[Outcome]:
        descriptor = self.stderr.fileno()
        os.ftruncate(descriptor, 0)
        os.lseek(descriptor, 0, os.SEEK_SET)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: check inputs until done or dead; one line per input to the pipe
            os.close(reader)
            try:
                faulthandler.disable()
                os.dup2(descriptor, 2)
                _limit_memory()
                for data in inputs:
                    signal.alarm(self.hang_s)
                    try:
                        line = "accepted" if self.check(data) == "accepted" else "rejected"
                    except Exception:  # noqa: BLE001 - reported to the parent as a failure
                        line = "failed\t" + json.dumps(traceback.format_exc(limit=4)[-2000:])
                    os.write(writer, (line + "\n").encode())
            finally:
                os._exit(0)
        os.close(writer)
        with os.fdopen(reader, "rb") as lines:
            reported = lines.read().decode().splitlines()
        _, status = os.waitpid(pid, 0)
        outcomes = []
        for line in reported:
            kind, _, detail = line.partition("\t")
            outcomes.append(Outcome(kind, json.loads(detail) if detail else ""))
        if len(outcomes) < len(inputs):  # the next input killed the child
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
                outcomes.append(Outcome("hang", f"over {self.hang_s} s"))
            elif os.WIFSIGNALED(status):
                name = signal.Signals(os.WTERMSIG(status)).name
                outcomes.append(Outcome("crash", f"{name}: {self.last_words()}"))
            else:
                outcomes.append(Outcome("crash", f"exit {os.WEXITSTATUS(status)}: {self.last_words()}"))
        return outcomes

    def last_words(self, whole: bool = False) -> str:
        """The child's stderr: whole, or the line that names the failure (LLVM's assertion or error)."""
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        if whole:
            return text[-2000:]
        lines = [line for line in text.splitlines() if line.strip()]
        named = [line for line in lines if "Assertion" in line or "LLVM ERROR" in line]
        line = (named or lines or ["(no output)"])[-1]
        if "Assertion" in line:  # the assertion's own text, without the build's source path
            line = line[line.index("Assertion") :]
        return line[:300]

    def minimize(self, data: bytes, seconds: float, keep: int = 4) -> bytes:
        """A smaller input with the same outcome (`Outcome.signature`), within `seconds` (`shrink`). The
        first `keep` bytes (bitcode's magic) stay."""
        wanted = self.run(data).signature
        ends = time.monotonic() + seconds
        return shrink(data, lambda candidate: self.run(candidate).signature == wanted, keep, ends=ends)


def shrink(
    data: bytes, same: Callable[[bytes], bool], keep: int = 0, lines: bool = False, ends: float = float("inf")
) -> bytes:
    """A smaller input for which `same` holds, found before `ends` (time.monotonic()): for bitcode, whole
    blocks and records left out (bitcode_reduce.py); with `lines`, whole lines left out (most of a module is
    not needed to reach a parser's bug); then the shortest prefix found by cutting halving amounts off the
    end (a bitstream survives a cut better than a deletion, which shifts every later bit); then byte chunks
    left out, halving to one byte. The first `keep` bytes stay."""
    from optserve.testing.fuzz import bitcode_reduce

    def stop() -> bool:
        return time.monotonic() >= ends

    data = bitcode_reduce.reduce(data, same, stop)
    if lines:
        parts = drop_chunks(data.splitlines(keepends=True), lambda kept: same(b"".join(kept)), stop=stop)
        data = b"".join(parts)
    cut = len(data) // 2
    while cut >= 1 and not stop():
        if len(data) - cut > keep and same(data[:-cut]):
            data = data[:-cut]
        else:
            cut //= 2
    return bytes(drop_chunks(data, lambda kept: same(bytes(kept)), keep_first=keep, stop=stop))
