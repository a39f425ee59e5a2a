"""optcc trusts nothing it did not choose: an object from the service replaces clang's only if it is the same
unit's object to a linker and a loader (object_trust.py), and optcc reaches a service beyond loopback only
over TLS unless told otherwise, never with its token in plaintext (channel_policy.py).

Objects here are real: clang-19's of a unit, the same bitcode through other passes (opt-19, llc-19) as the
service's would be, and tampered ones (another unit's, a unit edited to call `system` or to run a constructor,
a real object's bytes edited). The end-to-end tests run optcc against a small gRPC service of the test's that
answers those objects; the real service's answers pass the same checks in test_clients_never_larger.py and
are edited on their way to optcc in the last tests here."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import grpc
import pytest

from optserve.clients import channel_policy, elf, object_trust
from tests.clients.clients_helpers import fake_optimize_service
from tests.clients.test_clients_never_larger import C_SOURCES, OPTCC

UNIT = """int total;
__attribute__((weak)) int hook(int x) { return x + 1; }
int work(int n) { for (int i = 0; i < n; i++) total += hook(i * i % 7) ^ (total >> 3); return total; }
"""
# The same definitions, but code that calls what the unit never names: smaller .text than clang's of UNIT.
CALLS_SYSTEM = """int system(const char *);
int total;
__attribute__((weak)) int hook(int x) { return x; }
int work(int n) { return system("id"); }
"""
# The same definitions and a constructor: code that runs when the program loads.
CONSTRUCTOR = UNIT + "static void __attribute__((constructor)) early(void) { total = hook(total); }\n"
CXX_UNIT = """inline int triple(int x) { return x * 3; }
int use(int x) { return triple(x) + 1; }
"""
# The machine's address beyond loopback (eth0 here, tests/reference: 192.0.2.2), found at run time.
ADDRESSES = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
NON_LOOPBACK = next((address for address in ADDRESSES if "." in address), None)


def clang_object(folder: Path, source: str, name: str, cxx: bool = False) -> bytes:
    """`clang-19 -Oz -c NAME` of `source` (written as `name`) in `folder`: its object, byte for byte the
    object optcc's clang makes of a unit of that name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(source)
    out = Path(name).with_suffix(".o")
    compiler = "clang++-19" if cxx else "clang-19"
    subprocess.run([compiler, "-Oz", "-c", name, "-o", str(out)], cwd=folder, check=True)
    return (folder / out).read_bytes()


def bitcode(folder: Path, source: str, name: str, cxx: bool = False) -> Path:
    """The unit's bitcode as optcc sends it (`-Oz -Xclang -disable-llvm-passes -emit-llvm`)."""
    path = folder / name
    path.write_text(source)
    out = path.with_suffix(".bc")
    flags = ["-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm"]
    subprocess.run(["clang++-19" if cxx else "clang-19", *flags, "-c", str(path), "-o", str(out)], check=True)
    return out


def through_passes(unit_bitcode: Path, passes: str) -> bytes:
    """The unit's bitcode through `passes` (opt-19) and llc-19: an object the way the service makes one."""
    optimized = unit_bitcode.with_name(unit_bitcode.stem + "-opt.bc")
    subprocess.run(["opt-19", f"-passes={passes}", str(unit_bitcode), "-o", str(optimized)], check=True)
    out = optimized.with_suffix(".o")
    subprocess.run(["llc-19", "-filetype=obj", str(optimized), "-o", str(out)], check=True)
    return out.read_bytes()


def refusal(service: bytes, clang: bytes, unit_bitcode: Path | None = None) -> str:
    """object_trust's refusal against clang's object, checked to be the one against the record of that
    object that a rebuild uses instead (baseline_memo.py: its shape, through JSON)."""
    direct = object_trust.refusal(service, clang, unit_bitcode, "clang-19")
    try:
        kept = json.loads(json.dumps(object_trust.shape_record(object_trust.shape(clang))))
    except object_trust.Untrusted:
        return direct
    recorded = object_trust.shape_from_record(kept)
    assert recorded == object_trust.shape(clang)
    assert object_trust.refusal(service, recorded, unit_bitcode, "clang-19") == direct
    return direct


