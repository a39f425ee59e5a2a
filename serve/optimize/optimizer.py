"""The Optimize flow: validate -> cache -> model candidates -> compile and measure -> rank -> response.

Plain async code over two narrow backends, the engine (`optserve.engine.interface.Engine`) and the compiler
(`optserve.compiler.interface.CandidateCompiler`), so it runs the same inside the Ray Serve ingress (where the
backends are deployment handles, serve/replicas/handles.py) and in a test without Ray. The model's candidates
come from the compiler-feedback loop `optserve.engine.feedback.generate_with_feedback`.

Guarantees: the baseline is always ranked, so the best answer is never worse than it; the deadline stops
sampling and returns the best found so far. Every compile carries the deadline to the compiler, which stops
the compiles still running at it and starts none after it (compiler/workers.py): a candidate it cut is left
out of the answer, and no worker stays busy for a request already answered.

-Oz is compiled beside the model for every request (but strategy stored's whole-unit hits, whose -Oz cost
tuning measured under the same toolchain: `_stored_without_oz`). Without `baseline_cost` it is the baseline
(only -Oz not finishing in time is DEADLINE_EXCEEDED; -Oz failing, because its compiler replica died or it
does not compile, ends the request at once with that error, not after the rest of the candidate work). With it
(the client's own cost, e.g. the .text size of the object its own clang made) the client's cost is the
baseline and -Oz an ordinary candidate, waited for like the others: the answer is the cheapest of -Oz and the
model's candidates if it costs less than the client's, else the client's; only the deadline ending first
leaves -Oz out (`oz_skipped`, `deadline_hit`). The input's cost, which only informs, is not compiled then, nor
with `skip_input_cost` (a client that compares the answer's object with its own, as optcc does beside its
clang's back end): the client's compiles share the cores. With `client_compares` (optcc's default) no -Oz is
compiled at all: the client keeps the smaller of its own -Oz object and the answer's, so a unit the tuning
store holds nothing for is answered without a compile, and a tuned one with the one compile of its lists
(of the bytes as they came when a reader linked them to a unit with its own entry: `_compiled_as_sent`, no
intake read before it)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from optserve.compiler.cache import ResultCache, ir_digest
from optserve.compiler.function_lists import FunctionLists, UnitParts, defined_function_count
from optserve.compiler.interface import (
    CandidateCompiler,
    Evaluation,
    Outcome,
    WorkerCrashedError,
    cut_by_deadline,
    killed_from_outside,
    llvm_failure,
)
from optserve.compiler.ir import IRError, parse_ir
from optserve.compiler.pipeline import OZ
from optserve.compiler.unit_search import search_function_lists
from optserve.config import Settings
from optserve.deadline import BACKEND_GRACE_S, Deadline, StoppedError, exceeded
from optserve.engine.coreset import Coreset
from optserve.engine.feedback import generate_with_feedback
from optserve.engine.interface import Engine, SamplingOptions, Strategy
from optserve.objectives import Objective
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError, invalid, unavailable
from optserve.serve.observability import tracing
from optserve.serve.optimize.answer_key import answer_key
from optserve.serve.optimize.ranking import client_code, failed, measured, rank
from optserve.serve.optimize.unit_lists import UnitLists, unit_lists
from optserve.serve.schemas import CandidateSource, ServedStrategy

if TYPE_CHECKING:  # the tuning store's modules load with the store (`Optimizer(store=...)`)
    from optserve.tuning.lookup import StoredAnswer
    from optserve.tuning.records import Toolchain
    from optserve.tuning.store import TuningStore

_WARM_RETRY_S = 1.0  # `Optimizer.warm`: the pause before the engine's metadata is asked again
MEASURED_BESIDE = (OZ,)  # compiled beside the model for every request: no candidate repeats it
RANKED_CORESET_LISTS = 100  # strategy ranked_coreset: the model ranks this many of the coreset's first lists
# Strategies that need no model: answered while the model is not ready.
MODEL_FREE_STRATEGIES = (ServedStrategy.CORESET, ServedStrategy.STORED)

logger = logging.getLogger(__name__)


# The served model's metadata (name, version, readiness): the engine replica's, through its deployment.
ModelMetadataSource = Callable[[], Awaitable[schemas.ModelMetadata]]


@dataclass
class _Sampled:
    measured: list[schemas.Candidate] = field(default_factory=list)  # ranking.measured's
    # (candidate, (IR, object)): those compiled with the outputs asked for (the tuning store's candidate)
    held: list[tuple[schemas.Candidate, tuple[str | None, bytes | None]]] = field(default_factory=list)
    sample_s: float = 0.0
    compile_s: float = 0.0
    deadline_hit: bool = False
    warning: str = ""

    def outputs(self, candidate: schemas.Candidate) -> tuple[str | None, bytes | None] | None:
        """The (IR, object) `candidate` was compiled with, if it was."""
        return next((outputs for held, outputs in self.held if held is candidate), None)


class Optimizer:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        compiler: CandidateCompiler,
        cache: ResultCache,
        model_metadata: ModelMetadataSource,
        store: TuningStore | None = None,
    ):
        self.settings = settings
        self.engine = engine
        self.compiler = compiler
        self.cache = cache
        self.model_metadata = model_metadata
        self.coreset = Coreset.load(settings.engine.coreset_path)
        self.store = store  # the tuning store (tuning/): None without one
        # The host's toolchain as a compiler worker reported it (`warm`, else the first request that needs
        # it): its LLVM version and vocabulary are every objective's and target's.
        self._host: Toolchain | None = None
        self.toolchain_asks = {"startup": 0, "request": 0}  # compiler workers asked, by when (`warm`)
        # a stored answer saving less is not compiled (tuning.lookup: worth its compile on every build)
        self._min_saved = settings.tuning.min_saved_bytes
        self._notes: set[asyncio.Task] = set()  # `_note_seen`'s writes in flight

    async def warm(self, timeout_s: float) -> bool:
        """The work the first requests would otherwise do on their path, done before the service says it
        is ready: the host's toolchain asked of a compiler worker (the compiler deployment's handle and an
        intake worker's first job with it), the tuning store's first read in a thread, the model's metadata.
        A first build's first units are then answered unread in milliseconds, as every later one. Whether it
        all got done within `timeout_s`: what did not (a compiler not up yet) is left to the first request
        that needs it (logged)."""
        deadline = Deadline(time.monotonic() + timeout_s)

        async def toolchain_and_store() -> None:
            host = await self._host_toolchain(deadline, "startup")
            if self.store is not None:
                under = (host.objective, host.llvm_version, host.vocabulary)
                await deadline.within(asyncio.to_thread(self.store.holds_entries, *under), "the tuning store")

        async def metadata() -> None:
            while True:  # an engine replica still starting does not answer: asked again until it does
                try:
                    await deadline.within(self.model_metadata(), "the model's metadata")
                    return
                except ServiceError:
                    if deadline.remaining_s() <= _WARM_RETRY_S:
                        raise
                    await asyncio.sleep(_WARM_RETRY_S)

        parts = (toolchain_and_store(), metadata())
        warmed = True
        for what, outcome in zip(
            ("the toolchain and the store", "the model's metadata"),
            await asyncio.gather(*parts, return_exceptions=True),
            strict=True,
        ):
            if isinstance(outcome, BaseException):  # nothing here stops the service: the requests ask again
                logger.warning("warming up %s before the first request: %s", what, outcome)
                warmed = False
        return warmed

    def check_options(self, request: schemas.OptimizeRequest) -> float:
        """Reject options outside the service's limits; return the deadline in seconds."""
        engine, serve = self.settings.engine, self.settings.serve
        if request.samples > engine.max_samples:
            raise invalid(f"samples: {request.samples} is more than the limit of {engine.max_samples}")
        if request.strategy == ServedStrategy.GREEDY and request.samples != 1:
            raise invalid("samples: greedy decoding gives one candidate; use strategy priority or nucleus")
        coreset_strategies = (ServedStrategy.CORESET, ServedStrategy.RANKED_CORESET)
        if request.strategy in coreset_strategies and not self.coreset.first(request.objective, 1):
            raise invalid(
                f"strategy {request.strategy}: the service has no coreset for objective {request.objective}"
            )
        if request.feedback_rounds > engine.max_feedback_rounds:
            raise invalid(
                f"feedback_rounds: {request.feedback_rounds} is more than the limit of "
                f"{engine.max_feedback_rounds}"
            )
        deadline_s = request.deadline_s or serve.default_deadline_s
        if deadline_s > serve.max_deadline_s:
            raise invalid(f"deadline_s: {deadline_s} is more than the limit of {serve.max_deadline_s}")
        return deadline_s

    async def optimize(self, request: schemas.OptimizeRequest) -> schemas.OptimizeResponse:
        """The answer to `request`; DEADLINE_EXCEEDED when its deadline stopped work the answer needs (-Oz
        as the baseline), which inside the flow is a StoppedError."""
        try:
            return await self._optimize(request)
        except StoppedError as err:
            raise ServiceError(ErrorKind.DEADLINE_EXCEEDED, str(err)) from None

    async def _optimize(self, request: schemas.OptimizeRequest) -> schemas.OptimizeResponse:
        started = time.monotonic()
        deadline = Deadline(started + self.check_options(request))
        unread = await self._unread(request, started, deadline)
        if isinstance(unread, schemas.OptimizeResponse):
            return unread
        ir, whole = await self._take_in(request.module_bytes)
        validate_s = time.monotonic() - started

        model = await self.model_metadata()
        if not model.ready and request.strategy not in MODEL_FREE_STRATEGIES:
            raise unavailable(f"pass-ordering model {model.name!r} is not ready: {model.reason}")
        digest = ir_digest(ir)
        stored = await self._stored_answer(ir, whole, request.objective, deadline)
        tuned = f"+tuned-{stored.entries_digest}" if stored is not None and stored.job is not None else ""
        key = answer_key(digest, request, f"{model.version}+coreset-{self.coreset.version}{tuned}")
        recording = asyncio.ensure_future(self._record(ir, stored, request.unit_name, unread))
        if not request.bypass_cache and (hit := self.cache.get(key)) is not None:
            return _as_cached(hit, time.monotonic() - started).model_copy(
                update={"tuning": _hits(stored, await recording)}
            )

        want = (request.return_ir, request.return_object)
        # -Oz compiles while the model samples; the unoptimized input's cost, which only informs, is
        # measured last and only within the deadline, so a tight deadline spends no compile on it.
        client_baseline = request.baseline_cost is not None or request.client_compares
        if request.client_compares:  # the client compiles and compares its own -Oz: none here
            sampled, oz_eval = await self._sample_and_measure(ir, request, deadline, stored), None
        else:
            sampled, oz_eval = await self._sample_beside_oz(ir, request, deadline, want, stored)
        oz = None
        if oz_eval is not None:  # an error only as a candidate (with a client baseline): ranked last
            oz = measured(OZ, oz_eval.cost, CandidateSource.OZ, oz_eval.error)
        if client_baseline:
            # client_compares without baseline_cost: the client's object, not measured here, is ranked
            # below every candidate that compiled and above every one that failed
            baseline = client_code(request.baseline_cost)
            ranked = rank([baseline, *([oz] if oz else []), *sampled.measured])
        else:
            baseline = oz
            ranked = rank([baseline, *sampled.measured])
        # -Oz's outputs came with its evaluation: its win (over the client's cost) needs no further compile
        best_ir = best_object = None
        if ranked[0] is oz:
            best_ir, best_object = oz_eval.optimized_ir, oz_eval.object_code
        elif (outputs := sampled.outputs(ranked[0])) is not None:  # the tuning store's, with its outputs
            best_ir, best_object = outputs
        # candidates whose outputs are at hand (the client holds its own code)
        held = (baseline, oz, *(m for m, _ in sampled.held))

        if any(want) and not any(ranked[0] is m for m in held):
            started_output = time.monotonic()
            try:
                (best_eval,) = await deadline.extended(BACKEND_GRACE_S).within(
                    self.compiler.evaluate_async(
                        ir, [ranked[0].job], request.objective, *want, deadline=deadline
                    ),
                    "the best candidate's output",
                )
                if cut_by_deadline([best_eval]):
                    raise exceeded("the best candidate's output")
                if best_eval.error:
                    raise ServiceError(ErrorKind.INTERNAL, best_eval.error)
                best_ir, best_object = best_eval.optimized_ir, best_eval.object_code
            except (ServiceError, StoppedError) as err:  # no output for the model's best: the best at hand
                fallback = next(m for m in ranked if any(m is h for h in held))
                ranked = sorted(ranked, key=lambda m: m is not fallback)
                if fallback is oz:
                    best_ir, best_object = oz_eval.optimized_ir, oz_eval.object_code
                elif (outputs := sampled.outputs(fallback)) is not None:
                    best_ir, best_object = outputs
                sampled.warning = (
                    f"{_HELD_NAMES[fallback.source]} returned instead of a better candidate whose output "
                    f"failed: {err}"
                )
                sampled.deadline_hit = sampled.deadline_hit or isinstance(err, StoppedError)
            sampled.compile_s += time.monotonic() - started_output

        input_cost = None
        # the input's cost only informs: a client with its own baseline, or that compares itself, skips it
        measures_input = not (client_baseline or request.skip_input_cost)
        if measures_input:
            started_input = time.monotonic()
            input_cost = await self._input_cost(ir, request.objective, deadline)
            sampled.compile_s += time.monotonic() - started_input
        response = schemas.OptimizeResponse(
            ir_sha256=digest,
            objective=request.objective,
            input_cost=-1 if input_cost is None else input_cost,
            oz_cost=-1 if oz is None else oz.cost,
            candidates=ranked,
            best=ranked[0],
            improvement_over_oz_pct=_improvement_pct(baseline.cost, ranked[0].cost),
            timings=schemas.Timings(
                total_s=time.monotonic() - started,
                validate_s=validate_s,
                sample_s=sampled.sample_s,
                compile_s=sampled.compile_s,
            ),
            **_answer_fields(request, sampled, model, best_ir, best_object),
            oz_skipped=oz is None,  # with a client baseline only: the deadline came before -Oz's compile
            tuning=_hits(stored, await recording),
        )
        complete = input_cost is not None or not measures_input
        if complete and not sampled.deadline_hit and not sampled.warning:
            self.cache.put(key, response)
        return response

    async def _unread(
        self, request: schemas.OptimizeRequest, started: float, deadline: Deadline
    ) -> schemas.OptimizeResponse | tuple[str, bool] | None:
        """Record now, read later: strategy stored, a unit sent as bitcode by a client that compares, and a
        store. When the store can hold nothing for the unit (`tuning.lookup.unread_answer`), the answer
        today's path gives a unit with nothing stored (the client's baseline, no compile), without reading
        the bitcode: the bytes are recorded as they came (`record_raw`) for `optserve tune` to read. Its
        `ir_sha256` is then the bytes' SHA-256 (their IR was not read), and bitcode LLVM would refuse is
        answered too (the client keeps its own object; the tuner reports it). Else (the bitcode's raw hash,
        whether it waits in the store unread) to link once the unit is read, or None; a store that fails
        leaves it all to today's path."""
        module = request.ir_bitcode
        if (
            self.store is None
            or request.strategy != ServedStrategy.STORED
            or not request.client_compares
            or module is None
            or len(module) > self.settings.compiler.max_ir_bytes
        ):
            return None
        from optserve.tuning.lookup import is_bitcode, raw_hash, unread_answer
        from optserve.tuning.store import TuningStoreError

        if not is_bitcode(module):
            return None
        raw = raw_hash(module)
        try:
            with tracing.span("tuning_store.unread"):
                host = await self._target_toolchain(request.objective, "", deadline)
                under = (request.objective, host.llvm_version, host.vocabulary, self._min_saved)
                found = await deadline.within(
                    asyncio.to_thread(unread_answer, self.store, raw, *under), "the tuning store"
                )
        except (TuningStoreError, StoppedError, ServiceError, WorkerCrashedError) as err:
            logger.warning("tuning store: the unit is read first: %s", err)
            return None
        if found.seen is not None:  # answered from the link: the unit stays recently seen, as a read unit
            self._note_seen(found.seen)
        if found.stored is not None and found.stored.job is not None:
            return await self._compiled_as_sent(request, started, deadline, raw, found.stored)
        if found.read:
            return (raw, found.pending) if found.link else None
        recorded = found.record and await self._record_raw(raw, module, request.unit_name)
        model = await self.model_metadata()
        baseline = client_code(request.baseline_cost)
        return schemas.OptimizeResponse(
            ir_sha256=raw,
            objective=request.objective,
            input_cost=-1,
            oz_cost=-1,
            candidates=[baseline],
            best=baseline,
            improvement_over_oz_pct=0.0,
            timings=schemas.Timings(total_s=time.monotonic() - started),
            model_id=model.name,
            model_version=model.version,
            oz_skipped=True,
            tuning=schemas.TuningStoreHits(settled=found.settled, recorded=recorded),
        )

    async def _compiled_as_sent(
        self,
        request: schemas.OptimizeRequest,
        started: float,
        deadline: Deadline,
        raw: str,
        stored: StoredAnswer,
    ) -> schemas.OptimizeResponse:
        """Bytes a reader linked to a unit whose own entry is worth its compile (`unread_answer`'s
        `stored`): the answer today's path gives it (the client's baseline and the entry's lists, compiled
        once with the outputs), but the bytes go to the compile as they came and are read there
        (`compiler.ir.compile_input`: the module the intake's check would parse is the compile's), so the
        unit is read once, its text never travels between processes and its key is not computed: the
        link gave it. Its `ir_sha256` is the bytes' SHA-256 (as an answer unread); the unit is not
        recorded again (the link says a reader recorded it) and the answer is not cached (optcc's object
        cache keeps it)."""
        sampled = _Sampled()
        want = (request.return_ir, request.return_object)
        module = request.ir_bitcode
        await self._measure_tuned(module, request.objective, deadline, sampled, stored.job, want)
        baseline = client_code(request.baseline_cost)
        ranked = rank([baseline, *sampled.measured])
        best_ir, best_object = sampled.outputs(ranked[0]) or (None, None)
        model = await self.model_metadata()
        return schemas.OptimizeResponse(
            ir_sha256=raw,
            objective=request.objective,
            input_cost=-1,
            oz_cost=-1,
            candidates=ranked,
            best=ranked[0],
            improvement_over_oz_pct=_improvement_pct(baseline.cost, ranked[0].cost),
            timings=schemas.Timings(total_s=time.monotonic() - started, compile_s=sampled.compile_s),
            **_answer_fields(request, sampled, model, best_ir, best_object),
            oz_skipped=True,
            tuning=_hits(stored, False),
        )

    def _note_seen(self, unit: str) -> None:
        """`TuningStore.seen_unit` in a thread, off the request's path (the least recently seen units are
        evicted first; a failed note is logged, never the request's)."""
        from optserve.tuning.store import TuningStoreError

        async def note() -> None:
            try:
                await asyncio.to_thread(self.store.seen_unit, unit)
            except TuningStoreError as err:
                logger.warning("tuning store: the unit was not noted as seen: %s", err)

        task = asyncio.create_task(note())
        self._notes.add(task)  # held until done: a task nothing refers to may be collected mid-way
        task.add_done_callback(self._notes.discard)

    async def notes_written(self) -> None:
        """Wait for `_note_seen`'s writes in flight (a caller that stops its event loop next)."""
        await asyncio.gather(*self._notes)

    async def _record_raw(self, raw: str, bitcode: bytes, name: str) -> bool:
        """Keep the unread bitcode for `optserve tune` (as `_record` keeps a unit); whether it was new."""
        from optserve.tuning.lookup import is_build_probe
        from optserve.tuning.store import TuningStoreError

        if not self.settings.tuning.record_units or is_build_probe(name):
            return False
        try:
            with tracing.span("tuning_store.record"):
                return await asyncio.to_thread(self.store.record_raw, raw, bitcode, name)
        except TuningStoreError as err:
            logger.warning("tuning store: the unit was not recorded: %s", err)
            return False

    async def _take_in(self, module: str | bytes) -> tuple[str, str | None]:
        """The request's IR parsed and verified (`compiler.ir.parse_ir`) in a compiler worker, and with a
        tuning store its key there too (`tuning.unit_keys.read_unit`: the worker has the text at hand, the
        split of its functions' keys takes it along, and this process hashes no unit); None without. An
        input that crashes LLVM's reader ends that worker, never this ingress and the calls in flight on
        it. The parse (bounded by `compiler.max_ir_bytes` and the pool's time limit) runs to its end even
        past the request's deadline: a client with its own baseline is answered with it then, but never
        for IR that was not read."""
        max_bytes = self.settings.compiler.max_ir_bytes
        try:
            if self.store is not None:
                from optserve.tuning.unit_keys import read_unit

                return await self.compiler.run_async(read_unit, module, max_bytes)
            return await self.compiler.run_async(parse_ir, module, max_bytes), None
        except IRError as err:
            raise invalid(str(err)) from None
        except StoppedError as err:  # the pool's time limit
            raise invalid(f"reading the IR took too long: {err}") from None
        except WorkerCrashedError as err:
            raise _crash_error(err, "reading the IR") from None

    async def _stored_answer(
        self, ir: str, whole: str | None, objective: str, deadline: Deadline
    ) -> StoredAnswer | None:
        """What the tuning store holds for the unit; None without a store, or when it fails (logged: a
        store that fails costs the answer its stored lists, never the request) or the deadline comes first.
        The unit's key `whole` and its functions' keys, when the store needs them, come from a compiler
        worker (they split the unit with LLVM), and so does the toolchain the store keys lists by
        (`_toolchain`)."""
        if self.store is None:
            return None
        from optserve.tuning.lookup import functions_answer, whole_unit_answer
        from optserve.tuning.store import TuningStoreError
        from optserve.tuning.unit_keys import unit_keys

        store, max_functions = self.store, self.settings.engine.unit_function_lists_max_functions
        try:
            with tracing.span("tuning_store.lookup"):
                toolchain = await self._toolchain(ir, objective, deadline)
                bar = self._min_saved
                answer = await deadline.within(
                    asyncio.to_thread(whole_unit_answer, store, ir, toolchain, whole, bar), "the tuning store"
                )
                if answer is not None:
                    return answer
                keys = await self.compiler.run_async(
                    unit_keys, ir, max_functions, None, whole, deadline=deadline
                )
                return await deadline.within(
                    asyncio.to_thread(functions_answer, store, toolchain, keys, bar), "the tuning store"
                )
        except (TuningStoreError, StoppedError, ServiceError, WorkerCrashedError) as err:
            logger.warning("tuning store lookup skipped: %s", err)
            return None

    async def _toolchain(self, ir: str, objective: str, deadline: Deadline) -> Toolchain:
        """The toolchain of the unit's lists in the store: the objective, the unit's target triple and the
        LLVM version of the compiler that compiles them, which a compiler worker reports (once per objective
        and target: the ingress loads no LLVM of its own)."""
        from optserve.tuning.lookup import target_triple

        return await self._target_toolchain(objective, target_triple(ir), deadline)

    async def _target_toolchain(self, objective: str, target: str, deadline: Deadline) -> Toolchain:
        """`_toolchain` of a target triple ('': the host's; its LLVM version and vocabulary are every
        objective's and target's)."""
        host = self._host or await self._host_toolchain(deadline, "request")
        return replace(host, objective=objective, target=target)

    async def _host_toolchain(self, deadline: Deadline, when: str) -> Toolchain:
        """The host's toolchain, asked of a compiler worker once (`when`: "startup" from `warm`, "request"
        when a request had to wait for it: counted in `toolchain_asks`)."""
        from optserve.tuning.keys import current_toolchain

        if self._host is None:
            self.toolchain_asks[when] += 1
            objective = Objective.TEXT_SIZE.value  # any: the worker reports LLVM's version and the vocabulary
            self._host = await self.compiler.run_async(current_toolchain, objective, "", deadline=deadline)
        return self._host

    async def _record(
        self, ir: str, stored: StoredAnswer | None, name: str, unread: tuple[str, bool] | None = None
    ) -> bool:
        """Keep the unit for `optserve tune` (tuning.record_units); whether it was new to the store.
        `unread`: the raw hash of the bitcode it was read from, linked to the unit (`_unread`: the next
        request of the same bytes reads nothing), and whether those bytes were recorded already, unread."""
        if stored is not None and unread is not None:  # the unit as IR first, then the blob dropped
            recorded = await self._record(ir, stored, name)
            await self._link_raw(unread[0], stored)
            return recorded and not unread[1]  # bytes recorded before, unread: the unit is not new
        if stored is None or not self.settings.tuning.record_units or self.store.read_only:
            return False  # a profile (read-only) records nothing
        from optserve.tuning.lookup import is_build_probe

        if is_build_probe(name):  # configure's conftest.c and its kin: not the product
            return False
        from optserve.tuning.store import TuningStoreError

        try:
            with tracing.span("tuning_store.record"):
                return await asyncio.to_thread(self.store.record_unit, stored.keys.unit_hash, ir, name)
        except TuningStoreError as err:
            logger.warning("tuning store: the unit was not recorded: %s", err)
            return False

    async def _link_raw(self, raw: str, stored: StoredAnswer) -> None:
        from optserve.tuning.store import TuningStoreError

        try:
            await asyncio.to_thread(self.store.link_raw, raw, stored.keys.unit_hash, stored.toolchain.target)
        except TuningStoreError as err:
            logger.warning("tuning store: the raw unit was not linked: %s", err)

    async def _sample_beside_oz(
        self,
        ir: str,
        request: schemas.OptimizeRequest,
        deadline: Deadline,
        want: tuple[bool, bool],
        stored: StoredAnswer | None = None,
    ) -> tuple[_Sampled, Evaluation | None]:
        """The model's candidates, and -Oz's evaluation compiled meanwhile (with the outputs `want`ed); a
        backend error on -Oz ends the request at once. -Oz as the baseline (no `baseline_cost`): not compiling
        is INTERNAL and not finishing by the deadline DEADLINE_EXCEEDED. -Oz as a candidate (`baseline_cost`
        given): its error is the candidate's, and the deadline coming first leaves it out (None)."""
        as_baseline = request.baseline_cost is None
        if (
            as_baseline
            and request.strategy == ServedStrategy.STORED
            and stored is not None
            and stored.oz_cost
        ):
            return await self._stored_without_oz(ir, request, deadline, want, stored)
        oz = asyncio.ensure_future(self._oz_evaluation(ir, request.objective, want, as_baseline, deadline))
        sampling = asyncio.ensure_future(self._sample_and_measure(ir, request, deadline, stored))
        try:
            sampled = await _unless_failed_first(sampling, oz)
            started_waiting = time.monotonic()
            try:
                oz_eval = await deadline.extended(BACKEND_GRACE_S).within(oz, "the -Oz baseline")
            except StoppedError:
                if as_baseline:
                    raise
                oz_eval = None
            if oz_eval is None:  # -Oz as a candidate, cut by the deadline
                sampled.deadline_hit = True
            sampled.compile_s += time.monotonic() - started_waiting
        finally:
            sampling.cancel()
            oz.cancel()
        return sampled, oz_eval

    async def _stored_without_oz(
        self,
        ir: str,
        request: schemas.OptimizeRequest,
        deadline: Deadline,
        want: tuple[bool, bool],
        stored: StoredAnswer,
    ) -> tuple[_Sampled, Evaluation]:
        """Strategy stored, a whole-unit entry: tuning measured this unit's -Oz under the same toolchain
        (`stored.oz_cost`) and kept the entry because it costs less, so one compile (the entry's lists,
        with the outputs) answers. Should it not hold up (it failed, or costs no less), -Oz is compiled."""
        sampled = await self._sample_and_measure(ir, request, deadline, stored)
        tuned = [m for m in sampled.measured if m.source == CandidateSource.TUNED and not failed(m)]
        if tuned and tuned[0].cost < stored.oz_cost:
            return sampled, Evaluation(OZ, stored.oz_cost, None, 0.0)
        started = time.monotonic()
        oz_eval = await deadline.extended(BACKEND_GRACE_S).within(
            self._oz_evaluation(ir, request.objective, want, True, deadline), "the -Oz baseline"
        )
        sampled.compile_s += time.monotonic() - started
        return sampled, oz_eval

    async def _oz_evaluation(
        self, ir: str, objective: str, want: tuple[bool, bool], as_baseline: bool, deadline: Deadline
    ) -> Evaluation | None:
        """-Oz's Evaluation (with the output asked for); as the baseline, INTERNAL if -Oz does not compile
        this module and StoppedError (DEADLINE_EXCEEDED) if the deadline stopped it; as a candidate, None
        then."""
        (oz_eval,) = await self.compiler.evaluate_async(ir, [OZ], objective, *want, deadline=deadline)
        if cut_by_deadline([oz_eval]):
            if as_baseline:
                raise exceeded("the -Oz baseline")
            return None
        if oz_eval.error and as_baseline:
            if (said := llvm_failure(oz_eval)) is not None:  # the input's fault: the same input fails again
                raise invalid(f"LLVM fails on this module at -Oz: {said}")
            if killed_from_outside(oz_eval):  # not the input's fault: a retry finds a fresh worker
                raise unavailable(f"the compiler worker compiling -Oz was killed; retry ({oz_eval.error})")
            raise ServiceError(ErrorKind.INTERNAL, f"-Oz failed to compile this module: {oz_eval.error}")
        return oz_eval

    async def _input_cost(self, ir: str, objective: str, deadline: Deadline) -> int | None:
        """The unoptimized input's cost (-1 if it fails to compile); None when the deadline leaves no time."""
        if deadline.passed():
            return None
        try:
            (evaluation,) = await deadline.within(
                self.compiler.evaluate_async(ir, [()], objective, deadline=deadline), "the input's cost"
            )
        except StoppedError:
            return None
        if cut_by_deadline([evaluation]):
            return None
        return -1 if evaluation.error else evaluation.cost

    async def _sample_and_measure(
        self,
        ir: str,
        request: schemas.OptimizeRequest,
        deadline: Deadline,
        stored: StoredAnswer | None = None,
    ) -> _Sampled:
        """The tuning store's candidate first, then model candidates of every feedback round, each compiled
        and measured, until the deadline."""
        sampled = _Sampled()
        if stored is not None and stored.job is not None:
            # a build's answer is most likely this candidate: compiled with the outputs, it needs no second
            want = (
                (request.return_ir, request.return_object)
                if request.strategy == ServedStrategy.STORED
                else None
            )
            await self._measure_tuned(ir, request.objective, deadline, sampled, stored.job, want)
        if request.strategy == ServedStrategy.STORED:
            return sampled
        parts = stored.keys.parts if stored is not None else None
        if request.strategy == ServedStrategy.CORESET:
            await self._measure_coreset(ir, request, deadline, request.samples, sampled)
            # optcc sends units longer than the model's context with this strategy: per function is where
            # their savings are (docs/bench/function_lists.md)
            await self._per_function(ir, request, deadline, sampled, parts)
            return sampled
        rounds = await generate_with_feedback(
            self.engine,
            self.compiler,
            ir,
            _sampling_options(request, self.coreset),
            request.feedback_rounds,
            request.objective,
            deadline=deadline,
            grace_s=BACKEND_GRACE_S,
            exclude=MEASURED_BESIDE,
        )
        sampled.sample_s, sampled.compile_s = rounds.sample_s, rounds.compile_s
        sampled.deadline_hit = rounds.deadline_hit
        sampled.measured += [
            measured(c.pass_list, e.cost, CandidateSource.MODEL, e.error, c.logprob)
            for c, e in rounds.measured
        ]
        if rounds.prompt_too_long is not None:
            await self._long_module(ir, request, deadline, sampled, rounds.prompt_too_long)
        await self._coreset_beside_model(ir, request, deadline, sampled)
        await self._per_function(ir, request, deadline, sampled, parts)
        return sampled

    async def _measure_tuned(
        self,
        ir: str | bytes,
        objective: str,
        deadline: Deadline,
        sampled: _Sampled,
        job: tuple[str, ...] | FunctionLists,
        want: tuple[bool, bool] | None = None,
    ) -> None:
        """Compile the tuning store's candidate for the unit (one compile) into `sampled`, with the outputs
        `want`ed (IR, object) when given."""
        started = time.monotonic()
        outputs = want if want is not None and any(want) else (False, False)
        try:
            (evaluation,) = await deadline.extended(BACKEND_GRACE_S).within(
                self.compiler.evaluate_async(ir, [job], objective, *outputs, deadline=deadline),
                "compiling the tuning store's candidate",
            )
        except StoppedError:
            sampled.deadline_hit = True
            return
        finally:
            sampled.compile_s += time.monotonic() - started
        if evaluation.outcome is Outcome.DEADLINE:
            sampled.deadline_hit = True
            return
        lists = job if isinstance(job, FunctionLists) else None
        pass_list = () if lists is not None else job
        candidate = measured(
            pass_list, evaluation.cost, CandidateSource.TUNED, evaluation.error, function_lists=lists
        )
        sampled.measured.append(candidate)
        if any(outputs) and evaluation.ok:
            sampled.held.append((candidate, (evaluation.optimized_ir, evaluation.object_code)))

    async def _per_function(
        self,
        ir: str,
        request: schemas.OptimizeRequest,
        deadline: Deadline,
        sampled: _Sampled,
        parts: UnitParts | None = None,
    ) -> None:
        """A unit of several functions: each function gets the best of -Oz and the coreset's first
        `engine.unit_function_lists` lists (then, with `engine.unit_function_refine`, one more pass where it
        helps), measured on its own module, and the lists are linked back into one candidate
        (compiler/unit_search.py `search_function_lists`, the path benchmarks/function_lists_units.py and
        unit_gap.py measure).

        Skipped for a unit of more than `engine.unit_function_lists_max_functions` functions (its compiles
        grow with the count); every step, the split included (a job in a compiler worker), ends at the
        request's deadline. `parts`: the unit as the tuning store's lookup already split it (None: split)."""
        engine = self.settings.engine
        count = engine.unit_function_lists
        if not count or request.strategy == ServedStrategy.RANKED_CORESET or sampled.deadline_hit:
            return
        if defined_function_count(ir) > engine.unit_function_lists_max_functions:
            return
        started = time.monotonic()
        try:
            found = await deadline.extended(BACKEND_GRACE_S).within(
                search_function_lists(
                    ir,
                    [OZ, *self.coreset.first(request.objective, count)],
                    request.objective,
                    self.compiler,
                    concurrency=self.settings.compiler.workers,
                    refine=engine.unit_function_refine,
                    deadline=deadline,
                    parts=parts,
                ),
                "the per-function search",
            )
        except (IRError, WorkerCrashedError):  # aliases or ifuncs, or LLVM failed: whole-unit candidates only
            return
        except StoppedError:  # the deadline cut a compile or the split, or the search took it all
            sampled.deadline_hit = True
            return
        finally:
            sampled.compile_s += time.monotonic() - started
        if found is None:  # one function: the whole-unit lists already cover it
            return
        chosen, linked = found
        sampled.measured.append(
            measured((), linked.cost, CandidateSource.PER_FUNCTION, linked.error, function_lists=chosen)
        )

    async def _coreset_beside_model(
        self, ir: str, request: schemas.OptimizeRequest, deadline: Deadline, sampled: _Sampled
    ) -> None:
        """The coreset's first lists beside the model's (engine.coreset_lists_with_model), unless drawn."""
        count = self.settings.engine.coreset_lists_with_model
        if not count or request.strategy == ServedStrategy.RANKED_CORESET or sampled.deadline_hit:
            return
        drawn = set(MEASURED_BESIDE) | {tuple(m.passes) for m in sampled.measured}
        lists = [(p, 0.0) for p in self.coreset.first(request.objective, count) if p not in drawn]
        if lists:
            await self._measure(ir, request.objective, deadline, sampled, lists, CandidateSource.CORESET)

    async def _long_module(
        self, ir: str, request: schemas.OptimizeRequest, deadline: Deadline, sampled: _Sampled, why: str
    ) -> None:
        """A module longer than the model's context: lists for its largest functions, the coreset's, -Oz."""
        engine = self.settings.engine
        started = time.monotonic()
        found = UnitLists([], [], 0)
        if started >= deadline.at:  # the model's try of the whole unit took the time: no lists, no error
            sampled.deadline_hit = True
        elif engine.unit_function_prompts:
            try:
                options = replace(_sampling_options(request, self.coreset), deadline=deadline)
                found = await unit_lists(
                    ir, self.engine, self.compiler, options, engine.unit_function_prompts, deadline
                )
            except StoppedError:
                sampled.deadline_hit = True
            finally:
                sampled.sample_s += time.monotonic() - started
        count = max(request.samples, engine.coreset_fallback_lists) if engine.coreset_fallback_lists else 0
        coreset_lists = self.coreset.first(request.objective, count)
        baseline = "the client's baseline" if request.baseline_cost is not None else "-Oz"
        sampled.warning = (
            f"the module is longer than the model's context ({why}): {len(found.lists)} lists from its "
            f"{len(found.functions_read)} largest functions the model can read, {len(coreset_lists)} coreset "
            f"lists and {baseline}"
        )
        beside = MEASURED_BESIDE
        model_lists = [(p, logprob) for p, logprob in found.lists if p not in beside]
        if model_lists:
            await self._measure(ir, request.objective, deadline, sampled, model_lists, CandidateSource.MODEL)
        from_model = {p for p, _ in model_lists}
        other_lists = [(p, 0.0) for p in coreset_lists if p not in beside and p not in from_model]
        if other_lists and not sampled.deadline_hit:
            await self._measure(
                ir, request.objective, deadline, sampled, other_lists, CandidateSource.CORESET
            )

    async def _measure_coreset(
        self, ir: str, request: schemas.OptimizeRequest, deadline: Deadline, count: int, sampled: _Sampled
    ) -> None:
        """Compile and measure the coreset's first `count` lists (no model)."""
        beside = MEASURED_BESIDE
        lists = [p for p in self.coreset.first(request.objective, count) if p not in beside]
        if lists:
            await self._measure(
                ir, request.objective, deadline, sampled, [(p, 0.0) for p in lists], CandidateSource.CORESET
            )

    async def _measure(
        self,
        ir: str,
        objective: str,
        deadline: Deadline,
        sampled: _Sampled,
        candidates: list[tuple[tuple[str, ...], float]],
        source: CandidateSource,
    ) -> list[Evaluation] | None:
        """Compile (pass list, logprob) candidates into `sampled`; None when the deadline came first. Those
        the deadline cut are left out (the others, measured in time, are kept)."""
        started = time.monotonic()
        try:
            evaluations = await deadline.extended(BACKEND_GRACE_S).within(
                self.compiler.evaluate_async(ir, [p for p, _ in candidates], objective, deadline=deadline),
                f"compiling {source} candidates",
            )
        except StoppedError:
            sampled.deadline_hit = True
            return None
        finally:
            sampled.compile_s += time.monotonic() - started
        sampled.measured += [
            measured(p, e.cost, source, e.error, logprob)
            for (p, logprob), e in zip(candidates, evaluations, strict=True)
            if e.outcome is not Outcome.DEADLINE
        ]
        if cut_by_deadline(evaluations):
            sampled.deadline_hit = True
        return evaluations


