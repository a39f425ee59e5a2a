"""`optserve eval passes`: the pass-ordering model against -Oz, random lists and the autotuner (Table 6.1).

optserve eval passes --model-dir DIR --split test --limit 200 --samples 1,3,5,10,30,100 \\
    --methods greedy,priority,nucleus-0.8,nucleus-1.2,random,autotuner --report docs/bench/passlm_eval.md
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from optserve.cli import add_json_flag, command_group, emit
from optserve.objectives import OBJECTIVE_NAMES, Objective


def register(subparsers: argparse._SubParsersAction) -> None:
    from optserve.passlm.evaluation.methods import DEFAULT_METHODS, DEFAULT_SAMPLES

    targets = command_group(subparsers, "eval", help="evaluate a learned model on its benchmark split")
    parser = targets.add_parser(
        "passes", help="pass-ordering model vs -Oz, random lists and the autotuner (thesis Table 6.1)"
    )
    parser.add_argument("--model-dir", type=Path, help="model directory (default: the configured one)")
    parser.add_argument("--corpus", type=Path, help="labelled corpus (default: <data_dir>/corpus)")
    parser.add_argument("--split", default="test", choices=("test", "val", "train"))
    parser.add_argument("--limit", type=int, help="the first N labelled functions of the split")
    parser.add_argument("--samples", default=",".join(map(str, DEFAULT_SAMPLES)), help="sample counts n")
    parser.add_argument(
        "--methods", default=DEFAULT_METHODS, help="comma-separated; nucleus-T = temperature T"
    )
    parser.add_argument("--backend", choices=("torch", "vllm"), help="default: the configured one")
    parser.add_argument("--device", default="cpu", help="torch backend: the model's device, e.g. cuda")
    parser.add_argument("--objective", default=Objective.INSTRUCTION_COUNT.value, choices=OBJECTIVE_NAMES)
    parser.add_argument("--workers", type=int, default=2, help="compiler processes (default 2)")
    parser.add_argument("--deadline", type=float, help="generation budget per function and method, seconds")
    parser.add_argument("--time-limit", type=float, help="stop after this many seconds; rerun to resume")
    parser.add_argument("--seed", type=int, default=0, help="nucleus sampling and random lists")
    parser.add_argument("--top-k", type=int, default=5, help="priority sampling: K")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling: top-p")
    parser.add_argument("--parallel", type=int, default=1, help="priority sampling: queue heads per batch")
    parser.add_argument("--json-out", type=Path, default=Path("runs/passes_eval.json"), help="raw results")
    parser.add_argument(
        "--journal", type=Path, help="resume state (default: beside --json-out, .journal.jsonl)"
    )
    parser.add_argument("--report", type=Path, help="write the markdown table here")
    parser.add_argument("--plot", type=Path, help="write the improvement-vs-samples plot here (.svg/.png)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_flag(parser)
    parser.set_defaults(handler=_eval_passes)


def _eval_passes(args: argparse.Namespace) -> int:
    from optserve.config import load_settings
    from optserve.passlm.evaluation.journal import model_fingerprint
    from optserve.passlm.evaluation.methods import EvalConfig, parse_methods, parse_samples
    from optserve.passlm.evaluation.pipeline import run, select_functions
    from optserve.passlm.evaluation.plot import plot
    from optserve.passlm.evaluation.report import collect, machine_description, model_id, report

    settings = load_settings()
    model_dir = Path(args.model_dir or settings.engine.model_dir)
    try:
        config = EvalConfig(
            model_dir=model_dir,
            corpus_dir=Path(args.corpus or settings.corpus.data_dir / "corpus"),
            journal_path=args.journal or args.json_out.with_suffix(".journal.jsonl"),
            split=args.split,
            limit=args.limit,
            samples=parse_samples(args.samples),
            methods=parse_methods(args.methods),
            backend=args.backend or settings.engine.backend,
            device=args.device,
            objective=args.objective,
            workers=args.workers,
            candidate_timeout_s=settings.compiler.candidate_timeout_s,
            deadline_s=args.deadline,
            time_limit_s=args.time_limit,
            seed=args.seed,
            top_k=args.top_k,
            top_p=args.top_p,
            parallel=args.parallel,
            coreset_path=Path(settings.engine.coreset_path),
        )
        if any(m.uses_model for m in config.methods) and not (model_dir / "profile.json").exists():
            raise ValueError(f"{model_dir} is not a model directory (no profile.json)")
        functions = select_functions(config)
    except ValueError as err:
        emit({"error": str(err)}, args.json)
        return 2
    log = (lambda _: None) if args.json else (lambda line: print(line, file=sys.stderr))
    summary = run(config, functions, progress=not (args.no_progress or args.json), log=log)
    uses_model = any(m.uses_model for m in config.methods)
    data = {
        "meta": {
            "command": _command(args, model_dir=model_dir, corpus=config.corpus_dir, backend=config.backend),
            "machine": machine_description(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "model_dir": str(model_dir),
            "model_id": model_id(model_dir) if uses_model else None,
            "model_fingerprint": model_fingerprint(model_dir) if uses_model else None,
            "backend": config.backend,
            "device": config.device,
            "corpus_dir": str(config.corpus_dir),
            "split": config.split,
            "objective": config.objective,
            "samples": list(config.samples),
            "methods": [m.name for m in config.methods],
            "seed": config.seed,
            "top_k": config.top_k,
            "top_p": config.top_p,
            "deadline_s": config.deadline_s,
            "run": {
                "computed": summary.computed,
                "reused": summary.done_before,
                "seconds": round(summary.seconds, 2),
                "stopped_early": summary.stopped_early,
            },
        },
        "results": collect(config, functions),
    }
    from optserve.corpus.journal import write_atomic

    write_atomic(args.json_out, _dumps(data))
    if args.plot:
        plot(data, args.plot)
    if args.report:
        write_atomic(args.report, report(data, str(args.plot) if args.plot else None))
    emit(data, args.json, lambda d: report(d))
    return 0


def _command(args: argparse.Namespace, **resolved) -> str:
    """The command that reproduces this run: every option with its value (defaults resolved)."""
    words = ["optserve", "eval", "passes"]
    for name, value in (vars(args) | resolved).items():
        if name in _NOT_OPTIONS or value is None or value is False:
            continue
        words.append("--" + name.replace("_", "-"))
        if value is not True:
            words.append(str(value))
    return shlex.join(words)


_NOT_OPTIONS = {"command", "target", "handler", "json", "no_progress"}


def _dumps(data) -> str:
    import json

    return json.dumps(data, indent=1) + "\n"
