"""The real-code corpus: Debian source packages built by their own build systems with optcc in capture mode.

For each package: `apt-get source` (a private apt list, nothing under /etc/apt changes), `apt-get build-dep`,
then the package's own Debian build (`debian/rules build-arch`: autotools, cmake, meson or plain make, with
Debian's flags and patches) with `cc`, `gcc` and the triplet gcc on PATH pointing at optcc in capture mode
(`clients/capture.py`). The compiler that really builds is clang-19, so each captured unit is exactly what
optcc would send the service for that command. Results per package go to `<out>/status/<package>.json`
(version, licence, build system, units, seconds, or the reason it failed), so a rerun skips finished packages.

Packages the project is evaluated on from outside are refused here and in every split: zlib, lua (any
version), libjpeg (any fork) and the sources of the MiBench programs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from optserve.corpus.sources import SourceError, debian_archive_line

# Debian source package -> kind. Kinds follow the data issue: several packages of each.
PACKAGES: dict[str, str] = {
    # compression
    "bzip2": "compression", "xz-utils": "compression", "lz4": "compression", "zstd": "compression",
    "brotli": "compression", "lzo2": "compression", "libzip": "compression", "lzop": "compression",
    # parsers
    "json-c": "parser", "jansson": "parser", "yajl": "parser", "libyaml": "parser", "expat": "parser",
    "libxml2": "parser", "mxml": "parser", "cjson": "parser", "libinih": "parser", "libconfig": "parser",
    # crypto
    "libsodium": "crypto", "nettle": "crypto", "libb2": "crypto", "libtomcrypt": "crypto", "argon2": "crypto",
    "libmd": "crypto", "libtasn1-6": "crypto",
    # networking
    "c-ares": "network", "libevent": "network", "libuv1": "network", "nghttp2": "network",
    "libmicrohttpd": "network", "libidn2": "network",
    # databases
    "sqlite3": "database", "lmdb": "database", "tdb": "database", "gdbm": "database",
    # image and audio codecs
    "libpng1.6": "codec", "giflib": "codec", "libwebp": "codec", "libogg": "codec", "libvorbis": "codec",
    "flac": "codec", "opus": "codec", "speex": "codec", "wavpack": "codec", "libsndfile": "codec",
    "libtheora": "codec",
    # interpreters
    "jimtcl": "interpreter", "mujs": "interpreter", "duktape": "interpreter", "bc": "interpreter",
    "gawk": "interpreter",
    # shell and text tools
    "dash": "tool", "sed": "tool", "grep": "tool", "less": "tool", "diffutils": "tool", "indent": "tool",
    "cpio": "tool", "gzip": "tool",
    # math and numerics
    "libtommath": "math", "gsl": "math", "mpfr4": "math", "glpk": "math", "libdivsufsort": "math",
    "nlopt": "math",
    # general-purpose libraries
    "pcre2": "library", "libonig": "library", "popt": "library", "libffi": "library", "libcbor": "library",
    "msgpack-c": "library", "libbsd": "library", "libunistring": "library",
}  # fmt: skip

# Evaluation code, kept out of every split: zlib, lua, libjpeg and the MiBench programs' sources
# (lame, libmad, libtiff's tiff tools, ghostscript, ispell, lout, gsm, pgp, rsynth).
EXCLUDED = re.compile(
    r"^(zlib|lua.*|.*jpeg.*|mibench.*|lame|libmad|tiff|ghostscript|ispell|lout|libgsm|gsm|pgp.*|rsynth)$"
)
_CLANG_DEFAULT_ERRORS = (
    "implicit-function-declaration", "implicit-int", "int-conversion", "incompatible-pointer-types",
    "incompatible-function-pointer-types", "return-type",
)  # fmt: skip
GCC_LENIENCE = " ".join(["-Wno-error", *(f"-Wno-error={warning}" for warning in _CLANG_DEFAULT_ERRORS)])
GCC_QUERIES = 'case " $* " in *" -print-multi"*) exec /usr/bin/gcc "$@";; esac'  # the shims shadow gcc
CAPTURED_NAMES = ("cc", "gcc", "x86_64-linux-gnu-gcc", "gcc-12", "x86_64-linux-gnu-gcc-12")


class ExcludedPackage(ValueError):
    """A package the project is evaluated on; it must never enter the corpus."""


def check_allowed(package: str) -> None:
    if EXCLUDED.match(package):
        raise ExcludedPackage(f"{package} is evaluation code (zlib, lua, libjpeg, MiBench) and stays out")


@dataclass
class PackageStatus:
    package: str
    kind: str
    ok: bool = False
    version: str = ""
    licence: str = ""
    build_system: str = ""
    units: int = 0  # captured (distinct bitcode files of this package)
    failed_units: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class CaptureLayout:
    root: Path

    @property
    def sources(self) -> Path:
        return self.root / "sources"

    @property
    def apt(self) -> Path:
        return self.root / "apt"

    def capture_dir(self, package: str) -> Path:
        return self.root / "capture" / package

    def status_file(self, package: str) -> Path:
        return self.root / "status" / f"{package}.json"

    def log_file(self, package: str) -> Path:
        return self.root / "logs" / f"{package}.log"

    def statuses(self) -> list[PackageStatus]:
        return [
            PackageStatus(**json.loads(p.read_text())) for p in sorted((self.root / "status").glob("*.json"))
        ]


def _apt_options(layout: CaptureLayout) -> list[str]:
    return [
        "-o", f"Dir::Etc::SourceList={layout.apt / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/nonexistent",
        "-o", f"Dir::State::Lists={layout.apt / 'lists'}",
    ]  # fmt: skip


def prepare_apt(layout: CaptureLayout, mirror: str | None = None) -> None:
    """A private apt list with the system's archive as both `deb` and `deb-src` (build-dep needs both)."""
    (layout.apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    source_line = debian_archive_line(mirror)
    (layout.apt / "sources.list").write_text(f"{source_line.replace('deb-src', 'deb', 1)}\n{source_line}\n")
    _checked(["apt-get", *_apt_options(layout), "update", "-q"], timeout=600)


def _checked(command: list[str], cwd: Path | None = None, timeout: float = 1800, env=None, log=None) -> str:
    proc = subprocess.run(
        command,
        cwd=cwd,
        capture_output=log is None,
        stdout=log,
        stderr=log,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-1500:] if log is None else "see the package's log"
        raise SourceError(f"{' '.join(command[:4])}... failed ({proc.returncode}): {tail}")
    return proc.stdout or ""


def snapshot_optcc(layout: CaptureLayout) -> Path:
    """A copy of optcc (`optserve.clients`), made once per corpus, so that every package is captured by the
    same optcc even when the working tree changes during a long capture (delete it to use a newer optcc).
    """
    import optserve
    import optserve.clients

    snapshot = layout.root / "optcc-snapshot"
    if not (snapshot / "optserve" / "clients" / "optcc.py").exists():
        staging = snapshot.with_name(snapshot.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "optserve").mkdir(parents=True)
        shutil.copy(optserve.__file__, staging / "optserve" / "__init__.py")
        shutil.copytree(
            Path(optserve.clients.__file__).parent, staging / "optserve" / "clients",
            ignore=shutil.ignore_patterns("__pycache__"),
        )  # fmt: skip
        shutil.rmtree(snapshot, ignore_errors=True)
        staging.rename(snapshot)
    return snapshot


def _shim_dir(layout: CaptureLayout) -> Path:
    """Directory with cc/gcc/... scripts that run the snapshot of optcc (capture mode) with this Python.

    `GCC_LENIENCE` last: packages tuned for gcc turn warnings into errors that clang-19 warns about more
    often (e.g. -Wstrict-prototypes), and clang makes some old-C diagnostics errors by default that gcc 12
    only warns about; neither changes the unit. gcc's own queries (`-print-multi-os-directory`) go to gcc.
    """
    shims = layout.root / "shims"
    shims.mkdir(parents=True, exist_ok=True)
    snapshot = snapshot_optcc(layout)
    for name in CAPTURED_NAMES:
        script = shims / name
        command = (
            f'PYTHONPATH="{snapshot}" exec "{sys.executable}" -m optserve.clients.optcc "$@" {GCC_LENIENCE}'
        )
        script.write_text(f"#!/bin/sh\n{GCC_QUERIES}\n{command}\n")
        script.chmod(0o755)
    return shims


def _licence(source_dir: Path) -> str:
    """The first `License:` of debian/copyright (machine-readable format), or 'see debian/copyright'."""
    copyright_file = source_dir / "debian" / "copyright"
    if copyright_file.exists():
        for line in copyright_file.read_text(errors="replace").splitlines():
            if line.startswith("License:"):
                return line.split(":", 1)[1].strip()
    return "see debian/copyright"


def _build_system(source_dir: Path) -> str:
    if (source_dir / "meson.build").exists():
        return "meson"
    if (source_dir / "CMakeLists.txt").exists():
        return "cmake"
    if (source_dir / "configure.ac").exists() or (source_dir / "configure").exists():
        return "autotools"
    return "make"


def fetch_source(layout: CaptureLayout, package: str) -> Path:
    """`apt-get source PACKAGE` under sources/ (once); returns the unpacked source directory."""
    target = layout.sources / package
    done = target / ".fetched"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        _checked(["apt-get", *_apt_options(layout), "source", "-q", package], cwd=target, timeout=900)
        done.touch()
    dirs = [p for p in target.iterdir() if p.is_dir() and (p / "debian").is_dir()]
    if len(dirs) != 1:
        raise SourceError(f"apt-get source {package} left {len(dirs)} source directories")
    return dirs[0]


def build_and_capture(
    layout: CaptureLayout, package: str, jobs: int = 2, timeout_s: float = 1800
) -> PackageStatus:
    check_allowed(package)
    status = PackageStatus(package=package, kind=PACKAGES.get(package, "other"))
    started = time.monotonic()
    log_path = layout.log_file(package)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        source_dir = fetch_source(layout, package)
        status.version = source_dir.name.split("-", 1)[-1] if "-" in source_dir.name else ""
        dsc = sorted((layout.sources / package).glob("*.dsc"))
        if dsc:
            status.version = dsc[-1].stem.split("_", 1)[1]
        status.licence = _licence(source_dir)
        status.build_system = _build_system(source_dir)
        with log_path.open("w") as log:
            apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            _checked(
                ["apt-get", *_apt_options(layout), "build-dep", "-y", "-q", package],
                timeout=1200,
                env=apt_env,
                log=log,
            )
            capture = layout.capture_dir(package)
            shutil.rmtree(capture, ignore_errors=True)
            env = {
                **os.environ,
                "PATH": f"{_shim_dir(layout)}:{os.environ['PATH']}",
                "CC": "cc",
                "OPTCC_CAPTURE": str(capture),
                "OPTCC_CAPTURE_TAG": package,
                "DEB_BUILD_OPTIONS": f"nocheck nodoc parallel={jobs}",
            }
            subprocess.run(
                ["fakeroot", "debian/rules", "clean"], cwd=source_dir, env=env, stdout=log, stderr=log
            )
            _checked(["debian/rules", "build-arch"], cwd=source_dir, timeout=timeout_s, env=env, log=log)
        index = capture / "captured.jsonl"
        records = [json.loads(line) for line in index.read_text().splitlines()] if index.exists() else []
        status.units = len({r["sha256"] for r in records if r.get("sha256")})
        status.failed_units = sum(1 for r in records if not r.get("sha256"))
        status.ok = status.units > 0
        if not status.ok:
            status.error = "the build compiled no C unit through the compiler on PATH"
    except (SourceError, subprocess.TimeoutExpired, OSError) as err:
        status.error = str(err)[-1500:]
    status.seconds = round(time.monotonic() - started, 1)
    path = layout.status_file(package)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(status), indent=1) + "\n")
    return status


def capture_packages(
    layout: CaptureLayout, packages: list[str], jobs: int = 2, retry_failed: bool = False
) -> None:
    from tqdm import tqdm

    for package in packages:
        check_allowed(package)
    if not (layout.apt / "lists").exists():
        prepare_apt(layout)
    todo = []
    for package in packages:
        path = layout.status_file(package)
        if path.exists():
            previous = json.loads(path.read_text())
            if previous["ok"] or not retry_failed:
                continue
        todo.append(package)
    bar = tqdm(todo, desc="packages", unit="pkg")
    for package in bar:
        bar.set_postfix_str(package)
        status = build_and_capture(layout, package, jobs=jobs)
        outcome = f"{status.units} units" if status.ok else f"FAILED: {status.error[:200]}"
        tqdm.write(f"{package}: {outcome} ({status.seconds:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/real"))
    parser.add_argument("--packages", nargs="*", default=list(PACKAGES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--retry-failed", action="store_true")
    args = parser.parse_args(argv)
    capture_packages(
        CaptureLayout(args.out.resolve()), args.packages, jobs=args.jobs, retry_failed=args.retry_failed
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
