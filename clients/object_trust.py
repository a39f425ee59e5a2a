"""The checks an object from the service passes before optcc links or caches it (`refusal`).

The service's object replaces the one clang made from the same unit, so it must be that unit's object in
every way a linker or a loader sees; clang's object (at hand when optcc chooses) and the unit's bitcode
(what optcc sent) say what that is:
  - a sane relocatable ELF: readable by pyelftools, every section inside the file; ET_REL, no program
    headers; class, byte order, machine and OS ABI as clang's object's;
  - sane sections: none both writable and executable; code only in `.text`/`.text.*` or in a section
    clang's object also has (a unit's `section("...")` attribute); nothing that runs code when the program
    loads (`.init_array`, `.ctors`, ...) unless clang's object has that section too; a `.note.GNU-stack`
    as clang's (an object without it, or with it executable, gives the program an executable stack);
    no section kind a relocatable object does not carry (dynamic tables, program interpreters);
  - the same defined global symbols: the strong ones (binding GLOBAL) exactly clang's, names and types;
    clang's weak ones outside a COMDAT group kept (`__attribute__((weak))`: another unit may need
    them); a weak one clang's object lacks only if the unit's IR defines it (an inline function clang's
    pipeline inlined everywhere and dropped, another pass list did not);
  - no undefined symbol beyond clang's object's, the IR's references and what LLVM itself may call
    (`RUNTIME`, `RUNTIME_PATTERN`: memcpy for a loop, puts for a printf, compiler-rt's builtins, ...).
The IR's symbols come from `llvm-nm` on the bitcode (beside optcc's clang), read only when clang's object
does not already account for every symbol of the service's: most objects need no process for it.

What these checks do not catch is an object of the same shape whose code does something else: only TLS
(channel_policy.py) keeps others from writing the answer, and only the service's own screens (its
miscompile checks) keep it correct.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Functions LLVM's passes and code generator may call that the unit's IR need not name: memory and string
# idioms (loop-idiom, SimplifyLibCalls), stdio rewrites (printf -> puts/putchar, fprintf -> fwrite/fputs),
# math rewrites (pow -> sqrt/exp2), allocation (malloc+memset -> calloc), stack protector, PIC and TLS
# helpers, unwinding, profiling hooks.
_RUNTIME_NAMES = """
    memcpy memmove memset memcmp bcmp bzero memchr memrchr memccpy mempcpy
    strlen strnlen strchr strrchr strcmp strncmp strcpy stpcpy strncpy stpncpy strcat strncat strdup strndup
    strstr strspn strcspn strpbrk strtol strtoul strtoll strtoull atoi atol atoll
    puts putchar fputc fputs fwrite putc fputc_unlocked fputs_unlocked fwrite_unlocked putc_unlocked
    putchar_unlocked printf fprintf sprintf snprintf iprintf siprintf fiprintf
    malloc calloc realloc free
    sqrt sqrtf sqrtl exp2 exp2f exp2l exp10 exp10f exp10l ldexp ldexpf ldexpl pow powf powl fabs fabsf fabsl
    floor floorf floorl ceil ceilf ceill round roundf roundl roundeven roundevenf roundevenl trunc truncf
    truncl rint rintf rintl nearbyint nearbyintf nearbyintl lround lroundf lroundl llround llroundf llroundl
    lrint lrintf lrintl llrint llrintf llrintl fmin fminf fminl fmax fmaxf fmaxl copysign copysignf
    copysignl sin sinf sinl cos cosf cosl tan tanf tanl sincos sincosf sincosl exp expf expl log logf logl
    log2 log2f log2l log10 log10f log10l cbrt cbrtf cbrtl hypot hypotf hypotl fmod fmodf fmodl frexp frexpf
    frexpl modf modff modfl cabs cabsf cabsl
    __stack_chk_fail __stack_chk_guard __stack_smash_handler _GLOBAL_OFFSET_TABLE_ __tls_get_addr
    __emutls_get_address _Unwind_Resume __fentry__ mcount __cyg_profile_func_enter __cyg_profile_func_exit
    __morestack __chkstk __gnu_f2h_ieee __gnu_h2f_ieee
