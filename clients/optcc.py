"""optcc and optcc++: drop-in C and C++ compilers (`CC=optcc CXX=optcc++ make`) that let optserve choose each
size-optimized translation unit's passes, and never give an object larger than your own clang's.

The promise: for every unit optcc takes over, the object written has no more `.text` bytes than the one
your clang (OPTCC_CLANG, default clang-19; optcc++: OPTCC_CLANGXX, default clang++-19) writes for the same
command at the same size level. Every other command runs on that clang unchanged, with the same result.

optcc takes over only size builds: one `-c` compile of one C or C++ source whose last -O flag is -Os or -Oz
(the full table of rules is in command_line.py and docs/bench/clients.md; OPTCC_DEFAULT_LEVEL and OPTCC_FORCE
widen it). With the default strategy (OPTCC_STRATEGY=stored, the tuning store's fast path) such a unit
  0. is looked up in its object cache, as below; else
  1. goes through bitcode (step 2, no budget): clang's front end once, then clang's back end on that
     bitcode (clang's own object) while the service is asked for what its tuning store holds for the unit
     (`strategy stored`: the stored lists, one compile, or none when nothing is stored; no model, and no
     -Oz in the service: optcc compares with clang's object itself, `client_compares`) and records the
     unit for `optserve tune`; the smaller object is written (step 5). A unit no tuning has reached yet
     gets clang's object; after `optserve tune`, the lists it found (docs/tuning.md). When optcc holds
     the record of clang's object of this very bitcode (baseline_memo.py: an earlier build made it), the
     service is asked first, told that object's `.text` bytes, and clang's back end runs only if the
     service's object does not beat them and pass the checks of step 5 against the record.
With a model strategy (greedy, priority, ...) the search runs on the build's path, within a budget: it
  0. looks it up in its object cache (object_cache.py, as ccache's direct mode): a unit whose command,
     compiler, settings, service model, source and headers are unchanged gets the object it got before,
     with clang's diagnostics and dependency file, and neither clang nor the service runs; else it
  1. with a budget (OPTCC_BUDGET, on by default) compiles it with your clang first, one process: the
     command itself at its size level (`clang -Oz -c unit.c`), so the object, diagnostics and dependency
     file are clang's. A front end is part of that compile, so a unit whose whole compile took less than
     the front end a service call needs ((OPTCC_BUDGET_MIN + OPTCC_CALL_OVERHEAD) / OPTCC_BUDGET: 0.3 s
     with the defaults) could not be sent (step 3's rule): it keeps clang's object, having cost one clang
     process and optcc's start (most units of a C build; docs/bench/clients.md). Else
  2. compiles the unit to unoptimized bitcode (`-Oz -Xclang -disable-llvm-passes -emit-llvm`, -Os for an
     -Os build): clang's front end, timed. Without a budget (OPTCC_BUDGET=0, every unit sent) step 1 is
     skipped and clang's object is made from this bitcode (`clang -Oz -c unit.bc`: byte for byte the object
     of `clang -Oz -c unit.c`) in the background while steps 3-4 go on; with OPTCC_IR=o0 (the thesis'
     `-O0 -Xclang -disable-O0-optnone -emit-llvm`) or a -MMD dependency file, clang's own compile of the
     source runs beside the IR step and the call instead,
  3. decides whether the unit is worth a service call (by default, OPTCC_BUDGET): the call may take 2
     times the unit's front end (the IR step); less what a call costs beyond its deadline
     (OPTCC_CALL_OVERHEAD, 0.4 s) that is its deadline, and a unit whose deadline would be below
     OPTCC_BUDGET_MIN (0.2 s) keeps clang's object without a call. A unit sent takes clang's compile, its
     front end and the call: about 2.5 times clang's compile (at most 4 times),
  4. asks the service over gRPC, with that deadline, for the best pass list for the objective and the
     object code of that candidate (`return_object`): the service compiles its own -Oz (its baseline)
     beside the model, not the unoptimized input (`skip_input_cost`), and returns its best object; a
     service whose -Oz does not fit the deadline answers DEADLINE_EXCEEDED and the unit keeps clang's
     object. (OPTCC_CLANG_BASELINE=1: told clang's `.text` bytes as `baseline_cost`; the service returns
     an object only if one beats clang's.)
  5. waits for clang's object and writes the smaller of the two by `.text` bytes; a tie keeps clang's.
     With objective instruction_count the service ranks its candidates by IR instructions, but the objects
     are still compared by `.text` bytes: clang's object has no IR to count, and machine code is what the
     promise is about. If clang's object has debug info (`.debug_info`/`.debug_line`) and the service's
     lacks it, clang's is kept; and stores the result in the cache: service answers, clang's object for a
     unit not sent (steps 1 and 3) and when the service answered that the unit's deadline (its budget) ran
     out; never other fallbacks (object_cache.py). Before the service's object is written or stored it
     must pass object_trust.py's checks against clang's object and the unit's bitcode (a relocatable ELF
     with the same defined global symbols, no undefined one beyond the unit's and LLVM's runtime calls,
     no executable stack or load-time code clang's lacks); else clang's object is kept, stderr says why
     and `--stats` counts it.
Warnings, errors, exit status and -MD dependency files are those of your clang's compile. If the service is
down, slow, overloaded or answers an error, the unit gets clang's object and stderr says so once per build:
optcc never breaks a build that clang would build.

`optcc --stats` prints optcc's counters (clients/stats.py: units, service answers, tuning store hits,
bytes saved), `optcc --zero-stats` resets them.

Environment (all optional):
  OPTCC_SERVER     host:port of optserve's gRPC API            (default localhost:9000)
  OPTCC_OBJECTIVE  text_size | instruction_count               (default text_size)
  OPTCC_IR         oz | o0: the unoptimized IR sent (settings.IR_MODES) (default oz)
  OPTCC_STRATEGY   stored | greedy | priority | nucleus | coreset | ranked_coreset (default stored: the
                   tuning store's lists, no model, no budget; the others search on the build's path)
  OPTCC_SAMPLES    model candidates per unit                   (default 1 for stored and greedy, else 10)
  OPTCC_DEADLINE   seconds the service may spend on one unit   (default 10; optcc waits 5 s more)
  OPTCC_BUDGET     the service call's time per unit as a multiple of the unit's front end (the IR step,
                   after clang's own compile): the deadline is that less OPTCC_CALL_OVERHEAD, at most
                   OPTCC_DEADLINE; a unit whose whole clang compile is shorter than the front end that
                   needs is not sent (step 1); 0: OPTCC_DEADLINE for every unit, every unit sent (default 2)
  OPTCC_BUDGET_MIN a unit whose deadline would be shorter is not sent: clang's object (default 0.2 s)
  OPTCC_CALL_OVERHEAD  seconds a call costs beyond its deadline (the service's grace, gRPC, Ray Serve's
                   proxy), taken off the budget (default 0.4)
  OPTCC_CLANG_BASELINE  1: ask the service after clang's compile, telling it clang's .text size (objective
                   text_size, with a budget): a unit then takes clang's whole time plus the call
                   (default 0: asked beside clang's back end; the service's -Oz is its baseline)
  OPTCC_LARGE_UNIT a unit whose bitcode is larger (about the model's context) is sent with strategy coreset,
                   its first 4 lists: no model call per function (default 16K; 0: never)
  OPTCC_RETRY      seconds a build skips a service it found unreachable (default 60)
  OPTCC_DEFAULT_LEVEL  s | z: take over units that have no -O flag, at -Os/-Oz (default: pass them through)
  OPTCC_FORCE      1: take over units at any -O level (-O0..-O3, -Og, -Ofast), at OPTCC_DEFAULT_LEVEL or -Oz
  OPTCC_CLANG      optcc's compiler                            (default clang-19)
  OPTCC_CLANGXX    optcc++'s compiler                          (default clang++-19)
  OPTCC_CACHE      0: no object cache                          (default: on)
  OPTCC_CACHE_DIR  the object cache (object_cache.py): a rebuild of unchanged sources reuses each unit's
                   object, like ccache (default $XDG_CACHE_HOME/optcc, else ~/.cache/optcc)
  OPTCC_RECACHE    1: skip cache lookups; each unit's new outcome replaces the stored one (as ccache's
                   CCACHE_RECACHE; e.g. to ask the service again for units whose budget ran out)
  OPTCC_CACHE_SIZE the cache's size limit, as ccache's max_size: least recently used objects go first
                   (default 5G; 0: no limit)
  OPTCC_BASELINE_DIR  the records of clang's objects (baseline_memo.py: size, sections, symbols, no code),
                   so that a rebuild whose tuned object beats clang's skips clang's back end
                   (default: baselines/ in OPTCC_CACHE_DIR; 0: none)
  OPTCC_LOG        append one JSON line per unit to this file (winner, sizes, passes, model, fallbacks)
  OPTCC_VERBOSE    1: one line per unit on stderr, and every fallback, not just the first
  OPTSERVE_TOKEN   the service's auth token, if it has one
  OPTSERVE_CA_CERT PEM CA certificate: call over TLS (OPTCC_SERVER then names the service's grpc_tls_port).
                   Without it optcc calls only a loopback OPTCC_SERVER (localhost, 127.0.0.0/8, ::1):
                   plaintext elsewhere lets anyone on the path change the objects linked (channel_policy.py)
  OPTCC_INSECURE   1: call a server beyond loopback over plaintext all the same; OPTSERVE_TOKEN is then
                   never sent (default: such a server is refused, and its units get clang's object)
  OPTCC_CAPTURE    DIR: capture mode for corpus building (see capture.py): save the unit's IR exactly as
                   optcc would send it (at -Oz unless the unit asks -Os), whatever the command's -O level,
                   then compile the command unchanged with clang; no service call
  OPTCC_CAPTURE_TAG  a label stored with each captured unit (e.g. the Debian package being built)
  OPTCC_RESIDENT   0: run each command in its own Python process, no resident server (default 1: a per-user
                   server that has imported optcc once forks a child per command; docs/clients.md)
  OPTCC_RESIDENT_IDLE  seconds the resident server waits for a command before it exits (default 600)
  OPTCC_RESIDENT_DIR   its private folder: socket, lock and log (default $XDG_RUNTIME_DIR/optserve, else
                   ~/.cache/optserve/run)
  OPTCC_TAP        0: no bitcode tap (default on: clang's one-step compile also gives the unit's bitcode,
                   one clang process per unit; built once per compiler from LLVM's headers, llvm-19-dev)
  OPTCC_TAP_DIR    where the taps are built (default $XDG_CACHE_HOME/optcc/tap, else ~/.cache/optcc/tap)
`optcc --start-server` starts the resident server (and says where), `optcc --stop-server` stops it.
`optcc --build-tap` builds the bitcode tap now (else the first unit starts its build in the background).
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # before optcc's imports: a unit's log counts them (`before_s`)

import os  # noqa: E402
import sys  # noqa: E402

from optserve.clients.command_line import CompileJob, decide  # noqa: E402
from optserve.clients.settings import IR_MODES, ConfigError, OptccSettings, Policy  # noqa: E402
from optserve.clients.spawn import compiler, hand_over  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """optcc, the C compiler wrapper. Commands it does not compile itself end in an exec of clang."""
    return _finish(_wrap(argv, compiler(cxx=False), cxx=False), argv)


def main_cxx(argv: list[str] | None = None) -> int:
    """optcc++, the C++ compiler wrapper: the same rules, with clang++ as the compiler."""
    return _finish(_wrap(argv, compiler(cxx=True), cxx=True), argv)


def _finish(status: int, argv: list[str] | None) -> int:
    """Exit the optcc process now with `status`, skipping the interpreter's teardown (module cleanup: ~4 ms
    of every unit, docs/bench/clients.md): every file optcc wrote is closed, stdio is flushed here.
    Called with `argv` (from Python, not as the program), it returns the status instead."""
    if argv is not None:
        return status
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status & 0xFF)  # as sys.exit(status) would


def _wrap(argv: list[str] | None, clang: str, cxx: bool) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # ccache's -s and -z, long names only: `clang -s` alone is clang's (an error) and stays so
    if args in (["--stats"], ["--zero-stats"]):
        return _statistics(args[0])
    if args == ["--build-tap"]:
        return _build_tap(clang)
    if args == ["--help"]:  # optcc's own promise and settings first, then clang's options
        print(__doc__, flush=True)
    if os.environ.get("OPTCC_CAPTURE"):
        _capture(args, clang, cxx)
        return hand_over([clang, *args])
    try:
        policy = Policy.from_environment(dict(os.environ))
    except ConfigError as err:  # a wrong setting must not change what gets built
        print(f"optcc: {err}; passing the command to {clang} unchanged", file=sys.stderr)
        return hand_over([clang, *args])
    decision = decide(args, policy.default_level, policy.force, cxx)
    if decision.level is None:
        if decision.job is not None:
            _log_pass_through(clang, decision.job, decision.reason)
        return hand_over([clang, *args])
    job, level = decision.job, decision.level
    try:
        settings = OptccSettings.from_environment(dict(os.environ), clang)
    except ConfigError as err:
        from optserve.clients import takeover

        return hand_over(takeover.fall_back(clang, args, job, level, str(err), None))
    served, slot = _from_cache(settings, job, level, args)
    if served:
        return 0
    from optserve.clients import takeover  # only now: passed-through commands never pay for its imports

    try:
        return takeover.compile_unit(settings, job, level, slot, STARTED)
    except Exception as err:  # a bug in optcc must not break a build either
        return hand_over(takeover.fall_back(clang, args, job, level, f"optcc failed: {err!r}", settings))


def _build_tap(clang: str) -> int:
    """`optcc --build-tap`: build the bitcode tap for `clang` now (a unit otherwise starts its build in the
    background, and units take two clang processes until it is done); say where it is, or why there is
    none."""
    from optserve.clients import bitcode_tap
    from optserve.clients.settings import _tap_dir

    folder = _tap_dir(dict(os.environ))
    if folder is None:
        print("optcc: OPTCC_TAP=0 (or no home folder): no bitcode tap", file=sys.stderr)
        return 1
    plugin, why = bitcode_tap.build(folder, clang)
    if plugin is None:
        print(f"optcc: no bitcode tap for {clang}: {why}", file=sys.stderr)
        return 1
    print(plugin)
    _build_native()
    return 0


def _build_native() -> None:
    """With the tap, the native thin client of the installed optcc (native_client.py), when this process
    is that install's Python client (`optcc-py` beside the `optcc` script): said on stderr, never a
    failure (the scripts then run the Python client)."""
    from optserve.clients import native_client

    folder = native_client.native_folder(os.environ, os.path.dirname(sys.argv[0]))
    if not sys.argv[0].endswith("-py") or folder is None:
        return
    client, why = native_client.build(folder, os.environ.get("OPTCC_CLANG") or "clang-19")
    print(f"optcc: native client {client}" if client else f"optcc: no native client: {why}", file=sys.stderr)


def _statistics(flag: str) -> int:
    from optserve.clients import stats
    from optserve.clients.settings import _cache_dir

    environment = dict(os.environ)
    path = stats.stats_path(_cache_dir(environment), environment)
    if flag == "--zero-stats":
        stats.zero(path)
        print("optcc: statistics zeroed")
    else:
        print(stats.report(stats.read(path), path))
    return 0


def _from_cache(settings: OptccSettings, job: CompileJob, level: str, args: list[str]):
    """(True, slot) when optcc's object cache gave the unit its object, else (False, the unit's cache slot or
    None). No gRPC, clang or takeover import on a hit."""
    started = time.monotonic()
    try:
        from optserve.clients import object_cache

        slot = object_cache.open_slot(settings, job, level, args)
        hit = slot.lookup() if slot is not None and not settings.recache else None
        served = hit is not None and object_cache.deliver(hit, job, settings, time.monotonic() - started)
        return served, slot
    except Exception as err:  # the cache is an optimization: never a reason for a build to fail
        print(f"optcc: object cache skipped: {err!r}", file=sys.stderr)
        return False, None


def _capture(args: list[str], clang: str, cxx: bool) -> None:
    from pathlib import Path

    from optserve.clients.capture import capture_command

    ir_mode = os.environ.get("OPTCC_IR", "oz").strip().lower()
    capture_command(
        Path(os.environ["OPTCC_CAPTURE"]), clang, args, cxx, ir_mode if ir_mode in IR_MODES else "oz"
    )


def _log_pass_through(clang: str, job: CompileJob, reason: str) -> None:
    path = os.environ.get("OPTCC_LOG")
    if path:
        from optserve.clients.files import log_line

        log_line(
            path, {"source": job.source, "output": job.output, "outcome": "passthrough", "reason": reason}
        )
    if os.environ.get("OPTCC_VERBOSE", "") not in ("", "0"):
        print(f"optcc: {job.source}: passed to {clang} unchanged: {reason}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
