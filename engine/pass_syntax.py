"""How a model spells a pass list, and the conversion to the compiler core's pass lists.

Our own models write pass lists exactly as `optserve.compiler.passes` formats them. Another model may spell
them differently (Meta's LLM Compiler writes `opt -p` pipelines such as `default<Oz>,instcombine`): a profile
names its syntax and the engine converts, so candidates always reach the compiler in one canonical form.
"""

from __future__ import annotations

import re
from typing import Protocol


class PassSyntax(Protocol):
    name: str

    def regex(self) -> str:
        """Regex (outlines_core and Python `re` dialect) of one pass list as the model writes it."""
        ...

    def parse(self, text: str) -> tuple[str, ...]:
        """Canonical pass list (compiler pass names, meta flag first) or PassListError."""
        ...

    def format(self, pass_list: tuple[str, ...]) -> str: ...


class CompilerPassSyntax:
    """The compiler core's own grammar: `PASS_LIST_REGEX`, `parse_pass_list`, `format_pass_list`."""

    name = "optserve"

    def regex(self) -> str:
        from optserve.compiler.passes import PASS_LIST_END, PASS_LIST_REGEX

        # The profile's answer template says what ends the list, so the compiler's terminator is left out.
        return PASS_LIST_REGEX.removesuffix(PASS_LIST_END)

    def parse(self, text: str) -> tuple[str, ...]:
        from optserve.compiler.passes import parse_pass_list

        return tuple(parse_pass_list(text))

    def format(self, pass_list: tuple[str, ...]) -> str:
        from optserve.compiler.passes import format_pass_list

        return format_pass_list(list(pass_list))


class OptPipelineSyntax:
    """`opt -p` pipelines: comma-separated pass names, the meta flag as `default<Oz>` first.

    For models that were trained on `opt` command lines (Meta's LLM Compiler). At most `max_passes` passes.
    """

    name = "opt-pipeline"

    def __init__(self, max_passes: int = 32):
        self.max_passes = max_passes

    def regex(self) -> str:
        from optserve.compiler.passes import META_FLAGS, PASS_NAMES

        names = "|".join(re.escape(n) for n in sorted(PASS_NAMES, key=len, reverse=True))
        metas = "|".join(re.escape(f"default<{m.removeprefix('-')}>") for m in META_FLAGS)
        one = f"(?:{names})"
        return f"(?:(?:{metas})(?:,{one}){{0,{self.max_passes}}}|{one}(?:,{one}){{0,{self.max_passes - 1}}})"

    def parse(self, text: str) -> tuple[str, ...]:
        from optserve.compiler.passes import validate_pass_list

        parts = [p.strip() for p in text.strip().split(",") if p.strip()]
        return validate_pass_list(
            [f"-{p[len('default<') : -1]}" if p.startswith("default<") else p for p in parts]
        )

    def format(self, pass_list: tuple[str, ...]) -> str:
        return ",".join(f"default<{p.removeprefix('-')}>" if p.startswith("-O") else p for p in pass_list)


SYNTAXES = {"optserve": CompilerPassSyntax, "opt-pipeline": OptPipelineSyntax}
