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
    "optserve.policies.schedule_local",
    "optserve.looptune_training.cli",
    "optserve.engine.cli",
    "optserve.corpus.cli",
    "optserve.serve.cli",
    "optserve.config_cli",
    "optserve.tuning.cli",
    "optserve.passlm.cli",
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


def positive_int(text: str) -> int:
    """An argparse type: an integer above 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def command_group(subparsers: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """The subcommands of a group shared by several modules (`optserve eval looptune|passes`): the first
    module to register creates the group, the others add to it."""
    group = subparsers.choices.get(name)
    if group is None:
        group = subparsers.add_parser(name, help=help)
        group.add_subparsers(dest="target", metavar="TARGET", required=True)
    return next(a for a in group._actions if isinstance(a, argparse._SubParsersAction))


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
