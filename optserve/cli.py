"""The `optserve` command line: one subcommand per job, each registered by the module that owns it.

Command modules import only argparse-level code at registration; heavy imports (vLLM, Ray, torch) happen
inside the handler, so `optserve --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

# Modules that own subcommands; each defines `register(subparsers) -> None`.
COMMAND_MODULES = (
    "optserve.compiler.cli",
    "optserve.kernels.cli",
    "optserve.policies.cli",
    "optserve.engine.cli",
    "optserve.corpus.cli",
    "optserve.serve.cli",
)


def emit(
    result: Mapping[str, Any], as_json: bool, render: Callable[[Mapping[str, Any]], str] | None = None
) -> None:
    """Print a command's result: JSON with --json, else the human rendering (or `key: value` lines)."""
    if as_json:
        json.dump(result, sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    elif render is not None:
        print(render(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optserve", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
