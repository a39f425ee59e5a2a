"""The Optimize flow as a plain module, without Ray: candidates ranked against -Oz, the answer cache,
feedback rounds and request validation.

Candidates come from a scripted generator (the real engine behind Ray is covered in test_serve_grpc.py), so
these tests can put a candidate that beats -Oz, ties it, or fails; compiling and measuring is real (the
compiler helper's crash-isolated pool).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from optserve.compiler.cache import ResultCache
from optserve.compiler.passes import to_opt_pipeline
from optserve.compiler.workers import CompilerPool
from optserve.serve import schemas
from optserve.serve.edges import codec
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.serve.optimize.optimizer import Optimizer
from optserve.v1 import optserve_pb2 as pb
from tests.serve.flow_helpers import SETTINGS, ScriptedGenerator, optimize


def test_every_candidate_source_is_a_value_of_the_proto_enum():
    candidates = [
        schemas.Candidate(pipeline="", passes=[], cost=1, source=source) for source in schemas.CandidateSource
    ]
    response = schemas.OptimizeResponse(
        ir_sha256="", objective="text_size", input_cost=1, oz_cost=1, candidates=candidates,
        best=candidates[0], improvement_over_oz_pct=0.0, timings=schemas.Timings(),
        model_id="", model_version="",
    )  # fmt: skip
    sent = [pb.CandidateSource.Name(c.source) for c in codec.optimize_response(response).candidates]
    names = [n for n in pb.CandidateSource.DESCRIPTOR.values_by_name if not n.endswith("_UNSPECIFIED")]
    assert sorted(sent) == sorted(names)  # one proto value for each source, none left over


def test_a_candidate_that_beats_oz_is_ranked_best(pool, unrolled_loop_ir):
    generator = ScriptedGenerator([("-O2",), ("sroa",)])
    response = optimize(
        generator, pool, schemas.OptimizeRequest(ir=unrolled_loop_ir, strategy="priority", samples=2)
    )
    assert response.best.passes == ["sroa"] and response.best.source == "model"
    assert response.best.cost < response.oz_cost
    assert response.improvement_over_oz_pct == pytest.approx(
        100 * (response.oz_cost - response.best.cost) / 25
    )
    assert [c.cost for c in response.candidates] == sorted(c.cost for c in response.candidates)
    assert {c.source for c in response.candidates} == {"model", "oz"}
    assert response.best.pipeline == to_opt_pipeline(("sroa",))  # `opt -passes=` syntax


def test_a_tie_keeps_oz_first_and_worse_candidates_follow(pool, sum_ir):
    generator = ScriptedGenerator([("-O2",), ("-Oz", "instcombine")])
    response = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, strategy="priority", samples=2))
    assert [c.passes for c in response.candidates] == [["-Oz"], ["-Oz", "instcombine"], ["-O2"]]
    assert response.best.source == "oz" and response.best.cost == response.oz_cost
    assert response.input_cost == 27 and response.oz_cost == 12


def test_the_model_repeating_oz_adds_no_duplicate(pool, add_ir):
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, schemas.OptimizeRequest(ir=add_ir))
    assert [c.passes for c in response.candidates] == [["-Oz"]]


def test_returned_ir_and_object_belong_to_the_best_candidate(pool, unrolled_loop_ir):
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, return_ir=True, return_object=True)
    response = optimize(ScriptedGenerator([("sroa",)]), pool, request)
    assert response.best.passes == ["sroa"]
    assert response.optimized_ir.count("\n  ") >= response.best.cost  # one line per instruction at least
    assert "alloca" not in response.optimized_ir  # sroa promoted every stack slot
    assert response.object_code.startswith(b"\x7fELF")


class OzUnavailable:
    """The real pool, except that -Oz alone (the baseline's job) fails after `delay_s`, as when the compiler
    replica compiling it dies (serve/replicas/handles.py: UNAVAILABLE)."""

    def __init__(self, pool: CompilerPool, delay_s: float):
        self.pool, self.delay_s = pool, delay_s

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        if list(pass_lists) == [("-Oz",)]:
            await asyncio.sleep(self.delay_s)
            raise ServiceError(ErrorKind.UNAVAILABLE, "a backend is unavailable, retry later")
        return await self.pool.evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)

    async def run_async(self, *args, **kwargs):  # the service's intake, as the pool runs it
        return await self.pool.run_async(*args, **kwargs)


def test_oz_failing_ends_the_request_at_once_not_after_the_other_candidates(pool, add_ir):
    """The caller learns at once that it may retry, with the rest of its deadline left for it."""
    generator = ScriptedGenerator([("sroa",)], delay_s=5.0)  # the model still sampling
    request = schemas.OptimizeRequest(ir=add_ir, strategy="priority", samples=3, deadline_s=30)
    optimizer = Optimizer(SETTINGS, generator, OzUnavailable(pool, 0.3), ResultCache(10), generator.metadata)
    started = time.monotonic()
    with pytest.raises(ServiceError) as caught:
        asyncio.run(optimizer.optimize(request))
    assert caught.value.kind is ErrorKind.UNAVAILABLE
    assert time.monotonic() - started < 2.0


def test_identical_requests_are_answered_from_the_cache(pool, sum_ir):
    cache = ResultCache(10)
    generator = ScriptedGenerator([("-O2",)])
    request = schemas.OptimizeRequest(ir=sum_ir)
    first = optimize(generator, pool, request, cache)
    second = optimize(generator, pool, request, cache)
    assert not first.cached and second.cached
    assert {c.source for c in second.candidates} == {"cache"}
    assert [c.passes for c in second.candidates] == [c.passes for c in first.candidates]
    assert len(generator.calls) == 1
    optimize(generator, pool, request.model_copy(update={"bypass_cache": True}), cache)
    assert len(generator.calls) == 2


def test_the_cache_never_answers_for_another_model_version(pool, sum_ir):
    cache = ResultCache(10)
    request = schemas.OptimizeRequest(ir=sum_ir)
    optimize(ScriptedGenerator([("-O2",)], version="v1"), pool, request, cache)
    again = optimize(ScriptedGenerator([("-O2",)], version="v2"), pool, request, cache)
    assert not again.cached


def test_feedback_rounds_tell_the_model_how_its_candidates_did(pool, unrolled_loop_ir):
    generator = ScriptedGenerator([[("-O2",)], [("sroa",)], [("sroa",)], [("-O1",)]], per_round=True)
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, feedback_rounds=2)
    response = optimize(generator, pool, request)
    assert generator.feedback[0] is None
    assert "pass list: -O2" in generator.feedback[1] and "valid: yes" in generator.feedback[1]
    assert "pass list: sroa" in generator.feedback[2]
    assert len(generator.calls) == 3  # 1 + 2 rounds; the last added nothing new, so no more would be asked
    assert response.best.passes == ["sroa"]
    assert all(options.predict_costs for options in generator.calls)  # feedback compares predicted counts


def test_feedback_stops_when_a_round_adds_nothing(pool, sum_ir):
    generator = ScriptedGenerator([[("-O2",)], [("-O2",)], [("sroa",)]], per_round=True)
    optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, feedback_rounds=2))
    assert len(generator.calls) == 2


def test_invalid_ir_is_invalid_argument(pool):
    with pytest.raises(ServiceError) as caught:
        optimize(ScriptedGenerator([]), pool, schemas.OptimizeRequest(ir="define i32 @f( {"))
    assert caught.value.kind is ErrorKind.INVALID_ARGUMENT and "does not parse" in caught.value.message


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"strategy": "priority", "samples": 11}, "samples: 11 is more than the limit of 10"),
        ({"samples": 3}, "greedy decoding gives one candidate"),
        ({"feedback_rounds": 3}, "feedback_rounds: 3 is more than the limit of 2"),
        ({"deadline_s": 301.0}, "deadline_s: 301.0 is more than the limit"),
    ],
)
def test_options_outside_the_limits_are_invalid_argument(pool, add_ir, fields, complaint):
    with pytest.raises(ServiceError) as caught:
        optimize(ScriptedGenerator([]), pool, schemas.OptimizeRequest(ir=add_ir, **fields))
    assert caught.value.kind is ErrorKind.INVALID_ARGUMENT
    assert complaint in caught.value.message


def test_a_model_that_is_not_ready_is_unavailable(pool, add_ir):
    with pytest.raises(ServiceError) as caught:
        optimize(ScriptedGenerator([], ready=False), pool, schemas.OptimizeRequest(ir=add_ir))
    assert caught.value.kind is ErrorKind.UNAVAILABLE and "weights missing" in caught.value.message
