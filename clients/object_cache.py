"""optcc's object cache: a rebuild of unchanged sources gets each unit's object without clang or the service.

It works as ccache's direct mode. A unit's *direct key* hashes everything that decides its object and is
known before compiling: the command line and working directory, the compiler (resolved path, size, mtime),
optcc's settings that reach the service (server, objective, IR mode, strategy, samples, budget, deadline), the
service's model (name and content hash), the environment variables clang reads (CPATH, ...), and the source
file's bytes.
The headers the unit includes are known only after a compile: on a miss, optcc's IR step writes them
(`-MD`), and the object is stored under the direct key together with the digest of every header. A later
lookup is a hit when, for one stored header set, every header still has the same bytes. A hit writes the
stored object, dependency file (`-MD`/`-MMD`) and clang's diagnostics, and runs neither clang nor the service.

What is stored follows ccache's rule: an outcome that the key decides is stored, one that depends on
something outside it is not. Stored: every service answer (the object that won the comparison with clang's),
an answer cut by its deadline (record `deadline_hit`), and a *budget cut* (record `budget_cut`, outcome
`fallback`, clang's object): the service was reachable and answered DEADLINE_EXCEEDED itself because its
-Oz did not fit the unit's deadline. The deadline comes from settings the key holds (OPTCC_BUDGET,
OPTCC_BUDGET_MIN, OPTCC_DEADLINE) and the front end's time then, so a rebuild gets what the first build
got, as ccache gives a stored object whatever the load was when it was made. Not stored: a service that
was unreachable, timed out on the client's side, was overloaded or answered another error, a failed IR
step or clang compile (ccache does not store failed compiles either), and any unit whose source or headers
use `__DATE__`/`__TIME__`/`__TIMESTAMP__`: the next build tries again. To ask the service again for stored
units, change a setting in the key (e.g. a larger OPTCC_BUDGET), or set OPTCC_RECACHE=1 (ccache's
CCACHE_RECACHE): lookups are skipped and each unit's new outcome replaces the stored one. OPTCC_CACHE=0 or
an emptied cache asks again too. Every stored object already passed optcc's comparison with clang's (or is
clang's), so a hit keeps the never-larger promise.

The model is looked up at most once per `MODEL_CHECK_S` per cache and server (a gRPC call), and noted from
every service answer; when the service cannot be reached the last model seen stands, so a rebuild during an
outage still gets that model's objects. Layout under OPTCC_CACHE_DIR (default $XDG_CACHE_HOME/optcc, else
~/.cache/optcc): `models/<server>.json`, `manifests/<ab>/<direct key>.json` (header sets -> result key),
`results/<ab>/<result key>/` (object, deps, stderr, record.json).

Eviction, as ccache's max_size: the results together may hold at most OPTCC_CACHE_SIZE bytes (default 5G).
A hit marks its result used (record.json's mtime); a store checks the total at most every TRIM_EVERY_S
seconds per cache (a stamp file, so `make -j` does not scan once per unit) and, when over the limit, removes
the least recently used results until they fill at most TRIM_TO of it. A manifest entry whose result was
removed is a miss, and the entry is dropped at the unit's next store.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import namedtuple
from pathlib import Path

from optserve.clients.command_line import CompileJob
from optserve.clients.files import log_line, write_atomically
from optserve.clients.settings import OptccSettings

CACHE_FORMAT = "optcc-cache-2"  # 2: OPTCC_DEADLINE in the key
MODEL_CHECK_S = 300.0
MANIFEST_ENTRIES = 8  # header sets kept per direct key (a header that changes back and forth)
ENVIRONMENT_INPUTS = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "SOURCE_DATE_EPOCH")
VOLATILE_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")
TRIM_EVERY_S = 30.0  # how often a store may scan the cache's size
TRIM_TO = 0.8  # a trim leaves the results at most this share of the limit (ccache's limit_multiple)
TRIM_STAMP = "trimmed"

# SHA-256 without `hashlib`'s OpenSSL load (~3 ms of every unit's start): the same digests.
try:
    from _sha2 import sha256  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256
    except ImportError:
        from hashlib import sha256


class Hit(namedtuple("Hit", "object_code stderr dependencies record")):
    """A stored result: the object and what clang's compile printed and wrote beside it (`dependencies`:
    the -MD file's bytes or None; `record`: the unit's log record)."""

    __slots__ = ()


class Slot(namedtuple("Slot", "root direct_key model")):
    """Where one unit's object is looked up and stored: the cache directory `root` and the unit's
    `direct_key`; `model`: the service's model the key was made with (`name@version`)."""

    __slots__ = ()

    @property
    def manifest(self) -> Path:
        return self.root / "manifests" / self.direct_key[:2] / f"{self.direct_key}.json"

    def result_dir(self, result_key: str) -> Path:
        return self.root / "results" / result_key[:2] / result_key

    def lookup(self) -> Hit | None:
        """The stored result whose headers all still have the bytes they had, or None."""
        try:
            entries = json.loads(self.manifest.read_bytes())
        except (OSError, ValueError):
            return None
        digests: dict[str, str | None] = {}
        for entry in reversed(entries):
            if all(_digest_memo(path, digests) == digest for path, digest in entry["headers"].items()):
                folder = self.result_dir(entry["result"])
                try:
                    dependencies = folder / "deps"
                    hit = Hit(
                        object_code=(folder / "object").read_bytes(),
                        stderr=(folder / "stderr").read_bytes(),
                        dependencies=dependencies.read_bytes() if dependencies.exists() else None,
                        record=json.loads((folder / "record.json").read_bytes()),
                    )
                    os.utime(folder / "record.json")  # used now: the last to be evicted
                    return hit
                except (OSError, ValueError):  # evicted (or being evicted) meanwhile: a miss
                    return None
        return None

    def store(
        self, source: str, headers: list[str], object_code: bytes, stderr: bytes, dependencies: bytes | None,
        record: dict, replace: bool = False,
    ) -> bool:  # fmt: skip
        """Keep a unit's result under this slot; False when it must not be cached (volatile macros).
        `replace` (OPTCC_RECACHE): a result stored for the same headers gives way to this one."""
        header_digests = {}
        for path in headers:
            data = _read(path)
            if data is None or any(macro in data for macro in VOLATILE_MACROS):
                return False
            header_digests[path] = sha256(data).hexdigest()
        source_bytes = _read(source)
        if source_bytes is None or any(macro in source_bytes for macro in VOLATILE_MACROS):
            return False
        result_key = _hash(self.direct_key, sorted(header_digests.items()))
        folder = self.result_dir(result_key)
        if replace:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
        if not (folder / "record.json").exists():
            staging = folder.with_name(f".{result_key}.{os.getpid()}")
            staging.mkdir(parents=True, exist_ok=True)
            (staging / "object").write_bytes(object_code)
            (staging / "stderr").write_bytes(stderr)
            if dependencies is not None:
                (staging / "deps").write_bytes(dependencies)
            (staging / "record.json").write_text(json.dumps(record))
            try:
                staging.rename(folder)
            except OSError:  # another compile of the same unit stored it first
                import shutil

                shutil.rmtree(staging, ignore_errors=True)
        try:
            entries = json.loads(self.manifest.read_bytes())
        except (OSError, ValueError):
            entries = []
        entries = [e for e in entries if e["result"] != result_key and self.result_dir(e["result"]).exists()]
        entries.append({"headers": header_digests, "result": result_key})
        _write_atomically(self.manifest, json.dumps(entries[-MANIFEST_ENTRIES:]).encode())
        return True


