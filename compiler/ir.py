"""LLVM IR in and out: parse + verify, normalize for prompts, split per function, count instructions.

Pure functions on IR text. Each parse gets its own LLVM context, so nothing accumulates in LLVM's global
context in a long-lived process and calls from different threads do not share LLVM state. Parsing and
verifying report errors (they do not abort the process); running passes can abort, which is why pass
pipelines run in `optserve.compiler.workers`.

llvmlite is imported inside the functions that call LLVM, which run in the compiler's worker processes: the
ingress imports this module for IRError and the text helpers and loads no LLVM (the contract test
tests/contracts/test_ingress_loads_no_llvm.py). The compiler's other modules import llvmlite the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from optserve.deadline import StoppedError

if TYPE_CHECKING:
    import llvmlite.binding as llvm

# Bitcode starts with 'BC' 0xC0DE, or with the wrapper magic 0x0B17C0DE (little-endian) used by Darwin.
_BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
_PARSE_ERROR_LOCATION = re.compile(r"<string>:(\d+):(\d+): error: (.*)")
# LLVM's parser recurses per nesting level of types and constant expressions and overflows the stack (a
# segfault, not an error) somewhere past 20,000 levels: refuse deep nesting before parsing. Real IR nests a
# few dozen levels at most.
MAX_NESTING = 1000
_STRINGS_AND_COMMENTS = re.compile(r'"[^"\n]*"|;[^\n]*')
_NESTING_STEP = {"(": 1, "[": 1, "{": 1, "<": 1, ")": -1, "]": -1, "}": -1, ">": -1}
_NOT_BRACKETS = re.compile(r"[^()\[\]{}<>]+")


class IRError(ValueError):
    """The input is not valid LLVM IR (empty, too large, not UTF-8, does not parse, or fails the verifier)."""


# Asked between functions by the splits: True = stop now (raise StoppedError). A unit of hundreds of
# functions takes seconds to split, and a thread cannot be killed: this is how a caller ends one.
Stop = Callable[[], bool]


def check_stop(stop: Stop | None, what: str) -> None:
    if stop is not None and stop():
        raise StoppedError(f"stopped while {what}")


def parse_module(
    ir: str, printed_here: bool = False, context: llvm.ContextRef | None = None
) -> llvm.ModuleRef:
    """Parse and verify IR text into a module of its own context (or of `context`, where modules are to be
    linked); IRError says what is wrong and where. `printed_here`: text this process made from a module
    that was parsed here (a unit's parts), which nests no deeper than that module did: the nesting guard
    for a client's text is not run again."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    if not printed_here:
        _check_nesting(ir)
    try:
        module = llvm.parse_assembly(ir, context=context or llvm.create_context())
    except RuntimeError as err:
        raise IRError(_describe_parse_error(str(err))) from None
    _verify_or_dispose(module)
    return module


def _check_nesting(ir: str) -> None:
    """IRError when brackets outside strings and comments nest deeper than MAX_NESTING. The brackets are
    picked out by a regular expression before the walk over them (a few percent of the characters): a
    walk over every character took 0.1 s of a 0.7 MB unit's compile."""
    code = _NOT_BRACKETS.sub("", _STRINGS_AND_COMMENTS.sub("", ir))
    if code.count("(") + code.count("[") + code.count("{") + code.count("<") <= MAX_NESTING:
        return
    depth = deepest = 0
    for step in map(_NESTING_STEP.__getitem__, code):
        depth += step
        if depth > deepest:
            deepest = depth
    if deepest > MAX_NESTING:
        raise IRError(
            f"IR nests types or expressions {deepest} levels deep, more than the limit of {MAX_NESTING}"
        )


def parse_ir(data: str | bytes, max_bytes: int) -> str:
    """Accept IR text or bitcode (at most `max_bytes`), verify it, and return it as textual IR."""
    text, module = read_ir(data, max_bytes)
    module.close()
    return text


def read_ir(data: str | bytes, max_bytes: int) -> tuple[str, llvm.ModuleRef]:
    """`parse_ir`'s text, and the module its check parsed from that text (verified, in its own context):
    the module a compile of that text starts from (`compile_input`), so a compile given the unit as it came
    reads it once."""
    if not data or not data.strip():
        raise IRError("empty IR: expected LLVM IR text or bitcode")
    size = len(data.encode()) if isinstance(data, str) else len(data)
    if size > max_bytes:
        raise IRError(f"IR is {size} bytes, more than the limit of {max_bytes} bytes")
    if isinstance(data, bytes | bytearray):
        if data.startswith(_BITCODE_MAGICS):
            read = _parse_bitcode(bytes(data))
            try:
                return _text_that_parses(_module_text(read), "bitcode")
            finally:
                read.close()
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise IRError(
                f"IR is neither bitcode nor UTF-8 text (invalid byte at offset {err.start})"
            ) from None
    if "\0" in data:
        raise IRError(f"IR text contains a NUL character at offset {data.index(chr(0))}")
    read = parse_module(data)
    try:
        return _text_that_parses(_module_text(read), "IR")
    finally:
        read.close()


def compile_input(ir: str | bytes) -> llvm.ModuleRef:
    """The module a compile starts from: `ir` is `parse_ir`'s text, parsed (as `parse_module`); or the unit
    as a client sent it (bitcode or text, within the service's `compiler.max_ir_bytes` already), read as
    `parse_ir` reads it, which ends in that very parse of its text (`read_ir`): the same module either way,
    so the same object, without the text's trips from the intake to a compile worker and its parse there."""
    if isinstance(ir, str):
        return parse_module(ir)
    return read_ir(ir, len(ir))[1]


def _parse_bitcode(data: bytes) -> llvm.ModuleRef:
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    try:
        module = llvm.parse_bitcode(data, context=llvm.create_context())
    except RuntimeError as err:
        raise IRError(f"invalid bitcode: {' '.join(str(err).split())}") from None
    except UnicodeDecodeError:  # LLVM's refusal quotes bytes of the input, which llvmlite decodes as UTF-8
        raise IRError("invalid bitcode: LLVM's reader refused it (its message is not UTF-8)") from None
    _verify_or_dispose(module)
    return module


def _module_text(module: llvm.ModuleRef) -> str:
    """The module as IR text; an IRError where that text is none this service can take (both found by
    fuzzing, benchmarks/reliability_fuzz_bitcode.py): LLVM prints some strings of a module as they are
    (attribute keys and values among them, given in bitcode or as `\\E1` escapes in text), so a module
    with bytes there that are not UTF-8 has no text; and bitcode without its module's contents reads as an
    empty module, whose text is empty (refused as empty text is)."""
    try:
        text = str(module)
    except UnicodeDecodeError as err:
        byte = err.object[err.start]
        raise IRError(f"invalid IR: its text is not UTF-8 (a string has byte {byte:#04x})") from None
    if not text.strip():
        raise IRError("invalid bitcode: it holds an empty module")
    return text


def _text_that_parses(text: str, given_as: str) -> tuple[str, llvm.ModuleRef]:
    """The module's printed text, once it is known to parse, and the module parsed from it: every later
    step (the engine, the compiler's workers, normalization) takes the module as text, and LLVM prints some
    modules it has read as text its own parser refuses (found by fuzzing: from bitcode, text that ends inside
    a string constant; from text, a DICompileUnit with `language: 0`, printed without the field its parser
    requires). Refused here, with the parser's reason, rather than accepted here and failing later; the
    check costs one more parse (whose module a compile takes: `compile_input`)."""
    try:
        return text, parse_module(text)
    except IRError as err:
        if given_as == "bitcode":
            raise IRError(f"invalid bitcode: its IR text does not parse: {err}") from None
        raise IRError(f"invalid IR: LLVM prints it as text that does not parse back: {err}") from None


def _verify_or_dispose(module: llvm.ModuleRef) -> None:
    """Verify; on failure dispose of the module now. Left to the garbage collector, a rejected module sits in
    a reference cycle (exception -> traceback -> frame) with its own context, and the collector may dispose
    of the context first: the module's disposal then crashes in LLVMContext::removeModule (a segfault)."""
    try:
        _verify(module)
    except IRError:
        module.close()
        raise


def _verify(module: llvm.ModuleRef) -> None:
    try:
        module.verify()
    except RuntimeError as err:
        raise IRError(f"IR fails the LLVM verifier: {str(err).strip()}") from None
    try:
        triple = module.triple
    except UnicodeDecodeError as err:  # found by fuzzing: bitcode's triple record holds any bytes
        byte = err.object[err.start]
        raise IRError(f"invalid IR: its target triple is not UTF-8 (byte {byte:#04x})") from None
    _check_target(triple)


def _check_target(triple: str) -> None:
    """Only the host's architecture: costs are measured for it, and codegen for some other targets (seen:
    hexagon) leaves global LLVM state behind that changes later results in the same process."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    host = llvm.get_process_triple()
    if triple and triple.split("-")[0] != host.split("-")[0]:
        raise IRError(f"target triple {triple!r} is not supported: optserve compiles for {host!r}")


def _describe_parse_error(message: str) -> str:
    found = _PARSE_ERROR_LOCATION.search(message)
    if found is None:
        return f"IR does not parse: {' '.join(message.split())}"
    line, column, what = found.groups()
    return f"IR does not parse: line {line}, column {column}: {what}"


def instruction_count(ir: str) -> int:
    """Number of instructions in all function bodies of the module (the pass-ordering cost)."""
    return module_instruction_count(parse_module(ir))


def module_instruction_count(module: llvm.ModuleRef) -> int:
    return sum(
        sum(1 for _ in block.instructions)
        for function in module.functions
        if not function.is_declaration
        for block in function.blocks
    )


# --- normalization (thesis §4.2.2) -----------------------------------------------------------------------

# Splits a line into quoted strings (kept verbatim) and the code between them.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
# Metadata attachments (`, !dbg !12`, `!llvm.loop !5`, `!tbaa !{...}`, `!llvm.loop !DIExpression()`) on
# instructions, functions, globals. A kind is any name LLVM's lexer takes after `!`: found by fuzzing, a kind
# like `!d-9` or a node written in place was left behind, referring to metadata the normalization drops.
_METADATA_ATTACHMENT = re.compile(r",?\s*![-a-zA-Z$._\\][-\w$.\\]*\s+!(?:\d+|\{[^}]*\}|[A-Za-z]\w*\([^)]*\))")
_ATTRIBUTE_GROUP_REF = re.compile(r"\s#\d+\b")
# Attributes and specifiers clang -O0 writes everywhere that carry no information for a pass-ordering model.
_BOILERPLATE_WORDS = re.compile(r"\s+(?:noundef|dso_local)(?![\w.$\-])")
_DROPPED_LINE_PREFIXES = ("attributes #", "!", "#dbg_", "source_filename", "declare void @llvm.dbg.")
_DEBUG_CALL = re.compile(r"^(?:tail |notail |musttail )?call void @llvm\.dbg\.")


def normalize_ir(ir: str) -> str:
    """The IR a model reads: comments, debug metadata and attributes dropped, whitespace standardized.

    Newlines are kept; indentation is stripped and other whitespace runs become one space. The result still
    parses and verifies (IRError otherwise), and keeps the module's instructions.
    """
    normalized = normalized_lines(str(parse_module(ir)))
    parse_module(normalized)  # the contract: normalized IR is still valid IR
    return normalized


def normalized_lines(printed: str) -> str:
    """`normalize_ir`'s text step alone, on IR as LLVM printed it (no parse, no check): for keys of IR that
    was just parsed and printed, where the parse would cost more than the hash (the tuning store's)."""
    lines = [line for line in map(_normalize_line, printed_lines(printed)) if line]
    return "\n".join(lines) + "\n"


def printed_lines(printed: str) -> list[str]:
    """The lines of IR as LLVM printed it, a quoted string that spans lines kept in the line it starts in:
    LLVM prints attribute strings as they are, newlines included (found by fuzzing: an `attributes #N`
    line dropped without its second half left that half as a line of its own, which does not parse)."""
    lines, open_line = [], None
    for line in printed.split("\n"):
        if open_line is not None:
            line = f"{open_line}\n{line}"
        open_line = line if '"' in line and _opens_string(line) else None
        if open_line is None:
            lines.append(line)
    if open_line is not None:
        lines.append(open_line)
    return lines


def _opens_string(line: str) -> bool:
    """Whether `line` ends inside a quoted string (a `"` outside complete strings, before any comment)."""
    rest = _QUOTED.sub("", line)
    semicolon = rest.find(";")
    return '"' in (rest if semicolon < 0 else rest[:semicolon])


def _normalize_line(line: str) -> str:
    # Lines without quotes (most of a unit: its metadata and instructions) skip the scans for them, and a
    # dropped line's prefix is seen before its comment is looked for: the same text, sooner (the key of a
    # whole unit is hashed on each request's path).
    if line.lstrip().startswith(_DROPPED_LINE_PREFIXES):
        return ""
    if '"' in line:
        code = _strip_comment(line).strip()
    else:
        semicolon = line.find(";")
        code = (line if semicolon < 0 else line[:semicolon]).strip()
    if not code or code.startswith(_DROPPED_LINE_PREFIXES) or _DEBUG_CALL.match(code):
        return ""
    if '"' not in code:
        return _normalize_code(code).strip()
    return _map_unquoted(code, _normalize_code)


def _normalize_code(code: str) -> str:
    # each substitution only where its pattern can match (a substring test is far cheaper than a search)
    if "!" in code:
        code = _METADATA_ATTACHMENT.sub("", code)
    if "#" in code:
        code = _ATTRIBUTE_GROUP_REF.sub("", code)
    if "noundef" in code or "dso_local" in code:
        code = _BOILERPLATE_WORDS.sub("", code)
    # Keep one space where the piece meets a quoted string, so `@"a b" = global` keeps its spacing.
    leading = " " if code[:1].isspace() else ""
    trailing = " " if code[-1:].isspace() else ""
    return leading + " ".join(code.split()) + trailing


def _strip_comment(line: str) -> str:
    """The line without its `;` comment; a `;` inside a quoted string is not a comment."""
    position = 0
    for quoted in _QUOTED.finditer(line):
        semicolon = line.find(";", position, quoted.start())
        if semicolon >= 0:
            return line[:semicolon]
        position = quoted.end()
    semicolon = line.find(";", position)
    return line if semicolon < 0 else line[:semicolon]


def _map_unquoted(line: str, transform) -> str:
    """Apply `transform` to the parts of `line` outside quoted strings."""
    parts, position = [], 0
    for quoted in _QUOTED.finditer(line):
        parts.append(transform(line[position : quoted.start()]) if quoted.start() > position else "")
        parts.append(quoted.group())
        position = quoted.end()
    if position < len(line):
        parts.append(transform(line[position:]))
    return "".join(parts).strip()


# --- per-function modules --------------------------------------------------------------------------------

_SYMBOL_REF = re.compile(r'@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*|\d+)')
_TYPE_DEFINITION = re.compile(r"^%[-\w$.\"]+ = type ")
_LINKAGE_TO_DROP = re.compile(
    r"^(define)\s+(?:(?:private|internal|available_externally|linkonce_odr|linkonce|weak_odr|weak|common)\s+)?"
)
_COMDAT = re.compile(r"\scomdat(?:\(\$[-\w$.\"]+\))?")


def split_functions(ir: str, stop: Stop | None = None) -> list[tuple[str, str]]:
    """One module per defined function: (function name, module IR), in the module's order.

    Each module holds the function with external linkage (so it is not deleted as unused), declarations
    of the functions it references, and the global variables it reaches: constants with their
    initializers, other globals as external declarations (their contents are not known to the function in
    the original program either). Functions whose module cannot be built (they reference aliases or
    ifuncs, which are left out) are skipped. `stop()` is asked before each function (StoppedError).
    """
    module = parse_module(ir)
    try:
        return _split_functions(module, stop)
    finally:
        module.close()  # on every path, StoppedError's too (see function_lists.split_unit)


def _split_functions(module: llvm.ModuleRef, stop: Stop | None) -> list[tuple[str, str]]:
    check_stop(stop, "parsing the module")  # each step before the loop takes up to a few tenths of a second
    printed = str(module)
    check_stop(stop, "printing the module")
    header = [line for line in printed.splitlines() if line.startswith(("target ", "source_filename"))] + [
        line for line in printed.splitlines() if _TYPE_DEFINITION.match(line)
    ]
    attribute_groups = [line for line in printed_lines(printed) if line.startswith("attributes #")]
    metadata = [line for line in printed.splitlines() if line.startswith("!")]

    try:
        functions = {function.name: function for function in module.functions}
        global_variables = {variable.name: variable for variable in module.global_variables}
    except UnicodeDecodeError:  # found by fuzzing: names hold any bytes (`@"\\FF"`), llvmlite decodes UTF-8
        raise IRError("a function or global variable's name is not UTF-8: the unit cannot be split") from None
    definitions = _definitions_as_printed(printed, [f.name for f in module.functions if not f.is_declaration])
    variable_texts = {name: str(variable) for name, variable in global_variables.items()}

    result = []
    for name, definition in definitions.items():
        check_stop(stop, "splitting functions")
        needed_functions, needed_variables = _reachable_symbols(
            definition, name, functions, global_variables, variable_texts
        )
        parts = [*header]
        for variable_name in needed_variables:
            parts.append(_global_for_split(global_variables[variable_name], variable_texts[variable_name]))
        for function_name in needed_functions:
            parts.append(_declaration(functions[function_name]))
        parts.append(_external_definition(definition))
        parts.extend(attribute_groups)
        parts.extend(metadata)
        text = "\n".join(parts) + "\n"
        try:
            function_module = parse_module(text)
        except IRError:
            continue
        try:
            result.append((name, str(function_module)))
        finally:
            function_module.close()
    return result


def _definitions_as_printed(printed: str | list[str], names: list[str]) -> dict[str, str]:
    """Each defined function's text as the whole module prints it (`printed`: that text, or its lines).

    Not `str(function)`: a function printed alone numbers its attribute groups (`#N`) by itself, so its
    call sites would point at the wrong `attributes #N` of the module (a broken module on real code).
    """
    blocks, current = [], None
    for line in printed.splitlines() if isinstance(printed, str) else printed:
        if line.startswith("define "):
            current = [line]
        elif current is not None:
            current.append(line)
            if line == "}":
                blocks.append("\n".join(current))
                current = None
    if len(blocks) != len(names):
        raise IRError(f"found {len(blocks)} function bodies for {len(names)} definitions")
    return dict(zip(names, blocks, strict=True))


def _reachable_symbols(definition, name, functions, global_variables, variable_texts):
    """Functions to declare and globals to include for one function, following constant initializers."""
    needed_functions: dict[str, None] = {}
    needed_variables: dict[str, None] = {}
    pending = [definition]
    while pending:
        text = pending.pop()
        for symbol in _symbols_in(text):
            if symbol == name:
                continue
            if symbol in functions and symbol not in needed_functions:
                needed_functions[symbol] = None
            elif symbol in global_variables and symbol not in needed_variables:
                needed_variables[symbol] = None
                if _global_kind(variable_texts[symbol]) == "constant":
                    pending.append(variable_texts[symbol])
    return needed_functions, needed_variables


def _symbols_in(text: str):
    for match in _SYMBOL_REF.finditer(text):
        token = match.group(1)
        yield token[1:-1] if token.startswith('"') else token


def _global_kind(variable_text: str) -> str:
    """'constant' or 'global': the keyword after the name, linkage and other specifiers."""
    name = _SYMBOL_REF.match(variable_text)
    rest = _QUOTED.sub('""', variable_text[name.end() :] if name else variable_text)
    kind = re.search(r"(?<![\w.$-])(global|constant)(?![\w.$-])", rest)
    return kind.group(1) if kind else "global"


def _global_for_split(variable, text: str) -> str:
    kind = _global_kind(text)
    if kind == "constant" and not variable.is_declaration:
        return _COMDAT.sub("", text)
    specifiers = text[: text.index(f" {kind} ")] if f" {kind} " in text else ""
    thread_local = re.search(r"thread_local(?:\([a-z]+\))?", specifiers)
    thread_local = f" {thread_local.group()}" if thread_local else ""
    value_type = _type_text(variable.global_value_type)
    return f"{_symbol_token(variable.name)} = external{thread_local} {kind} {value_type}"


def _type_text(value_type) -> str:
    """A type as IR writes it where it is used: a named struct prints as its definition (`%s = type {..}`)
    on its own, so use its name."""
    if value_type.is_struct and value_type.name:
        return _symbol_token(value_type.name).replace("@", "%", 1)
    return str(value_type)


def _declaration(function) -> str:
    function_type = str(function.global_value_type)
    return_type, parameters = _split_function_type(function_type)
    return f"declare {return_type} {_symbol_token(function.name)}({parameters})"


def _split_function_type(function_type: str) -> tuple[str, str]:
    """'i32 (ptr, ...)' -> ('i32', 'ptr, ...'), finding the parameter list's parenthesis from the end."""
    depth = 0
    for index in range(len(function_type) - 1, -1, -1):
        char = function_type[index]
        if char == ")":
            depth += 1
        elif char == "(":
            depth -= 1
            if depth == 0:
                return function_type[:index].strip(), function_type[index + 1 : -1]
    raise IRError(f"unexpected function type {function_type!r}")


def _external_definition(definition: str) -> str:
    lines = definition.strip("\n").split("\n")
    for index, line in enumerate(lines):
        if line.startswith("define "):
            header = _LINKAGE_TO_DROP.sub(r"\1 ", line)
            lines[index] = _COMDAT.sub("", header)
            break
    return "\n".join(lines)


def _symbol_token(name: str) -> str:
    if re.fullmatch(r"[-a-zA-Z$._][-a-zA-Z$._0-9]*", name):
        return f"@{name}"
    escaped = "".join(
        char if char.isprintable() and char not in '"\\' else f"\\{ord(char):02X}" for char in name
    )
    return f'@"{escaped}"'
