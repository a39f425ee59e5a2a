"""Pathological but small LLVM modules, generated on demand (tests and benchmarks/reliability_*.py)."""

from __future__ import annotations


def deep_nesting(depth: int = 200) -> str:
    """`depth` loops nested inside each other (a CFG nesting depth that recursive analyses must survive)."""
    lines = ["define i32 @deep(i32 %n) {", "entry:", "  br label %h0"]
    for level in range(depth):
        inner = f"h{level + 1}" if level + 1 < depth else "body"
        preheader = "entry" if level == 0 else f"h{level - 1}"
        lines += [
            f"h{level}:",
            f"  %i{level} = phi i32 [ 0, %{preheader} ], [ %n{level}, %l{level} ]",
            f"  %c{level} = icmp slt i32 %i{level}, %n",
            f"  br i1 %c{level}, label %{inner}, label %x{level}",
        ]
    lines += ["body:", f"  br label %l{depth - 1}"]
    for level in reversed(range(depth)):
        lines += [f"l{level}:", f"  %n{level} = add i32 %i{level}, 1", f"  br label %h{level}"]
        outer_latch = f"l{level - 1}" if level > 0 else "done"
        lines += [f"x{level}:", f"  br label %{outer_latch}"]
    lines += ["done:", "  ret i32 0", "}"]
    return "\n".join(lines) + "\n"


def deep_expression(depth: int = 2000) -> str:
    """One long chain of dependent instructions (a use-def chain `depth` deep)."""
    lines = ["define i32 @chain(i32 %a) {", "entry:", "  %v0 = add i32 %a, 1"]
    lines += [f"  %v{i} = mul i32 %v{i - 1}, 3" for i in range(1, depth)]
    lines += [f"  ret i32 %v{depth - 1}", "}"]
    return "\n".join(lines) + "\n"


def huge_switch(cases: int = 5000) -> str:
    """A switch with `cases` cases, each to its own block."""
    lines = ["define i32 @sw(i32 %x) {", "entry:", "  switch i32 %x, label %default ["]
    lines += [f"    i32 {i}, label %c{i}" for i in range(cases)]
    lines += ["  ]"]
    for i in range(cases):
        lines += [f"c{i}:", f"  ret i32 {i * 7 % 1013}"]
    lines += ["default:", "  ret i32 -1", "}"]
    return "\n".join(lines) + "\n"


def many_blocks(blocks: int = 5000) -> str:
    """`blocks` basic blocks in a chain of conditional branches, each doing a little arithmetic."""
    lines = ["define i32 @blocks(i32 %x) {", "entry:", "  br label %b0"]
    for i in range(blocks):
        previous = "%x" if i == 0 else f"%v{i - 1}"
        following = f"b{i + 1}" if i + 1 < blocks else "exit"
        lines += [
            f"b{i}:",
            f"  %v{i} = add i32 {previous}, {i}",
            f"  %c{i} = icmp eq i32 %v{i}, 0",
            f"  br i1 %c{i}, label %exit, label %{following}",
        ]
    lines += ["exit:", "  ret i32 0", "}"]
    return "\n".join(lines) + "\n"


def deep_type(depth: int = 500) -> str:
    """A global of a type nested `depth` arrays deep."""
    type_text = "i32"
    for _ in range(depth):
        type_text = f"[1 x {type_text}]"
    return f"@g = global {type_text} zeroinitializer\n\ndefine i32 @f() {{\n  ret i32 0\n}}\n"


def many_functions(count: int = 2000) -> str:
    """Many tiny functions in one module."""
    return "\n".join(
        f"define i32 @f{i}(i32 %a) {{\n  %x = add i32 %a, {i}\n  ret i32 %x\n}}" for i in range(count)
    )


def long_name(length: int = 200_000) -> str:
    """A function whose name is `length` characters."""
    return f"define i32 @{'n' * length}(i32 %a) {{\n  ret i32 %a\n}}\n"
