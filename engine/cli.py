"""`optserve generate`: pass-list candidates for an IR file from the engine alone (no service, no compiler).

optserve generate FILE.ll --strategy priority --samples 10 [--model-dir DIR] [--backend torch] [--json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from optserve.cli import add_json_flag, emit
from optserve.engine.interface import Strategy
from optserve.objectives import OBJECTIVE_NAMES


def register(subparsers) -> None:
    parser = subparsers.add_parser("generate", help="pass-list candidates for an IR file from the model")
    parser.add_argument(
        "ir_file", type=Path, help="LLVM IR text (one function is what the model was trained on)"
    )
    parser.add_argument("--model-dir", type=Path, help="model directory (default: the configured one)")
    parser.add_argument("--backend", choices=["torch", "vllm"], help="default: the configured one")
    parser.add_argument("--strategy", choices=[s.value for s in Strategy], default=Strategy.GREEDY.value)
    parser.add_argument(
        "--objective",
        choices=OBJECTIVE_NAMES,
        help="the objective the prompt names, for a model trained on several (default: the model's first)",
    )
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--max-branch", type=int)
    parser.add_argument("--parallel", type=int, default=1, help="priority sampling: queue heads per batch")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deadline", type=float, help="seconds")
    add_json_flag(parser)
    parser.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    import asyncio
    import time
    from dataclasses import replace

    from optserve.compiler.ir import parse_ir
    from optserve.config import load_settings
    from optserve.deadline import Deadline
    from optserve.engine.engine import ModelEngine
    from optserve.engine.interface import SamplingOptions

    all_settings = load_settings()
    settings = all_settings.engine
    options = SamplingOptions(
        strategy=args.strategy,
        samples=args.samples,
        top_k=args.top_k,
        max_branch=args.max_branch,
        parallel=args.parallel,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        objective=args.objective,
    )

    async def run():
        engine = ModelEngine.load(args.model_dir or settings.model_dir, args.backend or settings.backend)
        try:
            started = time.perf_counter()
            ir = parse_ir(args.ir_file.read_bytes(), all_settings.compiler.max_ir_bytes)  # LLVM's text
            deadline = Deadline.after(args.deadline) if args.deadline else None  # the generation's budget
            generation = await engine.generate(ir, replace(options, deadline=deadline))
            return generation, time.perf_counter() - started
        finally:
            await engine.close()

    generation, seconds = asyncio.run(run())
    result = {
        "model_id": generation.model_id,
        "seconds": round(seconds, 4),
        "tokens_computed": generation.tokens_computed,
        "deadline_hit": generation.deadline_hit,
        "candidates": [
            {
                "pass_list": " ".join(c.pass_list),
                "logprob": round(c.logprob, 4),
                "priority": c.priority,
                "predicted_cost_before": c.predicted_cost_before,
                "predicted_cost_after": c.predicted_cost_after,
            }
            for c in generation.candidates
        ],
    }
    emit(result, args.json, render=_render)
    return 0


def _render(result) -> str:
    lines = [f"{result['model_id']}: {len(result['candidates'])} candidates in {result['seconds']} s"]
    for candidate in result["candidates"]:
        lines.append(f"  {candidate['logprob']:9.3f}  {candidate['pass_list']}")
    return "\n".join(lines)