def with_section_flags(data: bytes, name: str, flags: int) -> bytes:
    """A 64-bit little-endian ELF object with section `name`'s sh_flags set to `flags` (an edited object)."""
    table, entry_size, count, names_index = struct.unpack_from("<Q10xHHH", data, 0x28)
    names_offset = struct.unpack_from("<Q", data, table + names_index * entry_size + 0x18)[0]
    edited = bytearray(data)
    for index in range(count):
        header = table + index * entry_size
        start = names_offset + struct.unpack_from("<I", data, header)[0]
        if data[start : data.index(b"\0", start)].decode() == name:
            struct.pack_into("<Q", edited, header + 8, flags)
            return bytes(edited)
    raise AssertionError(f"no section {name}")


# The checks, object by object


def test_the_same_units_object_from_other_passes_is_trusted(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    unit = bitcode(tmp_path, UNIT, "unit.c")
    for passes in ("instcombine,simplifycfg", "sroa,loop-mssa(licm),instcombine", "mem2reg"):
        assert refusal(through_passes(unit, passes), clang, unit) == "", passes


def test_an_inline_function_the_service_kept_and_clang_inlined_away_is_the_units(tmp_path):
    """C++: clang -Oz inlines `triple` everywhere and drops its linkonce_odr copy; passes without an inliner
    keep it (a weak definition clang's object lacks), which the unit's IR defines: trusted."""
    clang = clang_object(tmp_path, CXX_UNIT, "unit.cpp", cxx=True)
    unit = bitcode(tmp_path, CXX_UNIT, "unit.cpp", cxx=True)
    service = through_passes(unit, "mem2reg")
    assert "_Z6triplei" not in object_trust.shape(clang).symbols
    assert object_trust.shape(service).symbols["_Z6triplei"].binding == "WEAK"
    assert refusal(service, clang, unit) == ""
    assert "not clang's, and the unit's IR could not be read" in refusal(service, clang, None)


def test_another_units_object_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    other = (C_SOURCES / "recursion.c").read_text()
    why = refusal(clang_object(tmp_path, other, "other.c"), clang, bitcode(tmp_path, UNIT, "unit.c"))
    assert why.startswith("its global symbols are not clang's: defines factorial")
    assert "lacks total, work" in why


def test_an_object_that_calls_what_the_unit_never_names_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    tampered = clang_object(tmp_path, CALLS_SYSTEM, "tampered.c")
    assert elf.text_size(tampered) < elf.text_size(clang)  # it would win on size
    why = refusal(tampered, clang, bitcode(tmp_path, UNIT, "unit.c"))
    assert why == "it calls or uses system, which neither the unit nor clang's object does"


def test_a_call_llvm_itself_makes_is_not_refused(tmp_path):
    """instcombine turns printf("...\\n") into puts, a name the unit's IR does not hold: the object made
    without it (printf) stands for clang's here, so that only LLVM's own calls explain the difference."""
    source = '#include <stdio.h>\nint report(int n) { printf("done\\n"); return n; }\n'
    unit = bitcode(tmp_path, source, "unit.c")
    clang = through_passes(unit, "mem2reg")
    service = through_passes(unit, "instcombine")
    undefined = {s.name for s in object_trust.shape(service).symbols.values() if not s.defined}
    assert "puts" in undefined and "puts" not in object_trust.ir_symbols(unit, "clang-19")[1]
    assert refusal(service, clang, unit) == ""


def test_a_constructor_clangs_object_has_not_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    tampered = clang_object(tmp_path, CONSTRUCTOR, "tampered.c")
    assert refusal(tampered, clang, bitcode(tmp_path, UNIT, "unit.c")) == (
        "section '.init_array' runs code at load or exit, and clang's object has none such"
    )


def test_an_executable_stack_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    edited = with_section_flags(clang, ".note.GNU-stack", elf.SHF_EXECINSTR)
    assert refusal(edited, clang) == "its .note.GNU-stack asks for an executable stack"
    writable_code = with_section_flags(clang, ".text", elf.SHF_EXECINSTR | 0x1 | 0x2)
    assert refusal(writable_code, clang) == "section '.text' is both writable and executable"


def test_a_dropped_weak_definition_is_refused(tmp_path):
    """`hook` is __attribute__((weak)), outside any COMDAT group: a program may need this unit's copy."""
    clang = clang_object(tmp_path, UNIT, "unit.c")
    without = clang_object(tmp_path, UNIT.replace("__attribute__((weak)) ", "static "), "strong.c")
    assert refusal(without, clang) == "it lacks the weak symbol hook (FUNC) clang's object defines"


def test_a_symbol_of_another_kind_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    other = clang_object(
        tmp_path,
        UNIT.replace("int total;", "int total(void) { return 0; }")
        .replace("total +=", "(void)")
        .replace("return total;", "return 0;")
        .replace("^ (total >> 3)", ""),
        "kind.c",
    )
    assert refusal(other, clang) == "its global symbols are not clang's: total is FUNC, OBJECT in clang's"


@pytest.mark.parametrize(
    "mangle, why",
    [
        (lambda data: b"", "not a readable ELF object"),
        (lambda data: b"MZ" + data[2:], "not a readable ELF object"),
        (lambda data: data[: len(data) // 2], "not a readable ELF object"),
        (lambda data: data[:0x28] + struct.pack("<Q", len(data) * 4) + data[0x30:], "not a readable ELF"),
    ],
    ids=["empty", "not ELF", "truncated", "section table past the end"],
)
def test_bytes_that_are_no_object_are_refused(tmp_path, mangle, why):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    assert refusal(mangle(clang), clang).startswith(why)


def test_a_shared_library_is_refused(tmp_path):
    clang = clang_object(tmp_path, UNIT, "unit.c")
    library = tmp_path / "unit.so"
    command = ["clang-19", "-shared", "-fPIC", "-Oz", str(tmp_path / "unit.c"), "-o", str(library)]
    subprocess.run(command, check=True)
    assert refusal(library.read_bytes(), clang).startswith("not a relocatable object (ET_DYN")


# Where optcc may send a unit, and its token


@pytest.mark.parametrize(
    "server, loopback",
    [
        ("localhost:9000", True),
        ("127.0.0.1:9000", True),
        ("127.8.0.2:9000", True),
        ("[::1]:9000", True),
        ("dns:///localhost:9000", True),
        ("ipv4:127.0.0.1:9000", True),
        ("unix:/run/optserve.sock", True),
        ("10.0.0.5:9000", False),
        ("[fd00::2]:9000", False),
        ("optserve.internal:9000", False),
        ("localhost.evil.example:9000", False),
        ("0.0.0.0:9000", False),
    ],
)
def test_loopback_is_decided_on_the_name_given(server, loopback):
    assert channel_policy.is_loopback(server) is loopback


def test_the_channel_plan():
    env = {"OPTSERVE_TOKEN": "secret"}
    assert channel_policy.plan("localhost:9000", env) == channel_policy.ChannelPlan(None, "secret")
    tls = channel_policy.plan("10.0.0.5:9443", env | {"OPTSERVE_CA_CERT": "ca.pem"})
    assert tls == channel_policy.ChannelPlan("ca.pem", "secret")
    with pytest.raises(channel_policy.Refused, match="OPTSERVE_CA_CERT is not set.*OPTCC_INSECURE=1"):
        channel_policy.plan("10.0.0.5:9000", env)
    insecure = channel_policy.plan("10.0.0.5:9000", env | {"OPTCC_INSECURE": "1"})
    assert insecure == channel_policy.ChannelPlan(None, None, token_withheld=True)


# optcc with a service that answers what a test gives it


def run_optcc(folder: Path, source: str, **env: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """optcc -Oz -c unit.c -o unit.o in `folder` (its own TMPDIR: one build of its own); (result, log)."""
    (folder / "unit.c").write_text(source)
    log = folder / "optcc.jsonl"
    log.unlink(missing_ok=True)
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    environment = os.environ | {"TMPDIR": str(tmp), "OPTCC_LOG": str(log), "OPTCC_VERBOSE": "0"} | env
    result = subprocess.run(
        [OPTCC, "-Oz", "-c", "unit.c", "-o", "unit.o"],
        cwd=folder, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result, [json.loads(line) for line in log.read_text().splitlines()]


def answering(object_code: bytes, calls: list):
    """An Optimize that records each call's metadata and answers `object_code` as its best candidate's."""
    from optserve.v1 import optserve_pb2 as pb

    def optimize(request, context):
        calls.append(dict(context.invocation_metadata()))
        best = pb.Candidate(passes=["instcombine"], source=pb.MODEL, cost=elf.text_size(object_code))
        return pb.OptimizeResponse(
            best=best, candidates=[best], object_code=object_code, model_id="test", model_version="1"
        )

    return optimize


def test_a_tampered_answer_keeps_clangs_object_says_why_and_is_counted(tmp_path):
    clang = clang_object(tmp_path / "reference", UNIT, "unit.c")
    tampered = clang_object(tmp_path, CALLS_SYSTEM, "tampered.c")
    calls: list = []
    build = tmp_path / "build"
    build.mkdir()
    with fake_optimize_service(answering(tampered, calls), model="test") as target:
        result, [record] = run_optcc(build, UNIT, OPTCC_SERVER=target)
        assert len(calls) == 1
        assert (build / "unit.o").read_bytes() == clang
        assert "clang's object kept: the service's object failed optcc's checks: it calls or uses system" in (
            result.stderr
        )
        assert record["winner"] == "clang" and record["untrusted"] is True
        assert record["kept_clang_because"].startswith("the service's object failed optcc's checks")
        stats = subprocess.run([OPTCC, "--stats"], capture_output=True, text=True, check=True).stdout
        [counted] = [line.split()[-1] for line in stats.splitlines() if "optcc's object checks" in line]
        assert counted == "1"
        # the object cache kept the object the unit got, clang's: a rebuild reads it without a call
        (build / "unit.o").unlink()
        _, [record] = run_optcc(build, UNIT, OPTCC_SERVER=target)
        assert len(calls) == 1 and record.get("from_cache") and (build / "unit.o").read_bytes() == clang


def test_the_same_answer_untampered_is_used(tmp_path):
    """The control: the unit's own bitcode through other passes, smaller than clang's object, wins."""
    clang = clang_object(tmp_path / "reference", UNIT, "unit.c")
    unit = bitcode(tmp_path, UNIT, "unit.c")
    service = through_passes(unit, "sroa,loop-rotate,instcombine,simplifycfg")
    if elf.text_size(service) >= elf.text_size(clang):
        pytest.skip("these passes made no smaller object than clang's")
    build = tmp_path / "build"
    build.mkdir()
    with fake_optimize_service(answering(service, [])) as target:
        _, [record] = run_optcc(build, UNIT, OPTCC_SERVER=target)
    assert record["winner"] == "service" and record["untrusted"] is False
    assert (build / "unit.o").read_bytes() == service


@pytest.mark.skipif(NON_LOOPBACK is None, reason="no address beyond loopback")
def test_plaintext_beyond_loopback_is_refused_and_the_unit_gets_clangs_object(tmp_path):
    clang = clang_object(tmp_path / "reference", UNIT, "unit.c")
    calls: list = []
    with fake_optimize_service(answering(clang, calls), host="0.0.0.0") as target:
        server = f"{NON_LOOPBACK}:{target.rsplit(':', 1)[1]}"
        result, [record] = run_optcc(tmp_path, UNIT, OPTCC_SERVER=server, OPTSERVE_TOKEN="secret")
    assert calls == []  # not one byte went out
    assert record["outcome"] == "fallback" and "OPTSERVE_CA_CERT is not set" in record["reason"]
    assert "OPTCC_INSECURE=1" in result.stderr and (tmp_path / "unit.o").read_bytes() == clang


@pytest.mark.skipif(NON_LOOPBACK is None, reason="no address beyond loopback")
def test_insecure_opt_in_calls_over_plaintext_without_the_token(tmp_path):
    calls: list = []
    clang = clang_object(tmp_path / "reference", UNIT, "unit.c")

    def optimize(request, context):
        calls.append(dict(context.invocation_metadata()))
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "a token is required")

    with fake_optimize_service(optimize, host="0.0.0.0") as target:
        server = f"{NON_LOOPBACK}:{target.rsplit(':', 1)[1]}"
        env = {"OPTCC_SERVER": server, "OPTSERVE_TOKEN": "secret", "OPTCC_INSECURE": "1"}
        result, [record] = run_optcc(tmp_path, UNIT, **env)
    assert len(calls) == 1 and "authorization" not in calls[0]
    assert channel_policy.TOKEN_WITHHELD in record["reason"]
    assert channel_policy.TOKEN_WITHHELD in result.stderr
    assert (tmp_path / "unit.o").read_bytes() == clang


def test_a_loopback_server_gets_the_token(tmp_path):
    calls: list = []
    clang = clang_object(tmp_path / "reference", UNIT, "unit.c")
    with fake_optimize_service(answering(clang, calls)) as target:
        run_optcc(tmp_path, UNIT, OPTCC_SERVER=target, OPTSERVE_TOKEN="secret")
    assert [call["authorization"] for call in calls] == ["Bearer secret"]


# The real service's answers, edited on the way


def relaying(target: str, edit):
    """An Optimize that asks the real service at `target` and hands optcc its answer with `edit` applied to
    the object."""
    from optserve.v1 import optserve_pb2 as pb

    channel = grpc.insecure_channel(target)
    call = channel.unary_unary(
        "/optserve.v1.PassOrdering/Optimize",
        request_serializer=pb.OptimizeRequest.SerializeToString,
        response_deserializer=pb.OptimizeResponse.FromString,
    )

    def optimize(request, context):
        response = call(request, timeout=60)
        if response.object_code:
            response.object_code = edit(response.object_code)
        return response

    return optimize


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda data: data, None),
        (lambda data: data.replace(b"\0fibonacci\0", b"\0fibonaccj\0"), "its global symbols are not clang's"),
        (lambda data: with_section_flags(data, ".note.GNU-stack", elf.SHF_EXECINSTR), "executable stack"),
    ],
    ids=["as answered", "a symbol renamed", "an executable stack"],
)
def test_a_real_answer_edited_on_the_way_is_refused(optserve_target, tmp_path, edit, why):
    """recursion.c at -Oz: the real service's object is smaller than clang-19's and wins as answered; the
    same answer with a symbol renamed or its stack made executable keeps clang's object."""
    source = (C_SOURCES / "recursion.c").read_text()
    clang = clang_object(tmp_path / "reference", source, "unit.c")
    with fake_optimize_service(relaying(optserve_target, edit)) as target:
        _, [record] = run_optcc(tmp_path, source, OPTCC_SERVER=target)
    if why is None:
        assert record["winner"] == "service" and record["untrusted"] is False
    else:
        assert record["winner"] == "clang" and record["untrusted"] is True
        assert why in record["kept_clang_because"]
        assert (tmp_path / "unit.o").read_bytes() == clang
