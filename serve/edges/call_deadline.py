"""The gRPC call's deadline at the ingress: read from the metadata the proxy adds, made the work's deadline.

Ray Serve's gRPC proxy does not pass the call's deadline on to the replica (its context has no
`time_remaining`), so the proxy's edge (serve/edges/grpc_edge.py) adds it to the call's metadata as a Unix
time: absolute, so that time queued between proxy and replica counts against it. Proxy and ingress share a
clock on one machine; on a cluster their clocks must agree to well under the deadlines callers use (NTP does).
"""

from __future__ import annotations

from optserve.deadline import ANSWER_MARGIN_S, Deadline
from optserve.serve import schemas

DEADLINE_KEY = "optserve-deadline"  # invocation metadata: the call's deadline, Unix time in seconds


def call_deadline(metadata) -> Deadline | None:
    """The deadline of the call whose invocation metadata is `metadata`; None when it has none."""
    for key, value in metadata or ():
        if key == DEADLINE_KEY:
            try:
                return Deadline.from_wall(float(value))
            except ValueError:
                return None
    return None


def work_deadline(call: Deadline) -> Deadline:
    """When the work of a call due at `call` (not yet passed) must be done so that its answer still reaches
    the caller: ANSWER_MARGIN_S before the call's deadline, or halfway to it for a short call."""
    return Deadline(max(call.at - ANSWER_MARGIN_S, call.share(0.5).at))


def fit_optimize(
    request: schemas.OptimizeRequest, work: Deadline, default_s: float, max_s: float
) -> schemas.OptimizeRequest:
    """`request` with its deadline (its own, else the server's default) cut to what the work's deadline
    `work` leaves. A deadline over the limit is left as asked, to be refused as such."""
    asked_s = request.deadline_s or default_s
    budget_s = work.remaining_s()
    if asked_s > max_s or budget_s >= asked_s:
        return request
    return request.model_copy(update={"deadline_s": budget_s})
