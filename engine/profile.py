"""The model profile: how to talk to one pass-ordering model, stored as `profile.json` next to its weights.

A profile says how to build the prompt from IR (and compiler feedback), what the answer looks like (thesis
Fig. 4.1: the pass list, then the instruction counts before and after), how the model spells pass lists, and
how long an answer may be. Serving another model (e.g. Meta's LLM Compiler) means swapping the model
directory and its profile; no code changes.

How a model spells a pass list is its `PassSyntax`: our own models write pass lists exactly as
`optserve.compiler.passes` formats them; another model may spell them differently (Meta's LLM Compiler
writes `opt -p` pipelines such as `default<Oz>,instcombine`): a profile names its syntax and the engine
converts, so candidates always reach the compiler in one canonical form.

Example (our format):

    {"format": 1,
     "model_id": "passformer-tiny",
     "prompt_template": "<ir>\\n{ir}</ir>\\n{feedback}<answer>\\n",
     "feedback_template": "<feedback>\\n{feedback}</feedback>\\n",
     "answer_template": "{pass_list}\\n{cost_before} -> {cost_after}",
     "pass_syntax": "optserve",
     "normalize_ir": true, "add_bos": true, "max_new_tokens": 96}

`encode_example` is the one tokenization used by training and serving alike.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from optserve.objectives import Objective

PROFILE_FILE = "profile.json"
COUNT_REGEX = "(?:0|[1-9][0-9]{0,6})"  # an instruction count as the model writes it
_ANSWER_FIELDS = ("pass_list", "cost_before", "cost_after")


class ModelProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = Field(1, description="profile format version")
    model_id: str = Field(..., min_length=1, description="name reported with every answer")
    prompt_template: str = Field(
        ..., description="text before the answer; fields {ir}, and optionally {feedback} and {objective}"
    )
    feedback_template: str = Field("{feedback}\n", description="how feedback text enters {feedback}")
    answer_template: str = Field(
        ..., description="the answer; fields {pass_list} and optionally {cost_before} and {cost_after}"
    )
    pass_syntax: str = Field(
        "optserve", description="how the model spells pass lists: optserve | opt-pipeline"
    )
    normalize_ir: bool = Field(True, description="normalize IR (thesis §4.2.2) before it enters the prompt")
    add_bos: bool = Field(True, description="start the prompt with the tokenizer's BOS token")
    max_new_tokens: int = Field(96, gt=0, description="longest answer in tokens")
    max_prompt_tokens: int | None = Field(None, gt=0, description="longest prompt; default: model context")
    objectives: tuple[str, ...] = Field(
        (Objective.INSTRUCTION_COUNT.value,),
        min_length=1,
        description="objectives the model was trained for, the default first; a prompt_template with "
        "{objective} names the request's objective there",
    )

    @field_validator("prompt_template")
    @classmethod
    def _prompt_fields(cls, template: str) -> str:
        fields = _fields(template)
        if "ir" not in fields or not fields <= {"ir", "feedback", "objective"}:
            raise ValueError(
                f"prompt_template needs {{ir}} and may use {{feedback}} and {{objective}}; "
                f"it has {sorted(fields)}"
            )
        return template

    @field_validator("answer_template")
    @classmethod
    def _answer_fields(cls, template: str) -> str:
        parts = _fields_in_order(template)
        if (
            parts.count("pass_list") != 1
            or not set(parts) <= set(_ANSWER_FIELDS)
            or len(parts) != len(set(parts))
        ):
            raise ValueError("answer_template needs {pass_list} once and may use {cost_before}/{cost_after}")
        if ("cost_before" in parts) != ("cost_after" in parts):
            raise ValueError("answer_template has either both instruction counts or neither")
        # Text must close the list: outlines_core 0.2.14 keeps only EOS out of an accepting state, so a list
        # that could end anywhere would be cut after its first pass.
        if not _literals(template)[parts.index("pass_list") + 1]:
            raise ValueError("answer_template needs text right after {pass_list} to mark where the list ends")
        return template

    @field_validator("pass_syntax")
    @classmethod
    def _known_syntax(cls, name: str) -> str:
        if name not in SYNTAXES:
            raise ValueError(f"unknown pass_syntax {name!r}; known: {sorted(SYNTAXES)}")
        return name

    @classmethod
    def load(cls, model_dir: str | Path) -> ModelProfile:
        path = Path(model_dir) / PROFILE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: a model directory needs a {PROFILE_FILE}")
        return cls.model_validate_json(path.read_text())

    def save(self, model_dir: str | Path) -> None:
        (Path(model_dir) / PROFILE_FILE).write_text(self.model_dump_json(indent=2) + "\n")

    def answer_format(self) -> AnswerFormat:
        return AnswerFormat(self.answer_template, SYNTAXES[self.pass_syntax]())

    def prompt(self, ir: str, feedback: str | None = None, objective: str | None = None) -> str:
        """The prompt text; `ir` must already be normalized if the profile asks for it.

        `objective` enters only a template with {objective}. One the model was not trained for becomes the
        profile's default: the model proposes lists for what it knows, and the service still measures every
        candidate for the requested objective.
        """
        if objective not in self.objectives:
            objective = self.objectives[0]
        feedback_text = self.feedback_template.format(feedback=feedback) if feedback else ""
        values = {"ir": ir, "feedback": feedback_text, "objective": objective}
        return self.prompt_template.format(
            **{k: v for k, v in values.items() if k in _fields(self.prompt_template)}
        )


@dataclass(frozen=True)
class ParsedAnswer:
    pass_list: tuple[str, ...]
    cost_before: int | None
    cost_after: int | None


class AnswerFormat:
    """The answer template turned into grammars (for constrained decoding) and a parser (for its results)."""

    def __init__(self, template: str, syntax: PassSyntax):
        self.template = template
        self.syntax = syntax
        self.fields = _fields_in_order(template)
        self.literals = _literals(template)  # text before, between and after the fields
        self.has_costs = "cost_before" in self.fields

    @property
    def pass_list_end(self) -> str:
        """The text that closes the pass list."""
        return self.literals[self.fields.index("pass_list") + 1]

    def regex(self, with_costs: bool = True, pass_lists: tuple[tuple[str, ...], ...] | None = None) -> str:
        """The answer's grammar; without costs it stops right after the pass list's closing text.

        `pass_lists` narrows the list to one of those (e.g. the coreset's), as the model spells them.
        """
        lists = (
            "|".join(regex_escape(self.syntax.format(p)) for p in pass_lists)
            if pass_lists
            else self.syntax.regex()
        )
        field_regex = {
            "pass_list": f"(?:{lists})",
            "cost_before": COUNT_REGEX,
            "cost_after": COUNT_REGEX,
        }
        fields = self.fields if with_costs else self.fields[: self.fields.index("pass_list") + 1]
        parts = [regex_escape(self.literals[0])]
        for i, name in enumerate(fields):
            parts += [field_regex[name], regex_escape(self.literals[i + 1])]
        return "".join(parts)

    def pass_list_closed(self, answer_text: str) -> bool:
        """Whether the pass list is complete in `answer_text` (branching in the search stops there)."""
        return answer_text.find(self.pass_list_end, len(self.literals[0])) >= 0

    def parse(self, answer_text: str) -> ParsedAnswer:
        """Pass list and instruction counts from an answer (counts are None when absent or cut off)."""
        pattern = re.escape(self.literals[0])
        for i, name in enumerate(self.fields):
            pattern += f"(?P<{name}>.*?)" if name == "pass_list" else f"(?P<{name}>[0-9]+)"
            pattern += re.escape(self.literals[i + 1])
        match = re.fullmatch(pattern, answer_text, flags=re.DOTALL)
        if match is None and self.has_costs:  # an answer cut before its counts still has a pass list
            head = re.escape(self.literals[0]) + "(?P<pass_list>.*?)" + re.escape(self.pass_list_end)
            match = re.match(head, answer_text, flags=re.DOTALL)
        if match is None:
            raise ValueError(f"answer does not match the profile's template: {answer_text!r}")
        groups = match.groupdict()
        counts = [int(groups[k]) if groups.get(k) else None for k in ("cost_before", "cost_after")]
        return ParsedAnswer(self.syntax.parse(groups["pass_list"]), counts[0], counts[1])

    def render(
        self, pass_list: tuple[str, ...], cost_before: int | None = None, cost_after: int | None = None
    ) -> str:
        """The answer text for a training example."""
        values = {
            "pass_list": self.syntax.format(pass_list),
            "cost_before": cost_before,
            "cost_after": cost_after,
        }
        if self.has_costs and (cost_before is None or cost_after is None):
            raise ValueError(
                "this profile's answers carry instruction counts; give cost_before and cost_after"
            )
        return self.template.format(**{k: values[k] for k in self.fields})


class PassSyntax(Protocol):
    """How a model spells a pass list; a profile's `pass_syntax` names one of `SYNTAXES`."""

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


def encode_example(profile: ModelProfile, tokenizer, prompt: str, answer: str | None = None):
    """Token ids of a prompt (BOS first if the profile says so) and of its answer (EOS last).

    Prompt and answer are tokenized separately, so a model trained on these ids sees at serving time the same
    boundary it learned.
    """
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    if profile.add_bos and tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id, *prompt_ids]
    if answer is None:
        return prompt_ids, None
    return prompt_ids, [*tokenizer.encode(answer, add_special_tokens=False), tokenizer.eos_token_id]


def regex_escape(text: str) -> str:
    """Escape literal text for both outlines_core's (Rust) and Python's regex dialects."""
    escaped = {"\n": r"\n", "\t": r"\t", "\r": r"\r"}
    return "".join(escaped.get(c, "\\" + c if c in _REGEX_META else c) for c in text)


_REGEX_META = set(r"\.^$|?*+()[]{}")


def _fields_in_order(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def _fields(template: str) -> set[str]:
    return set(_fields_in_order(template))


def _literals(template: str) -> list[str]:
    """Literal text around the fields: len(fields) + 1 strings."""
    literals = [""]
    for literal, name, _, _ in string.Formatter().parse(template):
        literals[-1] += literal
        if name is not None:
            literals.append("")
    return literals