def _sampling_options(request: schemas.OptimizeRequest, coreset: Coreset) -> SamplingOptions:
    """The engine's options for the request; each generation is given the request's deadline."""
    ranked = request.strategy == ServedStrategy.RANKED_CORESET  # priority sampling over the coreset's lists
    return SamplingOptions(
        strategy=Strategy.PRIORITY if ranked else Strategy(request.strategy),
        samples=request.samples,
        predict_costs=request.feedback_rounds > 0,  # feedback compares predicted and actual counts
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        objective=request.objective,
        allowed_lists=coreset.first(request.objective, RANKED_CORESET_LISTS) if ranked else None,
    )


async def _unless_failed_first(work: asyncio.Future, beside: asyncio.Future):
    """`work`'s result, unless `beside` fails before `work` ends: then `beside`'s error at once (`work` is
    cancelled by the caller), so a request whose -Oz failed does not first spend its deadline on the rest."""
    await asyncio.wait({work, beside}, return_when=asyncio.FIRST_COMPLETED)
    if not work.done() and beside.exception() is not None:
        raise beside.exception()
    return await work


def _crash_error(err: WorkerCrashedError, what: str) -> ServiceError:
    """A worker that died on the request's own input: INVALID_ARGUMENT with what LLVM said (or the signal);
    one killed from outside (nothing said, SIGKILL): UNAVAILABLE, not the input's fault (a retry finds a
    fresh worker)."""
    if err.killed_from_outside:
        return unavailable(f"a compiler worker was killed while {what}; retry")
    reason = err.llvm_said or f"the worker ended with {err.signal_name or 'an error'}"
    return invalid(f"LLVM failed while {what}: {reason}")