"""
RUNTIME = frozenset(_RUNTIME_NAMES.split())
# compiler-rt's builtins (__udivti3, __muloti4, __popcountdi2, __floattidf, __extendhfsf2, __mulsc3, ...),
# the atomic and __sync libcalls, 32-bit x86's PC thunks.
RUNTIME_PATTERN = re.compile(
    r"__[a-z]+(?:[sdtox]i|[hsdtxb]f|[sdxt]c)[0-9]?|__atomic_\w+|__sync_\w+|__x86\.get_pc_thunk\.\w+"
)
# Sections whose contents run when the program loads or exits: the service's object may carry one only
# where clang's does.
STARTUP = re.compile(r"\.(?:init_array|fini_array|preinit_array|ctors|dtors|init|fini)(?:\..*)?")
# Section kinds a relocatable object of LLVM's carries (pyelftools' names, or the number it does not name).
_SECTION_KIND_NAMES = """
    SHT_NULL SHT_PROGBITS SHT_NOBITS SHT_SYMTAB SHT_STRTAB SHT_RELA SHT_REL SHT_GROUP SHT_NOTE
    SHT_INIT_ARRAY SHT_FINI_ARRAY SHT_PREINIT_ARRAY SHT_SYMTAB_SHNDX SHT_X86_64_UNWIND SHT_ARM_EXIDX
    SHT_ARM_ATTRIBUTES SHT_RISCV_ATTRIBUTES SHT_LLVM_ADDRSIG SHT_GNU_ATTRIBUTES SHT_AMD64_UNWIND
"""
SECTION_KINDS = frozenset(_SECTION_KIND_NAMES.split())
# LLVM's own kinds (SHT_LLVM_ADDRSIG, call-graph profile, ...: 0x6fff4c00-0x6fff4cff), which pyelftools
# leaves unnamed: metadata for the linker, never loaded as code.
LLVM_KINDS = range(0x6FFF4C00, 0x6FFF4D00)
SHF_WRITE, SHF_EXECINSTR = 0x1, 0x4


class Untrusted(Exception):
    """The object fails a check; the message says which."""


@dataclass(frozen=True)
class Symbol:
    """A global symbol of an object: `binding` GLOBAL or WEAK, `kind` its type (FUNC, OBJECT, ...);
    `comdat`: defined in a COMDAT group's section (a linkonce copy the linker may take from any unit)."""

    name: str
    binding: str
    kind: str
    defined: bool
    comdat: bool = False


@dataclass(frozen=True)
class ObjectShape:
    """What the checks compare of one object: its header, its sections and its global symbols."""

    header: tuple
    sections: dict[str, tuple[object, int]]  # name -> (kind, flags)
    symbols: dict[str, Symbol]


def refusal(service_code: bytes, clang_code: bytes | ObjectShape, bitcode: Path | None, clang: str) -> str:
    """Why the service's object may not replace clang's object of the same unit ("" when it may): clang's
    object itself, or its shape as baseline_memo.py kept it. `bitcode`: the unit's IR as sent; `clang`:
    optcc's compiler, beside which llvm-nm is looked for."""
    try:
        check(service_code, clang_code, lambda: ir_symbols(bitcode, clang))
    except Untrusted as err:
        return str(err)
    return ""


def check(
    service_code: bytes,
    clang_code: bytes | ObjectShape,
    ir: Callable[[], tuple[set[str], set[str]] | None],
) -> None:
    """Untrusted unless `service_code` may replace `clang_code` (clang's object, or its shape); `ir()`: the
    unit's IR's defined weak symbols and every symbol it names, or None when they cannot be read (called
    only if needed)."""
    try:
        reference = clang_code if isinstance(clang_code, ObjectShape) else shape(clang_code)
    except Untrusted as err:  # clang's own object: nothing to compare against, so nothing is trusted
        raise Untrusted(f"clang's object is unreadable ({err})") from None
    service = shape(service_code)
    if service.header != reference.header:
        raise Untrusted(f"ELF header {service.header} is not clang's {reference.header}")
    _check_sections(service, reference)
    _check_symbols(service, reference, ir)