def trim_if_due(root: Path, max_bytes: int) -> int | None:
    """`trim(root, max_bytes)` when no process of this cache did so in the last TRIM_EVERY_S seconds; the
    bytes removed, or None when it was not due (or there is no limit)."""
    if not max_bytes:
        return None
    stamp = root / TRIM_STAMP
    try:
        if time.time() - stamp.stat().st_mtime < TRIM_EVERY_S:
            return None
    except FileNotFoundError:
        pass
    stamp.touch()
    return trim(root, max_bytes)


def trim(root: Path, max_bytes: int) -> int:
    """Remove least recently used results until they take at most TRIM_TO * `max_bytes` (only when they
    take more than `max_bytes`); the bytes removed."""
    results = []  # (last use, bytes, folder)
    for shard in _subdirectories(root / "results"):
        for folder in _subdirectories(shard):
            if folder.name.startswith("."):  # being stored by another compile
                continue
            try:
                used = (folder / "record.json").stat().st_mtime
                size = sum(entry.stat().st_size for entry in os.scandir(folder))
            except OSError:  # removed meanwhile
                continue
            results.append((used, size, folder))
    total = sum(size for _, size, _ in results)
    if total <= max_bytes:
        return 0
    import shutil

    removed = 0
    for _, size, folder in sorted(results, key=lambda r: (r[0], r[2].name)):
        if total - removed <= TRIM_TO * max_bytes:
            break
        shutil.rmtree(folder, ignore_errors=True)
        removed += size
    return removed


def _subdirectories(folder: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(folder) if entry.is_dir()]
    except FileNotFoundError:
        return []


def open_slot(settings: OptccSettings, job: CompileJob, level: str, args: list[str]) -> Slot | None:
    """The unit's slot, or None when there is no cache (OPTCC_CACHE=0), no model known, or no source."""
    if settings.cache_dir is None:
        return None
    root = Path(settings.cache_dir)
    model = known_model(root, settings.server, settings.retry_s)
    compiler = compiler_identity(settings.clang)
    source = _read(job.source)
    if model is None or compiler is None or source is None:
        return None
    inputs = [
        CACHE_FORMAT,
        compiler,
        os.getcwd(),
        level,
        args,
        [settings.server, settings.objective, settings.ir_mode, settings.strategy, settings.samples],
        [
            settings.budget,
            settings.budget_min_s,
            settings.call_overhead_s,
            settings.deadline_s,
            settings.large_unit_bytes,
        ],
        settings.sends_clang_baseline,
        model,
        [os.environ.get(name) for name in ENVIRONMENT_INPUTS],
        sha256(source).hexdigest(),
    ]
    return Slot(root, _hash(*inputs), model)