_HELD_NAMES = {
    CandidateSource.OZ: "-Oz",
    CandidateSource.CLIENT_BASELINE: "the client's baseline",
    CandidateSource.TUNED: "the tuning store's candidate",
}


def _improvement_pct(baseline_cost: int | None, best_cost: int | None) -> float:
    """How much smaller the best answer is than the baseline, in percent (0 without a baseline cost)."""
    return 100.0 * (baseline_cost - best_cost) / baseline_cost if (baseline_cost or 0) > 0 else 0.0


def _answer_fields(request, sampled: _Sampled, model: schemas.ModelMetadata, best_ir, best_object) -> dict:
    """The response's fields every compiled answer fills alike: the model, the deadline, the outputs asked."""
    return {
        "model_id": model.name,
        "model_version": model.version,
        "deadline_hit": sampled.deadline_hit,
        "optimized_ir": best_ir if request.return_ir else None,
        "object_code": best_object if request.return_object else None,
        "warning": sampled.warning,
    }


def _hits(stored: StoredAnswer | None, recorded: bool) -> schemas.TuningStoreHits:
    if stored is None:
        return schemas.TuningStoreHits()
    return schemas.TuningStoreHits(
        unit_hit=stored.unit_hit,
        settled=stored.settled,
        function_hits=0 if stored.unit_hit else stored.function_hits,
        functions=stored.functions,
        recorded=recorded,
    )


def _as_cached(response: schemas.OptimizeResponse, total_s: float) -> schemas.OptimizeResponse:
    # the client's baseline keeps its source: it is the client's code, not an answer of the cache
    candidates = [
        c
        if c.source == CandidateSource.CLIENT_BASELINE
        else c.model_copy(update={"source": CandidateSource.CACHE})
        for c in response.candidates
    ]
    return response.model_copy(
        update={
            "candidates": candidates,
            "best": candidates[0],
            "cached": True,
            "timings": schemas.Timings(total_s=total_s),
        }
    )