def shape(data: bytes) -> ObjectShape:
    """The header, sections and global symbols of a relocatable ELF object; Untrusted if it is not one."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        header = elf.header
        if header["e_type"] != "ET_REL" or header["e_phnum"] != 0:
            kind, program_headers = header["e_type"], header["e_phnum"]
            raise Untrusted(f"not a relocatable object ({kind}, {program_headers} program headers)")
        ident = header["e_ident"]
        signature = (elf.elfclass, ident["EI_DATA"], ident["EI_OSABI"], header["e_machine"])
        sections: dict[str, tuple[object, int]] = {}
        comdat_sections: set[int] = set()
        symtab = None
        for section in elf.iter_sections():
            kind, flags = section["sh_type"], section["sh_flags"]
            if kind != "SHT_NOBITS" and section["sh_offset"] + section["sh_size"] > len(data):
                raise Untrusted(f"section {section.name!r} runs past the end of the file")
            sections[section.name] = (kind, flags)
            if kind == "SHT_GROUP":
                comdat_sections.update(_group_members(section))
            elif kind == "SHT_SYMTAB":
                symtab = section
        symbols: dict[str, Symbol] = {}
        for symbol in symtab.iter_symbols() if symtab is not None else ():
            binding = symbol["st_info"]["bind"]
            if binding not in ("STB_GLOBAL", "STB_WEAK") or not symbol.name:
                continue
            where = symbol["st_shndx"]
            symbols[symbol.name] = Symbol(
                symbol.name,
                binding.removeprefix("STB_"),
                symbol["st_info"]["type"].removeprefix("STT_"),
                where != "SHN_UNDEF",
                isinstance(where, int) and where in comdat_sections,
            )
        return ObjectShape(signature, sections, symbols)
    except Untrusted:
        raise
    except (ELFError, ValueError, KeyError, IndexError, AttributeError, TypeError, OSError) as err:
        raise Untrusted(f"not a readable ELF object: {err}") from None
    except Exception as err:  # pyelftools' own parse errors (its construct library) on malformed bytes
        raise Untrusted(f"not a readable ELF object: {type(err).__name__}: {err}") from None


def shape_record(object_shape: ObjectShape) -> dict:
    """`object_shape` as JSON-ready data (`shape_from_record` reads it back)."""
    return {
        "header": list(object_shape.header),
        "sections": {name: [kind, flags] for name, (kind, flags) in object_shape.sections.items()},
        "symbols": [[s.name, s.binding, s.kind, s.defined, s.comdat] for s in object_shape.symbols.values()],
    }


def shape_from_record(record: dict) -> ObjectShape:
    """The ObjectShape `shape_record` wrote; ValueError for data of another form."""
    try:
        sections = {str(name): (kind, int(flags)) for name, (kind, flags) in record["sections"].items()}
        listed = [Symbol(str(n), str(b), str(k), bool(d), bool(c)) for n, b, k, d, c in record["symbols"]]
        symbols = {symbol.name: symbol for symbol in listed}
        return ObjectShape(tuple(record["header"]), sections, symbols)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        raise ValueError(f"not an object shape record: {err!r}") from None


def _group_members(section) -> list[int]:
    """The section indices a SHT_GROUP section lists (after its flags word)."""
    import struct

    data = section.data()
    order = "<" if section.elffile.little_endian else ">"
    return list(struct.unpack_from(f"{order}{len(data) // 4}I", data))[1:]


def _check_sections(service: ObjectShape, reference: ObjectShape) -> None:
    for name, (kind, flags) in service.sections.items():
        known = kind in SECTION_KINDS or (isinstance(kind, int) and kind in LLVM_KINDS)
        if not known and kind not in {k for k, _ in reference.sections.values()}:
            raise Untrusted(f"section {name!r} is of kind {kind}, which an object file does not carry")
        if flags & SHF_WRITE and flags & SHF_EXECINSTR:
            raise Untrusted(f"section {name!r} is both writable and executable")
        code_section = name == ".text" or name.startswith(".text.")
        if flags & SHF_EXECINSTR and not code_section and name not in reference.sections:
            raise Untrusted(f"executable section {name!r} is not a code section clang's object has")
        startup = STARTUP.fullmatch(name.removeprefix(".rela").removeprefix(".rel"))
        if startup and name not in reference.sections:
            raise Untrusted(f"section {name!r} runs code at load or exit, and clang's object has none such")
    stack = ".note.GNU-stack"
    if stack in reference.sections:
        if stack not in service.sections:
            raise Untrusted(f"it lacks {stack} (the program's stack would be executable)")
        if service.sections[stack][1] & SHF_EXECINSTR and not reference.sections[stack][1] & SHF_EXECINSTR:
            raise Untrusted(f"its {stack} asks for an executable stack")


def _check_symbols(
    service: ObjectShape, reference: ObjectShape, ir: Callable[[], tuple[set[str], set[str]] | None]
) -> None:
    def defined(shape: ObjectShape, binding: str) -> dict[str, str]:
        return {s.name: s.kind for s in shape.symbols.values() if s.defined and s.binding == binding}

    strong, clang_strong = defined(service, "GLOBAL"), defined(reference, "GLOBAL")
    if strong != clang_strong:
        raise Untrusted(_difference("global symbols", strong, clang_strong))
    weak, clang_weak = defined(service, "WEAK"), defined(reference, "WEAK")
    for name, kind in clang_weak.items():
        if name not in weak and not reference.symbols[name].comdat:
            raise Untrusted(f"it lacks the weak symbol {name} ({kind}) clang's object defines")
        if name in weak and weak[name] != kind:
            raise Untrusted(f"weak symbol {name} is {weak[name]}, {kind} in clang's object")
    clang_undefined = {s.name for s in reference.symbols.values() if not s.defined}
    undefined = {s.name for s in service.symbols.values() if not s.defined}
    extra_weak = set(weak) - set(clang_weak)
    extra_undefined = {
        name
        for name in undefined - clang_undefined
        if not (name in RUNTIME or RUNTIME_PATTERN.fullmatch(name))
    }
    if not extra_weak and not extra_undefined:
        return
    unit = ir()
    if unit is None:
        extra = sorted(extra_weak | extra_undefined)
        names = ", ".join(extra[:5])
        raise Untrusted(f"symbols {names} are not clang's, and the unit's IR could not be read")
    ir_weak, ir_names = unit
    if extra_weak - ir_weak:
        raise Untrusted(f"weak symbols {', '.join(sorted(extra_weak - ir_weak)[:5])} are not the unit's")
    if extra_undefined - ir_names:
        names = ", ".join(sorted(extra_undefined - ir_names)[:5])
        raise Untrusted(f"it calls or uses {names}, which neither the unit nor clang's object does")


def _difference(what: str, service: dict[str, str], clang: dict[str, str]) -> str:
    extra = sorted(set(service) - set(clang))
    missing = sorted(set(clang) - set(service))
    changed = sorted(name for name in set(service) & set(clang) if service[name] != clang[name])
    parts = []
    if extra:
        parts.append(f"defines {', '.join(extra[:5])} that clang's object does not")
    if missing:
        parts.append(f"lacks {', '.join(missing[:5])}")
    if changed:
        parts.append(", ".join(f"{n} is {service[n]}, {clang[n]} in clang's" for n in changed[:5]))
    return f"its {what} are not clang's: " + "; ".join(parts)


def ir_symbols(bitcode: Path | None, clang: str) -> tuple[set[str], set[str]] | None:
    """The unit's IR's weak (or linkonce) definitions and every non-local symbol it names, by `llvm-nm` on
    its bitcode; None without the bitcode or an llvm-nm."""
    nm = llvm_nm(clang)
    if bitcode is None or nm is None:
        return None
    try:
        done = subprocess.run(
            [nm, "--no-sort", str(bitcode)], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    weak: set[str] = set()
    names: set[str] = set()
    for line in done.stdout.decode(errors="replace").splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        letter, name = fields[-2], fields[-1]
        if letter.islower() and letter not in "vw":  # local (internal, private): not a global symbol
            continue
        names.add(name)
        if letter in "WV":
            weak.add(name)
    return weak, names


def llvm_nm(clang: str) -> str | None:
    """The llvm-nm of optcc's clang: beside the clang binary (its real path), else llvm-nm-<version> for a
    clang-<version>, else llvm-nm on PATH."""
    found = _which(clang)
    candidates = []
    if found:
        candidates.append(os.path.join(os.path.dirname(os.path.realpath(found)), "llvm-nm"))
    version = re.search(r"-(\d+)$", os.path.basename(clang))
    if version:
        candidates.append(f"llvm-nm-{version.group(1)}")
    candidates.append("llvm-nm")
    for candidate in candidates:
        path = _which(candidate)
        if path:
            return path
    return None


def _which(program: str) -> str | None:
    """`program`'s path as the shell finds it (shutil.which's answer; shutil costs optcc its import)."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) and not os.path.isdir(program) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None
