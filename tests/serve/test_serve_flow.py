"""The Optimize flow, the cache key, access checks and the gRPC codec as plain modules, without Ray.

Candidates come from a scripted generator (the real engine behind Ray is covered in test_serve_grpc.py), so
these tests can put a candidate that beats -Oz, ties it, or arrives after the deadline; compiling and
measuring is real (the compiler helper's crash-isolated pool).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from optserve.compiler.cache import ResultCache
from optserve.compiler.cost import text_size
from optserve.compiler.function_lists import defined_function_count, split_unit
from optserve.compiler.ir import StoppedError, instruction_count, split_functions
from optserve.compiler.passes import format_pass_list, to_opt_pipeline
from optserve.compiler.pipeline import evaluate
from optserve.compiler.unit_search import REFINE_PASSES
from optserve.compiler.workers import CompilerPool
from optserve.config import Settings
from optserve.engine.backend import DecoderDeadError
from optserve.engine.coreset import Coreset
from optserve.engine.interface import Candidate, Generation, PromptTooLongError, SamplingOptions, Strategy
from optserve.serve import codec, schemas
from optserve.serve.access import check_peer, check_token, is_loopback_host, peer_host
from optserve.serve.engine_host import EngineHost
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.serve.optimize import Optimizer, _Sampled
from optserve.serve.result_cache import answer_key
from optserve.serve.stoppable import in_thread
from optserve.v1 import optserve_pb2 as pb
from tests.serve.serve_helpers import slow_candidates_module, slow_module

# Model candidates alone (the coreset's lists beside them have their own test).
SETTINGS = Settings.model_validate(
    {"engine": {"max_samples": 10, "max_feedback_rounds": 2, "coreset_lists_with_model": 0}}
)


class ScriptedGenerator:
    """Returns the given pass lists (after `delay_s`), as a model with `version` would.

    `pass_lists` is one list of pass lists for every call, or (`per_round=True`) one such list per call.
    """

    def __init__(
        self, pass_lists, delay_s=0.0, version="v1", ready=True, error=None, per_round=False
    ):  # fmt: skip
        self.rounds = pass_lists if per_round else [pass_lists]
        self.delay_s = delay_s
        self.version = version
        self.ready = ready
        self.error = error
        self.calls: list[SamplingOptions] = []
        self.feedback: list[str | None] = []

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None) -> Generation:
        self.calls.append(options)
        self.feedback.append(feedback)
        if self.error is not None:
            raise self.error
        await asyncio.sleep(self.delay_s)
        pass_lists = self.rounds[min(len(self.calls), len(self.rounds)) - 1]
        candidates = tuple(Candidate(tuple(p), -float(i)) for i, p in enumerate(pass_lists))
        return Generation(candidates, "scripted", tokens_computed=0)

    async def metadata(self) -> schemas.ModelMetadata:
        return schemas.ModelMetadata(
            name="scripted",
            version=self.version,
            backend="torch",
            platform="cpu",
            ready=self.ready,
            reason="" if self.ready else "weights missing",
            strategies=["greedy", "priority", "nucleus"],
            max_samples=10,
            max_feedback_rounds=2,
            max_ir_bytes=1 << 20,
        )


@pytest.fixture(scope="module")
def pool():
    with CompilerPool(processes=2, timeout_s=20) as compiler_pool:
        yield compiler_pool


def optimize(
    generator, pool, request: schemas.OptimizeRequest, cache: ResultCache | None = None, settings=None
):
    cache = cache if cache is not None else ResultCache(10)
    optimizer = Optimizer(settings or SETTINGS, generator, pool, cache, generator.metadata)
    return asyncio.run(optimizer.optimize(request))


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


def test_a_deadline_cuts_sampling_and_returns_oz(pool, add_ir):
    generator = ScriptedGenerator([("sroa",)], delay_s=5.0)
    request = schemas.OptimizeRequest(ir=add_ir, strategy="priority", samples=3, deadline_s=0.3)
    cache = ResultCache(10)
    response = optimize(generator, pool, request, cache)
    assert response.deadline_hit and response.best.source == "oz"
    assert response.timings.total_s < 2.0
    assert generator.calls[0].deadline_s == pytest.approx(0.3, abs=0.1)  # the engine is told its budget
    assert len(cache) == 0  # an answer cut short is never cached
    assert response.input_cost == -1  # the input's cost is measured last, within the deadline only


class OzUnavailable:
    """The real pool, except that -Oz alone (the baseline's job) fails after `delay_s`, as when the compiler
    replica compiling it dies (serve/ray_errors.py: UNAVAILABLE)."""

    def __init__(self, pool: CompilerPool, delay_s: float):
        self.pool, self.delay_s = pool, delay_s

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        if list(pass_lists) == [("-Oz",)]:
            await asyncio.sleep(self.delay_s)
            raise ServiceError(ErrorKind.UNAVAILABLE, "a backend is unavailable, retry later")
        return await self.pool.evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)


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


# On slow_candidates_module these take ~15 s each, as -Oz does (2 shared cores): both workers are busy.
SLOW_LISTS = [("-Oz", "instcombine"), ("-Oz", "sroa")]
STOP_BOUND_S = 1.0  # answer past the deadline: BACKEND_GRACE_S, the pool's stop, a loaded machine's slack
# A stopped worker restarts in ~0.15 s on an idle machine, 1-5 s at a load of 10-19 on 2 shared cores.
RESTART_BOUND_S = 6.0


@pytest.fixture(scope="module")
def slow_candidates_ir() -> str:
    return slow_candidates_module()


def test_a_request_cut_by_its_deadline_leaves_no_compile_running(pool, add_ir, slow_candidates_ir):
    """-Oz and the model's lists are still compiling at the deadline (seconds of work left): the answer (the
    client's baseline) comes at the deadline and those compiles are stopped, not left to run on in the
    workers and the threads, so a small request right after is answered at once and the pool is whole again.
    Before, both workers ran on ~13 s past the deadline, and the small request waited for them."""
    deadline_s = 2.0
    slow = schemas.OptimizeRequest(
        ir=slow_candidates_ir, strategy="priority", samples=2, deadline_s=deadline_s, baseline_cost=10**6
    )
    small = schemas.OptimizeRequest(ir=add_ir, strategy="priority", samples=1, bypass_cache=True)

    async def one_after_the_other() -> tuple[float, float]:
        generator = ScriptedGenerator(SLOW_LISTS)
        started = time.monotonic()
        answer = await Optimizer(SETTINGS, generator, pool, ResultCache(10), generator.metadata).optimize(
            slow
        )
        answered_s = time.monotonic() - started
        assert answer.deadline_hit and answer.oz_skipped and answer.best.source == "client_baseline"
        assert [c.source for c in answer.candidates] == ["client_baseline"]  # the cut ones are left out
        started = time.monotonic()
        second = await Optimizer(SETTINGS, generator, pool, ResultCache(10), generator.metadata).optimize(
            small
        )
        assert not second.deadline_hit and second.best.cost <= second.oz_cost
        return answered_s, time.monotonic() - started

    started = time.monotonic()
    answered_s, small_s = asyncio.run(one_after_the_other())
    ended_s = time.monotonic() - started  # asyncio.run also waits for its threads: none may be left busy
    print(
        f"cut answered {answered_s:.2f} s (deadline {deadline_s:g} s), "
        f"small {small_s:.2f} s, done {ended_s:.2f} s"
    )
    assert answered_s < deadline_s + STOP_BOUND_S, answered_s
    assert small_s < RESTART_BOUND_S, small_s  # it waits for a restart; the compiles cut had ~13 s left
    assert ended_s < deadline_s + STOP_BOUND_S + RESTART_BOUND_S, ended_s
    deadline = time.monotonic() + 5.0
    while pool.idle_workers() < pool.processes:
        assert time.monotonic() < deadline, f"{pool.idle_workers()} of {pool.processes} workers idle"
        time.sleep(0.01)  # polling the pool, bounded by the deadline
    assert pool.busy_worker_pids() == []


def test_the_input_cost_is_measured_when_the_deadline_leaves_time(pool, add_ir):
    request = schemas.OptimizeRequest(ir=add_ir, strategy="priority", samples=1, deadline_s=10)
    response = optimize(ScriptedGenerator([("sroa",)]), pool, request)
    assert response.input_cost == instruction_count(add_ir) and not response.deadline_hit


class CountingCompiler:
    """The real pool, noting every pass list it is asked to compile."""

    def __init__(self, pool):
        self.pool = pool
        self.compiled: list[tuple[str, ...]] = []

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        self.compiled += [tuple(p) for p in pass_lists]
        return await self.pool.evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)


class SlowOzCompiler(CountingCompiler):
    """The real pool, with -Oz's compile taking `delay_s` longer (as a long unit's -Oz does)."""

    def __init__(self, pool, delay_s: float):
        super().__init__(pool)
        self.delay_s = delay_s

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        if [tuple(p) for p in pass_lists] == [("-Oz",)]:
            await asyncio.sleep(self.delay_s)
        return await super().evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)


def test_a_client_baseline_compiles_oz_beside_the_model_but_not_the_input(pool, unrolled_loop_ir):
    def compiled(**options) -> tuple[list, schemas.OptimizeResponse]:
        compiler = CountingCompiler(pool)
        response = optimize(ScriptedGenerator([("sroa",)]), compiler, schemas.OptimizeRequest(**options))
        return compiler.compiled, response

    lists, own = compiled(ir=unrolled_loop_ir)
    assert sorted(lists) == [(), ("-Oz",), ("sroa",)] and not own.oz_skipped  # the input, -Oz, the model's
    lists, answer = compiled(ir=unrolled_loop_ir, baseline_cost=own.oz_cost)
    assert sorted(lists) == [("-Oz",), ("sroa",)]  # -Oz and the model's list, not the input
    assert not answer.oz_skipped and (answer.oz_cost, answer.input_cost) == (own.oz_cost, -1)
    # -Oz ties the client's cost: the client's code ranks first of the two
    assert [c.source for c in answer.candidates] == ["model", "client_baseline", "oz"]
    assert answer.best.cost == own.best.cost and answer.best.passes == ["sroa"]
    assert answer.improvement_over_oz_pct == pytest.approx(own.improvement_over_oz_pct)


def test_skip_input_cost_compiles_oz_and_the_model_s_lists_but_not_the_input(pool, unrolled_loop_ir):
    """optcc compares the answer's object with its clang's itself: the input's cost is a compile it does not
    use. -Oz stays the baseline, and the answer (its input_cost -1) is complete enough to be cached."""
    cache, compiler = ResultCache(10), CountingCompiler(pool)
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, skip_input_cost=True)
    answer = optimize(ScriptedGenerator([("sroa",)]), compiler, request, cache)
    assert sorted(compiler.compiled) == [("-Oz",), ("sroa",)]  # no () list: the input was not compiled
    assert answer.input_cost == -1 and answer.oz_cost > 0 and not answer.oz_skipped
    assert answer.best.cost <= answer.oz_cost
    assert optimize(ScriptedGenerator([("sroa",)]), compiler, request, cache).cached


def test_a_candidate_is_best_only_when_it_costs_less_than_the_client_baseline(pool, unrolled_loop_ir):
    sroa = evaluate(unrolled_loop_ir, ("sroa",), "instruction_count").cost
    oz = evaluate(unrolled_loop_ir, ("-Oz",), "instruction_count").cost
    assert sroa < oz

    def answer(baseline_cost: int) -> schemas.OptimizeResponse:
        request = schemas.OptimizeRequest(
            ir=unrolled_loop_ir, baseline_cost=baseline_cost, return_object=True
        )
        return optimize(ScriptedGenerator([("sroa",)]), pool, request)

    beaten = answer(sroa + 1)
    assert beaten.best.passes == ["sroa"] and beaten.best.cost == sroa
    assert beaten.object_code.startswith(b"\x7fELF")  # the candidate's object, compiled for the answer
    for baseline_cost in (sroa, sroa - 1):  # a tie keeps the client's code, as it keeps -Oz
        kept = answer(baseline_cost)
        assert kept.best.source == "client_baseline" and kept.best.cost == baseline_cost
        assert kept.best.passes == [] and kept.object_code is None  # the client holds that code
        assert [c.cost for c in kept.candidates] == [baseline_cost, sroa, oz]
        assert kept.improvement_over_oz_pct == 0.0


def test_with_a_client_baseline_the_strictly_smallest_of_oz_and_the_model_wins(pool, sum_ir):
    """The answer is the cheapest of {-Oz, the model's candidates} when it costs less than the client's,
    else the client's; -Oz's object comes from its one compile beside the model."""
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    o0 = evaluate(sum_ir, ("-O0",), "instruction_count").cost
    assert oz < o0  # the model proposes a list worse than -Oz

    def answer(baseline_cost: int) -> tuple[list, schemas.OptimizeResponse]:
        compiler = CountingCompiler(pool)
        request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=baseline_cost, return_object=True)
        return compiler.compiled, optimize(ScriptedGenerator([("-O0",)]), compiler, request)

    for baseline_cost, winner in (
        (oz + 1, "oz"),
        (10 * o0, "oz"),
        (oz, "client_baseline"),
        (1, "client_baseline"),
    ):
        lists, response = answer(baseline_cost)
        assert response.best.source == winner, baseline_cost
        assert sorted(lists) == [("-O0",), ("-Oz",)]  # each once: -Oz's win needs no second compile
        assert response.oz_cost == oz and not response.oz_skipped and not response.deadline_hit
        if winner == "oz":
            assert response.best.cost == oz and response.object_code.startswith(b"\x7fELF")
        else:
            assert response.best.cost == baseline_cost and response.object_code is None


def test_a_model_list_equal_to_oz_is_not_compiled_twice(pool, sum_ir):
    compiler = CountingCompiler(pool)
    request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000)
    response = optimize(ScriptedGenerator([("-Oz",)]), compiler, request)
    assert compiler.compiled == [("-Oz",)]
    assert response.best.passes == ["-Oz"] and response.best.source == "oz"
    assert response.best.cost == evaluate(sum_ir, ("-Oz",), "instruction_count").cost


def test_with_a_client_baseline_the_answer_waits_for_oz(pool, sum_ir):
    """-Oz slower than the model's candidates is still waited for, within the deadline: the answer does not
    depend on which finished first."""
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=oz + 1, deadline_s=10)
    response = optimize(ScriptedGenerator([("-O0",)]), SlowOzCompiler(pool, 1.0), request)
    assert response.best.source == "oz" and response.best.cost == oz and response.oz_cost == oz
    assert not response.deadline_hit and not response.oz_skipped


def test_oz_not_finishing_by_the_deadline_leaves_the_client_baseline_or_the_model(pool, sum_ir):
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    o0 = evaluate(sum_ir, ("-O0",), "instruction_count").cost
    for baseline_cost, winner in ((oz + 1, "client_baseline"), (o0 + 1, "model")):
        request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=baseline_cost, deadline_s=0.5)
        cache = ResultCache(10)
        started = time.monotonic()
        response = optimize(ScriptedGenerator([("-O0",)]), SlowOzCompiler(pool, 5.0), request, cache)
        assert time.monotonic() - started < 2.0
        assert response.deadline_hit and response.oz_skipped and response.oz_cost == -1
        assert response.best.source == winner and "oz" not in [c.source for c in response.candidates]
        assert len(cache) == 0  # an answer cut short is not cached


def test_a_deadline_with_a_client_baseline_answers_that_baseline_not_an_error(pool, add_ir):
    generator = ScriptedGenerator([("sroa",)], delay_s=5.0)
    request = schemas.OptimizeRequest(ir=add_ir, baseline_cost=1, deadline_s=0.3)
    cache = ResultCache(10)
    response = optimize(generator, pool, request, cache)
    assert response.deadline_hit and response.best.source == "client_baseline" and response.best.cost == 1
    assert [c.source for c in response.candidates] == ["client_baseline", "oz"]  # -Oz finished, the model not
    assert response.timings.total_s < 2.0 and len(cache) == 0


def test_an_answer_to_a_client_baseline_is_cached_under_that_baseline(pool, sum_ir):
    cache = ResultCache(10)
    generator = ScriptedGenerator([("-O2",)])
    first = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000), cache)
    again = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000), cache)
    other = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=1), cache)
    assert not first.cached and again.cached and again.oz_cost == first.oz_cost > 0
    assert again.best.cost == first.best.cost < 10_000
    assert not other.cached and other.best.source == "client_baseline"
    cached_baseline = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=1), cache)
    assert cached_baseline.cached and cached_baseline.best.source == "client_baseline"


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


def with_coreset(tmp_path, lists, objective="instruction_count", fallback=10, beside=0) -> Settings:
    path = tmp_path / "coreset.json"
    items = [{"passes": list(p), "gain": 0.0, "wins": 0} for p in lists]
    path.write_text(json.dumps({"version": "test", "objectives": {objective: items}}))
    engine = {"max_samples": 10, "max_feedback_rounds": 2, "coreset_path": str(path)}
    engine |= {"coreset_fallback_lists": fallback, "coreset_lists_with_model": beside}
    return Settings.model_validate({"engine": engine})


def test_a_module_longer_than_the_context_gets_oz_with_a_warning_without_a_coreset(pool, add_ir, tmp_path):
    generator = ScriptedGenerator([], error=PromptTooLongError("the prompt has 9000 tokens"))
    no_coreset = Settings.model_validate({"engine": {"coreset_path": str(tmp_path / "missing.json")}})
    response = optimize(generator, pool, schemas.OptimizeRequest(ir=add_ir), settings=no_coreset)
    assert response.best.source == "oz" and "9000 tokens" in response.warning
    assert [c.source for c in response.candidates] == ["oz"]
    switched_off = with_coreset(tmp_path, [("sroa",)], fallback=0)  # engine.coreset_fallback_lists: 0
    response = optimize(generator, pool, schemas.OptimizeRequest(ir=add_ir), settings=switched_off)
    assert [c.source for c in response.candidates] == ["oz"] and "0 coreset lists" in response.warning


def test_a_module_longer_than_the_context_gets_the_coreset_lists(pool, unrolled_loop_ir, tmp_path):
    settings = with_coreset(tmp_path, [("-O2",), ("sroa",), ("-O1",)], fallback=2)
    generator = ScriptedGenerator([], error=PromptTooLongError("the prompt has 9000 tokens"))
    response = optimize(generator, pool, schemas.OptimizeRequest(ir=unrolled_loop_ir), settings=settings)
    assert {tuple(c.passes) for c in response.candidates} == {("-Oz",), ("-O2",), ("sroa",)}
    assert response.best.passes == ["sroa"] and response.best.source == "coreset"
    assert "9000 tokens" in response.warning and "2 coreset lists" in response.warning


def test_a_long_module_whose_deadline_passed_while_the_model_tried_it_gets_oz_not_an_error(pool, add_ir):
    """The model may answer "too long" only after the deadline: the unit then gets no function lists (an
    engine call with no time left was an INTERNAL error), and the answer says the deadline cut it."""
    generator = ScriptedGenerator([("sroa",)])
    optimizer = Optimizer(SETTINGS, generator, pool, ResultCache(1), generator.metadata)
    sampled = _Sampled()
    request = schemas.OptimizeRequest(ir=add_ir)
    asyncio.run(optimizer._long_module(add_ir, request, time.monotonic() - 0.1, sampled, "9000 tokens"))
    assert sampled.deadline_hit and not sampled.measured and not generator.calls


class PerFunctionGenerator(ScriptedGenerator):
    """A model whose context holds one function: a module of several is too long; one function gets lists."""

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None) -> Generation:
        if ir.count("define ") > 1:
            self.calls.append(options)
            raise PromptTooLongError("the prompt has 9000 tokens")
        return await super().generate(ir, options, feedback)


def test_a_module_longer_than_the_context_gets_lists_for_its_largest_functions(
    pool, unrolled_loop_ir, add_ir, tmp_path
):
    # Two functions: the unrolled loop (largest; sroa beats -Oz on it) and a small add.
    unit = unrolled_loop_ir + add_ir.replace("@f(", "@g(")
    generator = PerFunctionGenerator([("sroa",), ("-O2",)])
    request = schemas.OptimizeRequest(ir=unit, strategy="priority", samples=2)
    no_coreset = Settings.model_validate(
        {"engine": {"max_samples": 10, "coreset_path": str(tmp_path / "missing.json")}}
    )
    response = optimize(generator, pool, request, settings=no_coreset)
    assert response.best.passes == ["sroa"] and response.best.source == "model"
    assert response.best.cost < response.oz_cost  # measured on the whole unit
    assert "2 lists from its 2 largest functions" in response.warning and "9000 tokens" in response.warning
    assert len(generator.calls) == 3  # the whole unit once, then each function
    assert optimize(generator, pool, request, settings=no_coreset).candidates == response.candidates


def test_the_functions_read_for_a_long_module_can_be_switched_off(pool, unrolled_loop_ir, add_ir):
    generator = PerFunctionGenerator([("sroa",)])
    off = Settings.model_validate({"engine": {"max_samples": 10, "unit_function_prompts": 0}})
    unit = unrolled_loop_ir + add_ir.replace("@f(", "@g(")
    response = optimize(generator, pool, schemas.OptimizeRequest(ir=unit), settings=off)
    assert "model" not in {c.source for c in response.candidates} and len(generator.calls) == 1


def test_strategy_coreset_serves_its_first_lists_without_the_model(pool, unrolled_loop_ir, tmp_path):
    settings = with_coreset(tmp_path, [("sroa",), ("-O2",), ("-O1",)])
    never = ScriptedGenerator([], error=AssertionError("the model must not be asked"), ready=False)
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, strategy="coreset", samples=2)
    response = optimize(never, pool, request, settings=settings)
    assert [c.passes for c in response.candidates][0] == ["sroa"] and response.best.source == "coreset"
    assert {tuple(c.passes) for c in response.candidates} == {("-Oz",), ("sroa",), ("-O2",)}
    assert never.calls == []
    assert (
        optimize(never, pool, request, settings=settings).candidates == response.candidates
    )  # deterministic


def test_strategy_ranked_coreset_has_the_model_rank_the_coreset_lists(pool, unrolled_loop_ir, tmp_path):
    settings = with_coreset(tmp_path, [("-O2",), ("sroa",), ("-O1",)])
    generator = ScriptedGenerator([("sroa",), ("-O1",)])  # the model's two likeliest of the three
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, strategy="ranked_coreset", samples=2)
    response = optimize(generator, pool, request, settings=settings)
    (options,) = generator.calls
    assert options.strategy is Strategy.PRIORITY and options.samples == 2
    assert options.allowed_lists == (("-O2",), ("sroa",), ("-O1",))
    assert response.best.passes == ["sroa"] and response.best.source == "model"
    no_coreset = with_coreset(tmp_path, [("sroa",)], objective="text_size")
    with pytest.raises(ServiceError) as caught:
        optimize(generator, pool, request, settings=no_coreset)
    assert caught.value.kind is ErrorKind.INVALID_ARGUMENT and "ranked_coreset" in caught.value.message


def test_the_coreset_s_first_lists_are_compiled_beside_the_model_s(pool, unrolled_loop_ir, tmp_path):
    settings = with_coreset(tmp_path, [("-O1",), ("sroa",), ("-O2",)], beside=2)
    generator = ScriptedGenerator([("-O1",), ("-O3",)])  # -O1 is drawn: not compiled twice
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, strategy="priority", samples=2)
    response = optimize(generator, pool, request, settings=settings)
    assert sorted((c.source, tuple(c.passes)) for c in response.candidates) == [
        ("coreset", ("sroa",)), ("model", ("-O1",)), ("model", ("-O3",)), ("oz", ("-Oz",))
    ]  # fmt: skip
    assert response.best.passes == ["sroa"] and response.best.source == "coreset"


def test_strategy_coreset_without_a_coreset_for_the_objective_is_invalid(pool, add_ir, tmp_path):
    settings = with_coreset(tmp_path, [("sroa",)], objective="text_size")
    request = schemas.OptimizeRequest(ir=add_ir, strategy="coreset", samples=1)
    with pytest.raises(ServiceError) as caught:
        optimize(ScriptedGenerator([]), pool, request, settings=settings)
    assert caught.value.kind is ErrorKind.INVALID_ARGUMENT and "no coreset" in caught.value.message


def test_the_cache_key_covers_ir_options_and_model_version():
    request = schemas.OptimizeRequest(ir="x", strategy="priority", samples=5)
    digest = hashlib.sha256(b"x").hexdigest()
    key = answer_key(digest, request, "v1")
    assert key != answer_key(hashlib.sha256(b"y").hexdigest(), request, "v1")
    assert key != answer_key(digest, request, "v2")
    assert key != answer_key(digest, request.model_copy(update={"samples": 6}), "v1")
    assert key != answer_key(digest, request.model_copy(update={"objective": "text_size"}), "v1")
    assert key != answer_key(digest, request.model_copy(update={"return_object": True}), "v1")
    assert key == answer_key(digest, request.model_copy(update={"deadline_s": 3.0}), "v1")
    assert key == answer_key(digest, request.model_copy(update={"seed": 4}), "v1")  # not nucleus
    nucleus = request.model_copy(update={"strategy": "nucleus"})
    assert answer_key(digest, nucleus, "v1") != answer_key(
        digest, nucleus.model_copy(update={"seed": 4}), "v1"
    )


def test_the_cache_forgets_the_least_recently_used_entry():
    cache = ResultCache(2)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"
    cache.put("c", "C")
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C"


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:127.0.0.1:5000", "127.0.0.1"), ("ipv6:%5B::1%5D:5000", "::1"), ("ipv4:10.1.2.3:80", "10.1.2.3")],
)
def test_peer_addresses_are_read_from_grpc_peer_strings(peer, host):
    assert peer_host(peer) == host


def test_a_loopback_service_refuses_other_hosts_only():
    check_peer("ipv4:127.0.0.1:5000", "127.0.0.1")
    check_peer("ipv6:%5B::1%5D:5000", "localhost")
    check_peer("ipv4:10.1.2.3:5000", "0.0.0.0")
    with pytest.raises(ServiceError) as caught:
        check_peer("ipv4:10.1.2.3:5000", "127.0.0.1")
    assert caught.value.kind is ErrorKind.PERMISSION_DENIED
    assert is_loopback_host("::1") and not is_loopback_host("0.0.0.0")


def test_a_token_is_required_only_when_configured():
    check_token(None, None)
    check_token("Bearer s3cret", "s3cret")
    for presented in (None, "", "Bearer wrong", "s3cret", "Basic s3cret"):
        with pytest.raises(ServiceError) as caught:
            check_token(presented, "s3cret")
        assert caught.value.kind is ErrorKind.UNAUTHENTICATED


def test_proto_zeros_mean_the_documented_defaults():
    request = codec.optimize_request(pb.OptimizeRequest(ir_text="x"))
    assert (request.ir, request.strategy, request.objective, request.samples) == (
        "x",
        "greedy",
        "instruction_count",
        1,
    )
    assert request.deadline_s is None and request.temperature == 1.0


def test_the_coreset_strategy_and_source_cross_the_grpc_edge(pool, unrolled_loop_ir, tmp_path):
    request = codec.optimize_request(pb.OptimizeRequest(ir_text="x", strategy=pb.CORESET, samples=3))
    assert (request.strategy, request.samples) == ("coreset", 3)
    settings = with_coreset(tmp_path, [("sroa",)])
    response = optimize(
        ScriptedGenerator([]), pool, request.model_copy(update={"ir": unrolled_loop_ir}), settings=settings
    )
    message = codec.optimize_response(response)
    assert message.best.source == pb.CORESET_LIST and list(message.best.passes) == ["sroa"]


def test_bitcode_arrives_raw_over_grpc():
    request = codec.optimize_request(
        pb.OptimizeRequest(ir_bitcode=b"BC\xc0\xde\x01", strategy=pb.PRIORITY, samples=4)
    )
    assert request.ir is None and request.module_bytes == b"BC\xc0\xde\x01" and request.samples == 4


@pytest.mark.parametrize(
    "message",
    [
        pb.OptimizeRequest(),
        pb.OptimizeRequest(ir_text="x", deadline_s=-1),
        pb.OptimizeRequest(ir_text="x", top_p=2),
        pb.OptimizeRequest(ir_text="x", baseline_cost=0),
        pb.OptimizeRequest(ir_text="x", baseline_cost=-5),
    ],
)
def test_malformed_grpc_requests_are_invalid_argument(message):
    with pytest.raises(ServiceError) as caught:
        codec.optimize_request(message)
    assert caught.value.kind.grpc_code is grpc.StatusCode.INVALID_ARGUMENT


def test_skip_input_cost_crosses_the_grpc_edge():
    assert not codec.optimize_request(pb.OptimizeRequest(ir_text="x")).skip_input_cost
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x", skip_input_cost=True)).skip_input_cost


def test_a_client_baseline_crosses_the_grpc_edge_only_when_set():
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x")).baseline_cost is None
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x", baseline_cost=420)).baseline_cost == 420
    response = schemas.OptimizeResponse.model_validate(
        {
            "ir_sha256": "0" * 64,
            "objective": "text_size",
            "input_cost": -1,
            "oz_cost": -1,
            "candidates": [{"pipeline": "", "passes": [], "cost": 420, "source": "client_baseline"}],
            "best": {"pipeline": "", "passes": [], "cost": 420, "source": "client_baseline"},
            "improvement_over_oz_pct": 0.0,
            "timings": {},
            "model_id": "m",
            "model_version": "v",
            "oz_skipped": True,
        }
    )
    message = codec.optimize_response(response)
    assert message.oz_skipped and message.best.source == pb.CLIENT_BASELINE and message.oz_cost == -1


def test_a_missing_model_directory_is_reported_not_fatal(tmp_path):
    settings = Settings.model_validate({"engine": {"model_dir": str(tmp_path / "absent")}})
    host = EngineHost(settings.engine, settings.compiler)
    metadata = host.metadata()
    assert not metadata.ready and str(tmp_path / "absent") in metadata.reason
    with pytest.raises(ServiceError) as caught:
        asyncio.run(host.generate("", SamplingOptions(), None))
    assert caught.value.kind is ErrorKind.UNAVAILABLE


class _DeadEngine:
    """An engine whose backend process died: every call says so."""

    model_id = "dead-model"

    async def generate(self, ir, options, feedback):
        raise DecoderDeadError("the vLLM engine core or its worker process died")

    async def check_health(self):
        raise DecoderDeadError("the vLLM engine core or its worker process died")


def test_a_dead_engine_answers_unavailable_and_fails_the_health_check(tmp_path):
    settings = Settings.model_validate({"engine": {"model_dir": str(tmp_path / "absent")}})
    host = EngineHost(settings.engine, settings.compiler)
    asyncio.run(host.check_health())  # a model that never loaded is no reason to replace the replica
    host.engine, host.reason = _DeadEngine(), ""
    with pytest.raises(ServiceError) as caught:
        asyncio.run(host.generate("", SamplingOptions(), None))
    assert caught.value.kind is ErrorKind.UNAVAILABLE and "died" in caught.value.message
    metadata = host.metadata()
    assert not metadata.ready and "died" in metadata.reason and "restarted" in metadata.reason
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(host.check_health())


def test_metrics_are_summed_over_replicas_and_nodes_of_one_application():
    from optserve.serve.metrics import REQUESTS, sum_over_replicas

    def node(worker: str, app: str, value: float) -> str:
        labels = f'WorkerId="{worker}",application="{app}",code="OK",operation="optimize",protocol="grpc"'
        return f"# TYPE x counter\nray_optserve_requests_total{{{labels}}} {value}\n"

    nodes = [node("a", "optserve", 2), node("b", "optserve", 3), node("c", "other", 7)]
    text = sum_over_replicas(nodes, "optserve")
    line = 'optserve_requests_total{operation="optimize",protocol="grpc",code="OK"} 5.0'
    assert line in text.splitlines() and f"# TYPE {REQUESTS.name} counter" in text


UNIT_PROGRAM = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"


@pytest.fixture(scope="module")
def unit_ir() -> str:
    """A whole C program of several functions, compiled to IR as optcc compiles a unit."""
    command = ["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w", "-o", "-"]
    return subprocess.run([*command, str(UNIT_PROGRAM)], check=True, capture_output=True, text=True).stdout


def _run_object(object_code: bytes, directory: Path) -> str:
    (directory / "unit.o").write_bytes(object_code)
    subprocess.run(["clang-19", str(directory / "unit.o"), "-o", str(directory / "unit")], check=True)
    return subprocess.run([str(directory / "unit")], check=True, capture_output=True, text=True).stdout


def test_a_unit_of_several_functions_gets_a_list_per_function_and_its_object_runs(pool, unit_ir, tmp_path):
    settings = Settings.model_validate({"engine": {"unit_function_lists": 3, "coreset_lists_with_model": 0}})
    request = schemas.OptimizeRequest(
        ir=unit_ir, objective="text_size", return_object=True, bypass_cache=True
    )
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    (per_function,) = [c for c in response.candidates if c.source == "per_function"]
    assert set(per_function.function_passes) == set(split_unit(unit_ir).functions)
    allowed = {"-Oz"} | {format_pass_list(p) for p in Coreset.load(settings.engine.coreset_path).first(
        "text_size", 3)}  # fmt: skip
    assert set(per_function.function_passes.values()) <= allowed and per_function.pipeline == ""
    # On this program one function's own list beats -Oz: the linked unit is the answer, and it runs.
    assert response.best.source == "per_function" and response.best.cost < response.oz_cost
    assert text_size(response.object_code) == response.best.cost
    subprocess.run(
        ["clang-19", "-O0", "-w", str(UNIT_PROGRAM), "-o", str(tmp_path / "reference")], check=True
    )
    expected = subprocess.run(
        [str(tmp_path / "reference")], check=True, capture_output=True, text=True
    ).stdout
    assert _run_object(response.object_code, tmp_path) == expected
    again = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    assert again.candidates == response.candidates  # deterministic


def test_refined_per_function_lists_append_one_pass_and_the_object_runs(pool, unit_ir, tmp_path):
    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 3, "unit_function_refine": True, "coreset_lists_with_model": 0}}
    )
    request = schemas.OptimizeRequest(
        ir=unit_ir, objective="text_size", return_object=True, bypass_cache=True
    )
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    (per_function,) = [c for c in response.candidates if c.source == "per_function"]
    coreset = [("-Oz",), *Coreset.load(settings.engine.coreset_path).first("text_size", 3)]
    allowed = {format_pass_list(p) for p in coreset}
    allowed |= {format_pass_list((*p, extra)) for p in coreset for extra in REFINE_PASSES}
    assert set(per_function.function_passes) == set(split_unit(unit_ir).functions)
    assert set(per_function.function_passes.values()) <= allowed
    plain = optimize(
        ScriptedGenerator([("-Oz",)]),
        pool,
        request,
        settings=Settings.model_validate(
            {"engine": {"unit_function_lists": 3, "coreset_lists_with_model": 0}}
        ),
    )
    assert response.best.cost <= plain.best.cost  # on this program refining keeps or improves the answer
    reference = tmp_path / "reference"
    subprocess.run(["clang-19", "-O0", "-w", str(UNIT_PROGRAM), "-o", str(reference)], check=True)
    expected = subprocess.run([str(reference)], check=True, capture_output=True, text=True).stdout
    assert _run_object(response.object_code, tmp_path) == expected


def test_per_function_lists_can_be_switched_off_and_skip_a_single_function(pool, unit_ir, add_ir):
    off = Settings.model_validate({"engine": {"unit_function_lists": 0}})
    response = optimize(
        ScriptedGenerator([("-Oz",)]), pool, schemas.OptimizeRequest(ir=unit_ir), settings=off
    )
    assert "per_function" not in {c.source for c in response.candidates}
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, schemas.OptimizeRequest(ir=add_ir))
    assert "per_function" not in {c.source for c in response.candidates}


def test_the_coreset_strategy_also_gets_a_list_per_function(pool, unit_ir):
    # optcc sends units longer than the model's context with strategy coreset (clients/settings.py)
    settings = Settings.model_validate({"engine": {"unit_function_lists": 3}})
    request = schemas.OptimizeRequest(ir=unit_ir, objective="text_size", strategy="coreset", samples=2)
    response = optimize(ScriptedGenerator([]), pool, request, settings=settings)
    sources = [c.source for c in response.candidates]
    assert sources.count("coreset") == 2 and sources.count("per_function") == 1
    assert response.best.source == "per_function" and response.best.cost < response.oz_cost


def test_a_unit_of_more_functions_than_the_limit_gets_no_per_function_candidate(pool, unit_ir):
    functions = defined_function_count(unit_ir)
    request = schemas.OptimizeRequest(ir=unit_ir, objective="text_size", bypass_cache=True)
    for limit, expected in ((functions - 1, 0), (functions, 1)):
        settings = Settings.model_validate(
            {"engine": {"unit_function_lists": 3, "unit_function_lists_max_functions": limit}}
        )
        response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
        assert [c.source for c in response.candidates].count("per_function") == expected, limit


def test_per_function_work_on_a_unit_of_many_functions_ends_at_the_deadline(pool):
    """1,200 functions, the limit lifted: 13,200 compiles do not fit 10 s. The request ends at its deadline
    with the per-function candidate left out (or, on a machine too loaded for even -Oz, DEADLINE_EXCEEDED)."""
    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 10, "unit_function_lists_max_functions": 5000}}
    )
    request = schemas.OptimizeRequest(ir=slow_module(), deadline_s=10, bypass_cache=True)
    started = time.monotonic()
    try:
        response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    except ServiceError as err:
        assert err.kind is ErrorKind.DEADLINE_EXCEEDED and "-Oz" in err.message, err
    else:
        assert response.deadline_hit and "per_function" not in {c.source for c in response.candidates}
    elapsed = time.monotonic() - started
    assert elapsed < 10 + 2.0, elapsed  # the deadline, BACKEND_GRACE_S and a loaded machine's slack


def test_a_split_asks_stop_before_each_function_and_ends_when_told(unit_ir):
    asked = []

    def stop_at_the_third_question() -> bool:
        asked.append(True)
        return len(asked) >= 3

    for split in (split_unit, split_functions):
        asked.clear()
        with pytest.raises(StoppedError):
            split(unit_ir, stop=stop_at_the_third_question)
        assert len(asked) == 3, split
    assert split_unit(unit_ir, stop=lambda: False) == split_unit(unit_ir)  # never told: the same parts
    assert split_functions(unit_ir, stop=lambda: False) == split_functions(unit_ir)


@pytest.mark.parametrize("split", [split_unit, split_functions])
def test_the_ingress_split_of_a_long_unit_ends_at_the_deadline(split):
    """A thread cannot be killed: the split of the 1,200-function slow_module (1.3 s here, seconds under
    load) ran on after its request's deadline in the ingress. Now it ends then (serve/stoppable.py), within
    one step of the split (the longest, one parse of the whole unit, is a fifth of it)."""
    ir = slow_module()
    started = time.monotonic()
    split(ir)
    whole_s = time.monotonic() - started
    started = time.monotonic()
    with pytest.raises(StoppedError):
        asyncio.run(in_thread(split, ir, deadline=started + 0.1 * whole_s))  # returns once the thread ended
    stopped_s = time.monotonic() - started
    assert stopped_s < 0.5 * whole_s, (stopped_s, whole_s)


def test_the_ingress_split_of_a_request_given_up_ends_then():
    """Cancelled (the answer went back without it: -Oz failed, the caller left), with no deadline."""
    ir = slow_module()
    started = time.monotonic()
    split_unit(ir)
    whole_s = time.monotonic() - started

    async def given_up_after(seconds: float) -> None:
        split = asyncio.ensure_future(in_thread(split_unit, ir, deadline=None))
        await asyncio.sleep(seconds)
        split.cancel()
        with pytest.raises(asyncio.CancelledError):
            await split

    started = time.monotonic()
    asyncio.run(given_up_after(0.1 * whole_s))  # returns once the thread has ended
    stopped_s = time.monotonic() - started
    assert stopped_s < 0.5 * whole_s, (stopped_s, whole_s)
