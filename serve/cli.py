"""`optserve serve` runs the service; `optserve optimize`, `schedule` and `health` call a running one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from optserve.cli import add_json_flag, emit
from optserve.objectives import OBJECTIVE_NAMES, Objective
from optserve.serve.schemas import StrategyName
from optserve.strategies import ServedStrategy


def register(subparsers) -> None:
    serve = subparsers.add_parser("serve", help="run the service (Ray Serve: gRPC + HTTP)")
    serve.add_argument(
        "--config",
        help="optserve YAML config (default: $OPTSERVE_CONFIG, else none); OPTSERVE_<SECTION>__<FIELD> "
        "variables override it (`optserve config show` prints the result)",
    )
    serve.add_argument("--host", help="listen address (default 127.0.0.1: this host only)")
    serve.add_argument("--http-port", type=int)
    serve.add_argument("--grpc-port", type=int)
    serve.add_argument("--grpc-tls-port", type=int, help="gRPC over TLS (when serve.tls_certfile is set)")
    serve.add_argument(
        "--token", help="require this token from callers (else $OPTSERVE_TOKEN, serve.auth_token)"
    )
    serve.set_defaults(handler=_serve)

    optimize = subparsers.add_parser("optimize", help="ask a running service for the best pass list")
    optimize.add_argument("file", type=Path, help="LLVM IR (.ll) or bitcode (.bc)")
    optimize.add_argument(
        "--strategy", choices=list(get_args(StrategyName)), default=ServedStrategy.GREEDY.value
    )
    optimize.add_argument("--samples", type=int, default=1, help="model candidates (priority/nucleus)")
    optimize.add_argument("--objective", choices=OBJECTIVE_NAMES, default=Objective.INSTRUCTION_COUNT.value)
    optimize.add_argument("--feedback-rounds", type=int, default=0)
    optimize.add_argument("--deadline", type=float, default=0.0, help="seconds; 0 = the server's default")
    optimize.add_argument("--output-ir", type=Path, help="write the optimized module here")
    optimize.add_argument("--output-object", type=Path, help="write the object file here")
    optimize.add_argument("--no-cache", action="store_true", help="recompute even if answered before")
    optimize.add_argument(
        "--baseline-cost",
        type=int,
        help="the cost of code you already hold: the service skips -Oz, must beat it",
    )
    _add_client_flags(optimize)
    optimize.set_defaults(handler=_optimize)

    schedule = subparsers.add_parser("schedule", help="ask a running service for a loop schedule")
    schedule.add_argument("--einsum", required=True, help='e.g. "C[m,n] += A[m,k] * B[k,n]"')
    schedule.add_argument("--sizes", required=True, help="e.g. m=128,k=64,n=256")
    schedule.add_argument(
        "--method", "--search", dest="method", default="", help="search or policy (default: the server's)"
    )
    schedule.add_argument("--time-limit", type=float, default=0.0, help="seconds; 0 = the server's default")
    schedule.add_argument("--no-measure", action="store_true", help="do not JIT and time the kernel")
    schedule.add_argument("--kernel", action="store_true", help="include the generated kernel's LLVM IR")
    schedule.add_argument(
        "--threads", type=int, default=0, help="threads the kernel may run on; 0 = the deployment's CPUs"
    )
    _add_client_flags(schedule)
    schedule.set_defaults(handler=_schedule)

    health = subparsers.add_parser("health", help="health and model metadata of a running service")
    _add_client_flags(health)
    health.set_defaults(handler=_health)


def _add_client_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=None, help="host:port of the gRPC API (default localhost:9000)")
    parser.add_argument("--token", default=None, help="auth token (default $OPTSERVE_TOKEN)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for an answer")
    parser.add_argument("--tls", action="store_true", help="call over TLS (the service's grpc_tls_port)")
    parser.add_argument(
        "--ca-cert", help="PEM CA certificate to trust; implies --tls (default $OPTSERVE_CA_CERT)"
    )
    add_json_flag(parser)


def _client(args):
    from optserve.clients.python.client import DEFAULT_TARGET, OptserveClient

    return OptserveClient(
        args.target or DEFAULT_TARGET,
        token=args.token,
        timeout_s=args.timeout,
        tls=args.tls,
        ca_cert=args.ca_cert,
    )


def _failed(err) -> int:
    print(f"error: {err}", file=sys.stderr)
    return 1


def _serve(args) -> int:
    import os
    import signal
    import threading

    from optserve.clients.python.client import TOKEN_ENV
    from optserve.config import SettingsError, env_name, load_settings
    from optserve.serve import server
    from optserve.serve.edges.access import is_loopback_host

    try:
        settings = load_settings(args.config)
    except SettingsError as error:
        return _failed(error)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    overrides = {
        name: value
        for name, value in (
            ("host", args.host),
            ("http_port", args.http_port),
            ("grpc_port", args.grpc_port),
            ("grpc_tls_port", args.grpc_tls_port),
            ("auth_token", token),
        )
        if value is not None
    }
    settings = settings.model_copy(
        update={"serve": settings.serve.model_validate(settings.serve.model_dump() | overrides)}
    )
    if not is_loopback_host(settings.serve.host) and settings.serve.auth_token is None:
        if settings.serve.require_token_beyond_loopback:
            opt_out = env_name("serve.require_token_beyond_loopback")
            return _failed(
                f"refusing to listen on {settings.serve.host} without a token: set ${TOKEN_ENV} or --token, "
                f"or {opt_out}=false to let anyone who can reach this host call the service"
            )
        print(
            f"warning: listening on {settings.serve.host} without a token: anyone who can reach this host "
            f"may call the service (set ${TOKEN_ENV} or --token)",
            flush=True,
        )
    print("starting optserve (Ray Serve)...", flush=True)
    endpoints = server.start(settings)
    print(endpoints.describe(), flush=True)
    model_dir = settings.engine.model_dir
    if not (model_dir / "profile.json").is_file():
        print(
            f"warning: no pass-ordering model at {model_dir}: Optimize answers UNAVAILABLE until "
            "engine.model_dir names one (LoopTune and health work)",
            flush=True,
        )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    print("stopping optserve...", flush=True)
    if not server.stop():  # Ray's processes ended beside this one: nothing is left to close cleanly
        sys.stdout.flush()
        os._exit(0)
    return 0


def baseline_cost(result) -> int | None:
    """The client's own cost as the answer ranks it (its `client_baseline` candidate); None without one."""
    costs = [c["cost"] for c in result["candidates"] if c["source"].lower() == "client_baseline"]
    return costs[0] if costs else None


