"""The candidates the Optimize flow measures, and the order it answers them in.

One type from the compile to the answer: a measured candidate is the API's `schemas.Candidate` (built here by
`measured`, from the engine's pass list and the compiler's Evaluation), ranked by `rank` and sent as it is
(HTTP as JSON, gRPC converted once, serve/edges/codec.py). A failure is sent as cost -1 with an error, and
ranked last; a per-function candidate also holds, off the wire, the `FunctionLists` it compiles with.
"""

from __future__ import annotations

from collections.abc import Sequence

from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.passes import format_pass_list, to_opt_pipeline
from optserve.serve.schemas import Candidate, CandidateSource

# Among candidates of equal cost: the baseline first (the client's before -Oz: a tie keeps the client's
# code), then the model's, the coreset's, per-function lists, the tuning store's.
SOURCE_ORDER = {
    CandidateSource.CLIENT_BASELINE: -1,
    CandidateSource.OZ: 0,
    CandidateSource.MODEL: 1,
    CandidateSource.CORESET: 2,
    CandidateSource.PER_FUNCTION: 3,
    CandidateSource.TUNED: 4,
}


def measured(
    pass_list: Sequence[str],
    cost: int | None,
    source: CandidateSource,
    error: str | None = None,
    logprob: float = 0.0,
    function_lists: FunctionLists | None = None,
) -> Candidate:
    """A compiled candidate: `cost` under the objective, or `error` (a missing cost is an error too).

    `function_lists`: a candidate of a pass list per function (then `pass_list` is empty); the compiler
    compiles it again from `Candidate.job`."""
    failed = cost is None or bool(error)
    candidate = Candidate(
        pipeline=to_opt_pipeline(pass_list) if function_lists is None else "",
        passes=list(pass_list),
        cost=-1 if failed else cost,
        logprob=logprob,
        source=source,
        error=error or ("no cost" if failed else ""),
        function_passes=(
            {name: format_pass_list(p) for name, p in function_lists.lists} if function_lists else {}
        ),
    )
    candidate.hold_function_lists(function_lists)
    return candidate


def client_code(cost: int | None) -> Candidate:
    """The code the client holds: its cost when it sent one (`baseline_cost`), else unmeasured (-1, no
    error: `client_compares`, the client compares the answer with its own object)."""
    return Candidate(pipeline="", passes=[], cost=cost or -1, source=CandidateSource.CLIENT_BASELINE)


def failed(candidate: Candidate) -> bool:
    """Whether it did not compile or has no cost (never true of the client's baseline)."""
    unmeasured = candidate.cost < 0 or bool(candidate.error)
    return candidate.source != CandidateSource.CLIENT_BASELINE and unmeasured


def order(candidate: Candidate) -> tuple:
    """The ranking key: failed last; cheapest first; on a tie the baseline first (never replace it without
    a gain), then by source, then the likelier one, then the pass list (a total order)."""
    if candidate.source == CandidateSource.CLIENT_BASELINE and candidate.cost < 0:  # client_compares
        # unmeasured: below every candidate that compiled, above every one that failed
        return (False, float("inf"), SOURCE_ORDER[candidate.source], 0.0, ())
    bad = failed(candidate)
    cost = 0 if bad else candidate.cost
    return (bad, cost, SOURCE_ORDER[candidate.source], -candidate.logprob, tuple(candidate.passes))


def rank(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Cheapest first, failures last (`order`); equal requests rank equally."""
    return sorted(candidates, key=order)
