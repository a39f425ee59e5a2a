"""The service's answer for a unit's bitcode: whether its budget pays for a call, the call itself, and why
there is no answer when there is none (NotAsked: not sent; ServiceFailure: no usable answer).

The compile modes (compile_modes.py) import this module for every unit taken over; gRPC, the generated
messages and service_call.py load only for a unit that is sent (`import_client`), so a unit compiled by one
clang process never imports them.
"""

from __future__ import annotations

import time
from collections import namedtuple
from pathlib import Path

from optserve.clients import elf
from optserve.clients.settings import OptccSettings


class ServiceFailure(Exception):
    """The service gave no usable answer; `unreachable` when later units should not try it either;
    `budget_cut` when the service itself answered that the unit's deadline ran out (it is up and tried: the
    outcome is the budget's, which the cache key holds, so it is cached as a deadline-cut answer is)."""

    def __init__(self, reason: str, unreachable: bool = False, budget_cut: bool = False):
        super().__init__(reason)
        self.unreachable = unreachable
        self.budget_cut = budget_cut


class NotAsked(namedtuple("NotAsked", "reason")):
    """The unit keeps clang's object without a service call: `reason` says why (its budget, no code)."""

    __slots__ = ()


def ask_within_budget(
    settings: OptccSettings,
    scratch: Path,
    bitcode_path: Path,
    timing,
    unit_started: float,
    unit_name: str,
    baseline_cost: int | None = None,
):
    """The service's response for the unit's bitcode, or why the service was not asked (NotAsked) or gave
    no answer (ServiceFailure).

    With a budget (OPTCC_BUDGET) the whole call should take at most `budget` times the unit's front end, the
    IR step (`timing["ir_step_s"]`; known when the call starts, before clang's back end ends): the deadline
    sent is that less OPTCC_CALL_OVERHEAD, what a call costs beyond its deadline (the service's grace for a
    compile running at the deadline, the gRPC call through Ray Serve's proxy), at most OPTCC_DEADLINE. The
    call runs beside clang's back end, so the unit takes about (1 + budget) x its front end, and never more
    than (1 + budget) x clang's whole compile, whatever the split (docs/bench/clients.md). A unit
    whose deadline would be below OPTCC_BUDGET_MIN is not sent: it keeps clang's object (below ~0.2 s
    nothing but the call's own cost fits, and on a unit clang compiles in 0.1-0.3 s that cost alone was 2-5
    times clang's). Told clang's size (OPTCC_CLANG_BASELINE=1; asked after clang's compile), a unit whose
    object from clang has no code is not sent either. `baseline_cost`: clang's `.text` bytes, known from
    the record of its object (baseline_memo.py)."""
    from optserve.clients import build_state

    if build_state.service_unreachable_since(settings.retry_s):
        return ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build")
    deadline_s = settings.deadline_s
    if settings.budget and not settings.stored:
        allowed = settings.budget * timing["ir_step_s"] - settings.call_overhead_s
        if allowed < settings.budget_min_s:
            return NotAsked(
                f"its budget, {settings.budget:g} x the front end's {timing['ir_step_s']:.2f} s less the "
                f"call's {settings.call_overhead_s:g} s, is below OPTCC_BUDGET_MIN "
                f"({settings.budget_min_s:g} s)"
            )
        deadline_s = min(deadline_s, allowed)
    if baseline_cost is None and settings.sends_clang_baseline:  # clang's compile ended (the call waited)
        baseline_cost = _clang_text(scratch / "clang.o")
        if baseline_cost is None:
            return NotAsked("clang's object has no code to make smaller")
        timing["baseline_cost"] = baseline_cost
    timing["deadline_s"] = round(deadline_s, 3)
    import_client()  # loaded beside clang's work already, or now (beside its back end)
    started = time.monotonic()
    timing["asked_s"] = round(started - unit_started, 3)  # the test of the call's order reads this
    bitcode = bitcode_path.read_bytes()
    timing["bitcode_bytes"] = len(bitcode)
    try:
        return _ask_service(settings, bitcode, deadline_s, baseline_cost, unit_name)
    except ServiceFailure as failure:
        return failure
    finally:
        timing["service_s"] = round(time.monotonic() - started, 3)


def _clang_text(path: Path) -> int | None:
    """`.text` bytes of clang's object, the service's baseline to beat; None if it has none to beat."""
    try:
        return elf.code_bytes(elf.sections(path.read_bytes())) or None
    except (OSError, elf.NotElf):
        return None


def _ask_service(
    settings: OptccSettings, bitcode: bytes, deadline_s: float, baseline_cost: int | None, unit_name: str = ""
):
    """The service's answer for the unit. With `baseline_cost` (clang's `.text` bytes) that is the service's
    baseline: it returns an object only for a candidate (its own -Oz among them) smaller than that. Without
    it the service's -Oz is its baseline and its best object comes back, compared here with clang's; the
    unoptimized input's cost, which this comparison does not use, is not compiled (`skip_input_cost`)."""
    strategy, samples = settings.for_unit(len(bitcode))
    baseline = {"skip_input_cost": True} if baseline_cost is None else {"baseline_cost": baseline_cost}
    if strategy == "stored":  # optcc compares with clang's object itself: the service compiles no -Oz
        baseline["client_compares"] = True
    import grpc

    from optserve.clients import channel_policy, service_call
    from optserve.clients.python.requests import DEADLINE_MARGIN_S, CallError

    started = time.monotonic()
    try:
        response = service_call.optimize(
            settings.server,
            bitcode,
            objective=settings.objective,
            strategy=strategy,
            samples=samples,
            deadline_s=deadline_s,
            return_object=True,
            unit_name=unit_name,
            **baseline,
        )
    except CallError as err:
        # A service that answers DEADLINE_EXCEEDED itself (its -Oz did not fit a unit's budget) is up; one
        # that let the call's own timeout (deadline + margin) run out is not.
        timed_out = time.monotonic() - started >= deadline_s + DEADLINE_MARGIN_S / 2
        unreachable = err.code is grpc.StatusCode.UNAVAILABLE or (
            err.code is grpc.StatusCode.DEADLINE_EXCEEDED and timed_out
        )
        budget_cut = err.code is grpc.StatusCode.DEADLINE_EXCEEDED and not timed_out
        reason = f"optserve at {settings.server} answered {err}"
        raise ServiceFailure(reason, unreachable, budget_cut) from None
    except channel_policy.Refused as err:  # plaintext beyond loopback: later units of the build skip it too
        raise ServiceFailure(str(err), unreachable=True) from None
    except Exception as err:  # never break a build over a client-side surprise
        raise ServiceFailure(f"calling optserve at {settings.server} failed: {err!r}") from None
    if not response.object_code and not clang_is_best(response):
        raise ServiceFailure(f"optserve at {settings.server} returned no object code")
    return response


def clang_is_best(response) -> bool:
    """The service found no candidate smaller than clang's object, whose size it was told: it sent none, and
    clang's object (whose `.text` optcc measured for the request) is the unit's, with no compile more."""
    from optserve.v1 import optserve_pb2 as pb  # loaded already by the gRPC client

    return response.best.source == pb.CLIENT_BASELINE and not response.object_code


def import_client() -> None:
    from optserve.clients import service_call  # noqa: F401