def compiler_identity(clang: str) -> list | None:
    """The compiler as a key sees it: resolved path, size and mtime (ccache's `compiler_check` mtime);
    None when it is not found."""
    compiler = _which(clang)
    if compiler is None:
        return None
    compiler_stat = os.stat(compiler)
    return [os.path.realpath(compiler), compiler_stat.st_size, compiler_stat.st_mtime_ns]


def known_model(root: Path, server: str, retry_s: float) -> str | None:
    """`name@version` of the model `server` serves, as last seen; asks the service when that is stale
    (unless this build found it unreachable less than `retry_s` ago)."""
    memo = _model_memo(root, server)
    try:
        seen = json.loads(memo.read_bytes())
    except (OSError, ValueError):
        seen = {"model": None, "checked": 0.0}
    if time.time() - seen["checked"] < MODEL_CHECK_S:
        return seen["model"]
    from optserve.clients import build_state

    if build_state.service_unreachable_since(retry_s):
        return seen["model"]
    model = _ask_model(server)
    # Noted even when the service did not answer, so that other units do not ask again meanwhile.
    _write_atomically(memo, json.dumps({"model": model or seen["model"], "checked": time.time()}).encode())
    return model or seen["model"]


def deliver(hit: Hit, job: CompileJob, settings: OptccSettings, seconds: float) -> bool:
    """Write a hit's object (and dependency file) for `job` and replay clang's diagnostics; False if the hit
    lacks the dependency file the command asks for (then the unit is compiled instead)."""
    if job.dependency_file and hit.dependencies is None:
        return False
    write_atomically(Path(job.output), hit.object_code)
    if job.dependency_file:
        write_atomically(Path(job.dependency_file), hit.dependencies)
    sys.stderr.buffer.write(hit.stderr)
    record = {**hit.record, "source": job.source, "output": job.output, "from_cache": True}
    if settings.log_path:
        log_line(settings.log_path, record | {"seconds": round(seconds, 3)})
    from optserve.clients import stats

    stats.count(stats.stats_path(settings.cache_dir, dict(os.environ)), record)
    if settings.verbose:
        winner = hit.record.get("winner", "clang")
        print(f"optcc: {job.source}: from optcc's cache ({winner}'s object)", file=sys.stderr)
    return True


def note_model(root: Path, server: str, model: str) -> None:
    """Remember the model a service answer named (saves the next lookup its gRPC call)."""
    _write_atomically(
        _model_memo(root, server), json.dumps({"model": model, "checked": time.time()}).encode()
    )


def model_identity(name: str, version: str) -> str:
    return f"{name}@{version}"


def parse_dependencies(text: str) -> list[str]:
    """The prerequisites of a make rule as clang's -MD writes it (escaped spaces, line continuations)."""
    joined = text.replace("\\\n", " ").split("\n", 1)[0]  # the first rule: -MP adds one per header
    _, _, prerequisites = joined.partition(": ")
    paths, current, position = [], "", 0
    while position < len(prerequisites):
        char = prerequisites[position]
        if char == "\\" and position + 1 < len(prerequisites) and prerequisites[position + 1] in " #":
            current += prerequisites[position + 1]
            position += 2
            continue
        if char.isspace():
            if current:
                paths.append(current)
            current = ""
        else:
            current += char
        position += 1
    if current:
        paths.append(current)
    return paths


def _ask_model(server: str) -> str | None:
    """The service's model, asked over the channel channel_policy.py allows (none: None, the last seen
    stands); the token only where it may go."""
    from optserve.clients import channel_policy
    from optserve.clients.python.client import NO_RETRY, OptserveClient

    try:
        plan = channel_policy.plan(server, os.environ)
    except channel_policy.Refused:
        return None
    try:
        with OptserveClient(
            server, token=plan.token or "", ca_cert=plan.ca_cert, timeout_s=2.0, retry=NO_RETRY
        ) as client:
            metadata = client.model_metadata()
    except Exception:  # unreachable or erroring: the last model seen stands
        return None
    return model_identity(metadata.name, metadata.version) if metadata.ready else None


def _model_memo(root: Path, server: str) -> Path:
    return root / "models" / f"{sha256(server.encode()).hexdigest()[:16]}.json"


def _digest_memo(path: str, digests: dict[str, str | None]) -> str | None:
    if path not in digests:
        data = _read(path)
        digests[path] = None if data is None else sha256(data).hexdigest()
    return digests[path]


def _which(program: str) -> str | None:
    """`program`'s path as the shell finds it (shutil.which's answer, without importing shutil)."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _hash(*inputs) -> str:
    return sha256(json.dumps(inputs, separators=(",", ":")).encode()).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
