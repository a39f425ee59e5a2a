"""The coreset in the Optimize flow: modules longer than the model's context, the `coreset` and
`ranked_coreset` strategies, and the coreset's lists beside the model's (Ray-free Optimizer, real
compiles)."""

from __future__ import annotations

import asyncio

import pytest

from optserve.compiler.cache import ResultCache
from optserve.config import Settings
from optserve.deadline import Deadline
from optserve.engine.interface import Generation, PromptTooLongError, SamplingOptions, Strategy
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.serve.optimize.optimizer import Optimizer, _Sampled
from tests.serve.flow_helpers import SETTINGS, ScriptedGenerator, optimize, with_coreset


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
    asyncio.run(optimizer._long_module(add_ir, request, Deadline.after(-0.1), sampled, "9000 tokens"))
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
