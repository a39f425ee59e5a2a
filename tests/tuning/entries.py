"""Entries for the tuning store's tests."""

from __future__ import annotations

import hashlib

from optserve.tuning.records import Toolchain, TunedList

TOOLCHAIN = Toolchain("text_size", "x86_64-unknown-linux-gnu", "20.1.8", "7e85ffbb740d")


def hash_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def function_entry(
    name: str,
    cost: int,
    *,
    pass_list: tuple[str, ...] = ("-Oz", "instcombine"),
    compiles: int = 10,
    toolchain: Toolchain = TOOLCHAIN,
    oz_cost: int = 100,
    found_by: str = "test",
    found_at: float = 1_700_000_000.0,
) -> TunedList:
    return TunedList(
        ir_hash=hash_of(name),
        toolchain=toolchain,
        kind="function",
        pass_list=pass_list,
        function_lists=(),
        cost=cost,
        oz_cost=oz_cost,
        compiles=compiles,
        found_by=found_by,
        found_at=found_at,
    )


def unit_entry(name: str, cost: int, *, compiles: int = 10, toolchain: Toolchain = TOOLCHAIN) -> TunedList:
    return TunedList(
        ir_hash=hash_of(name),
        toolchain=toolchain,
        kind="unit",
        pass_list=("-Oz",),
        function_lists=(("alpha", ("-Oz", "simplifycfg")), ("beta", ("sroa", "instcombine"))),
        cost=cost,
        oz_cost=1000,
        compiles=compiles,
        found_by="local_search",
        found_at=1_700_000_500.25,
    )


def compile_to_ir(source: str) -> str:
    """A C unit as optcc sends it (clang-19's -Oz front end, no LLVM passes)."""
    import subprocess

    command = ["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w", "-x", "c"]
    arguments = [*command, "-", "-o", "-"]
    return subprocess.run(arguments, input=source, capture_output=True, text=True, check=True).stdout