def _render_optimize(result) -> str:
    best = result["best"]
    own = baseline_cost(result)
    oz = "not finished by the deadline" if result["oz_skipped"] else f"cost {result['oz_cost']}"
    lines = [
        f"best:   {best['pipeline']}  ({best['source']}, cost {best['cost']})",
        (
            f"-Oz:    {oz}   your baseline: cost {own}   "
            f"saved vs it: {result['improvement_over_oz_pct']:.2f}%"
            if own is not None
            else f"-Oz:    cost {result['oz_cost']}   input: cost {result['input_cost']}   "
            f"saved vs -Oz: {result['improvement_over_oz_pct']:.2f}%"
        ),
        f"model:  {result['model_id']} {result['model_version']}   time: {result['timings']['total_s']:.3f} s"
        + ("   (deadline hit)" if result["deadline_hit"] else "")
        + ("   (cached)" if result["cached"] else ""),
        "candidates:",
    ]
    for c in result["candidates"]:
        cost = c["cost"] if not c["error"] else f"failed: {c['error']}"
        lines.append(
            f"  {cost!s:>8}  {c['source']:<5}  {c['logprob']:9.3f}  {' '.join(c['passes']) or '(none)'}"
        )
    return "\n".join(lines)


def _optimize(args) -> int:
    from optserve.clients.python.client import CallError, to_dict

    data = args.file.read_bytes()
    module = data if data[:4] in (b"BC\xc0\xde", b"\xde\xc0\x17\x0b") else data.decode("utf-8", "replace")
    try:
        with _client(args) as client:
            response = client.optimize(
                module,
                objective=args.objective,
                strategy=args.strategy,
                samples=args.samples,
                feedback_rounds=args.feedback_rounds,
                deadline_s=args.deadline,
                return_ir=args.output_ir is not None,
                return_object=args.output_object is not None,
                bypass_cache=args.no_cache,
                **({} if args.baseline_cost is None else {"baseline_cost": args.baseline_cost}),
            )
    except CallError as err:
        return _failed(err)
    if args.output_ir is not None:
        args.output_ir.write_text(response.optimized_ir)
    if args.output_object is not None:
        args.output_object.write_bytes(response.object_code)
    result = to_dict(response)
    result.pop("optimized_ir", None)
    result.pop("object_code", None)
    for candidate in [result["best"], *result["candidates"]]:
        candidate["source"] = candidate["source"].lower()
    emit(result, args.json, _render_optimize)
    return 0


def _render_schedule(result) -> str:
    base = f"{result['base_gflops']:.2f}" if result["base_gflops"] else "not timed"
    return (
        f"{result['schedule']}\n"
        f"actions: {' '.join(result['actions']) or '(none)'}\n"
        f"GFLOPS: {result['gflops']:.2f} (base {base}, "
        f"{'measured' if result['measured'] else 'predicted'}), method {result['method']}, "
        f"{result['seconds']:.2f} s, {result.get('threads') or 1} thread(s)"
    )


def _schedule(args) -> int:
    from optserve.clients.python.client import CallError, to_dict
    from optserve.kernels.spec import SpecError, parse_sizes

    try:
        sizes = parse_sizes(args.sizes)
    except SpecError as err:
        return _failed(f"--sizes: {err}")
    try:
        with _client(args) as client:
            response = client.schedule(
                args.einsum,
                sizes,
                method=args.method,
                time_limit_s=args.time_limit,
                measure=not args.no_measure,
                return_kernel=args.kernel,
                threads=args.threads,
            )
    except CallError as err:
        return _failed(err)
    emit(to_dict(response), args.json, _render_schedule)
    return 0


def _health(args) -> int:
    from optserve.clients.python.client import LOOPTUNE_SERVICE, PASS_ORDERING_SERVICE, CallError, to_dict

    try:
        with _client(args) as client:
            result = {
                "server": client.health(""),
                PASS_ORDERING_SERVICE: client.health(PASS_ORDERING_SERVICE),
                LOOPTUNE_SERVICE: client.health(LOOPTUNE_SERVICE),
                "model": to_dict(client.model_metadata()),
            }
    except CallError as err:
        return _failed(err)
    emit(result, args.json)
    return 0 if result["server"] == "SERVING" else 1
