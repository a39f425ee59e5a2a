"""Where the corpus comes from: fetch Debian source packages, extract test files, generate csmith programs.

Three sources (facts and yields in ../shared/REFERENCE.md, "Offline C/IR corpus sources"):

- the GCC 12 C testsuite (`gcc-12-source`, a binary .deb holding the upstream tarball), GPL-3.0-or-later;
- LLVM 19's `llvm/test/Transforms` .ll files (source package `llvm-toolchain-19`),
  Apache-2.0 WITH LLVM-exception;
- csmith programs for fixed seeds, BSD-2-Clause (csmith and its runtime headers).

No host name lives in this file: the binary package comes from the system's configured apt sources, and the
source package from a private `deb-src` list whose archive URI is read from those same sources (or given with
`--debian-mirror` / $OPTSERVE_DEBIAN_MIRROR). Nothing under /etc/apt is changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

GCC_PACKAGE = "gcc-12-source"
LLVM_PACKAGE = "llvm-toolchain-19"
CSMITH_PACKAGE = "csmith"

# Builder name -> directory inside the GCC tree; one builder per testsuite part so counts stay separate.
GCC_TESTSUITE_DIRS = {
    "gcc-torture": "gcc/testsuite/gcc.c-torture",
    "gcc-dg": "gcc/testsuite/gcc.dg",
    "gcc-common": "gcc/testsuite/c-c++-common",
}
LLVM_TESTS_DIR = "llvm/test/Transforms"
SOURCE_NAMES = (*GCC_TESTSUITE_DIRS, "llvm-transforms", "csmith")

LICENCES = {
    "gcc": "GPL-3.0-or-later",
    "llvm-transforms": "Apache-2.0 WITH LLVM-exception",
    "csmith": "BSD-2-Clause",
}

# Fast csmith settings (REFERENCE.md: 0.023 s per program instead of 0.42 s).
CSMITH_FLAGS = ("--max-funcs", "4", "--max-block-depth", "3", "--max-expr-complexity", "5")
CSMITH_INCLUDE = Path("/usr/include/csmith")


class SourceError(RuntimeError):
    """A source could not be fetched, extracted or generated."""


@dataclass(frozen=True)
class SourceFile:
    """One input file of the corpus; the unit of the train/val/test split."""

    source: str  # builder name, one of SOURCE_NAMES
    package: str  # Debian package and version the file came from
    path: str  # path inside the package (stable across machines; the split hashes it)
    licence: str
    local_path: Path

    @property
    def language(self) -> str:
        return "llvm-ir" if self.local_path.suffix == ".ll" else "c"


@dataclass(frozen=True)
class SourceLayout:
    """Where fetched and extracted sources live under the data directory."""

    data_dir: Path

    @property
    def downloads(self) -> Path:
        return self.data_dir / "downloads"

    @property
    def gcc_root(self) -> Path:
        return self.data_dir / "sources" / "gcc-12"

    @property
    def llvm_root(self) -> Path:
        return self.data_dir / "sources" / "llvm-19"

    @property
    def csmith_root(self) -> Path:
        return self.data_dir / "sources" / "csmith"

    def version_file(self, root: Path) -> Path:
        return root / "PACKAGE_VERSION"


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip())[-2000:]  # csmith reports on stdout
        raise SourceError(f"{' '.join(cmd)} failed ({proc.returncode}): {said}")
    return proc.stdout


def debian_archive_line(mirror: str | None = None) -> str:
    """A `deb-src` line for the Debian archive the system already uses (or `mirror`)."""
    mirror = mirror or os.environ.get("OPTSERVE_DEBIAN_MIRROR")
    codename = _os_codename()
    if mirror:
        return f"deb-src {mirror.rstrip('/')} {codename} main"
    targets = _run(["apt-get", "indextargets", "--format", "$(REPO_URI) $(RELEASE) $(COMPONENT)"])
    for line in targets.splitlines():
        uri, release, component = (line.split() + ["", "", ""])[:3]
        if release == codename and component == "main":
            return f"deb-src {uri.rstrip('/')} {codename} main"
    raise SourceError(f"no apt source for {codename}/main configured; pass --debian-mirror URL")


def _os_codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise SourceError("cannot tell the Debian release from /etc/os-release")


def fetch_gcc(layout: SourceLayout) -> Path:
    """The gcc-12-source .deb in downloads/ (downloaded once with `apt-get download`)."""
    layout.downloads.mkdir(parents=True, exist_ok=True)
    found = sorted(layout.downloads.glob(f"{GCC_PACKAGE}_*.deb"))
    if not found:
        _run(["apt-get", "download", GCC_PACKAGE], cwd=layout.downloads)
        found = sorted(layout.downloads.glob(f"{GCC_PACKAGE}_*.deb"))
    if not found:
        raise SourceError(f"apt-get download {GCC_PACKAGE} left no .deb in {layout.downloads}")
    return found[-1]


def fetch_llvm(layout: SourceLayout, mirror: str | None = None) -> Path:
    """The llvm-toolchain-19 upstream tarball in downloads/ (apt-get source --download-only, once)."""
    layout.downloads.mkdir(parents=True, exist_ok=True)
    found = sorted(layout.downloads.glob(f"{LLVM_PACKAGE}_*.orig.tar.xz"))
    if not found:
        lists = layout.downloads / "apt-src"
        (lists / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (lists / "src.list").write_text(debian_archive_line(mirror) + "\n")
        apt = [
            "-o", f"Dir::Etc::SourceList={lists / 'src.list'}",
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={lists / 'lists'}",
        ]  # fmt: skip
        _run(["apt-get", *apt, "update"])
        _run(["apt-get", *apt, "source", "--download-only", LLVM_PACKAGE], cwd=layout.downloads)
        found = sorted(layout.downloads.glob(f"{LLVM_PACKAGE}_*.orig.tar.xz"))
    if not found:
        raise SourceError(f"apt-get source {LLVM_PACKAGE} left no .orig.tar.xz in {layout.downloads}")
    return found[-1]


def _package_version(archive: Path, package: str) -> str:
    # gcc-12-source_12.2.0-14+deb12u1_all.deb / llvm-toolchain-19_19.1.7-3~deb12u1.dsc
    if archive.suffix == ".deb":
        return archive.name.split("_")[1]
    dsc = sorted(archive.parent.glob(f"{package}_*.dsc"))
    return dsc[-1].stem.split("_", 1)[1] if dsc else archive.name.split("_")[1].removesuffix(".orig.tar.xz")


def _top_dir(tarball: Path) -> str:
    with tarfile.open(tarball) as tar:
        first = tar.next()  # the first member names the top directory; reading it decompresses little
    if first is None:
        raise SourceError(f"{tarball} is empty")
    return first.name.split("/", 1)[0]


def extract_gcc(layout: SourceLayout, deb: Path) -> Path:
    """Extract the three C testsuite directories from the .deb's upstream tarball (once)."""
    root = layout.gcc_root
    marker = layout.version_file(root)
    if marker.exists():
        return root
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _run(["dpkg-deb", "-x", str(deb), str(staging / "deb")])
    tarballs = sorted((staging / "deb" / "usr" / "src" / "gcc-12").glob("gcc-*.tar.xz"))
    if not tarballs:
        raise SourceError(f"{deb.name} holds no gcc-*.tar.xz under usr/src/gcc-12")
    top = _top_dir(tarballs[0])
    members = [f"{top}/{part}" for part in GCC_TESTSUITE_DIRS.values()]
    _run(["tar", "-xJf", str(tarballs[0]), "-C", str(staging), "--strip-components=1", *members])
    shutil.rmtree(staging / "deb")
    layout.version_file(staging).write_text(f"{GCC_PACKAGE} {_package_version(deb, GCC_PACKAGE)}\n")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def extract_llvm(layout: SourceLayout, orig: Path) -> Path:
    """Extract llvm/test/Transforms from the upstream tarball (once)."""
    root = layout.llvm_root
    if layout.version_file(root).exists():
        return root
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    top = _top_dir(orig)
    _run(["tar", "-xJf", str(orig), "-C", str(staging), "--strip-components=1", f"{top}/{LLVM_TESTS_DIR}"])
    layout.version_file(staging).write_text(f"{LLVM_PACKAGE} {_package_version(orig, LLVM_PACKAGE)}\n")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def csmith_version() -> str:
    if shutil.which("csmith") is None:
        raise SourceError("csmith is not installed (Debian: apt-get install csmith libcsmith-dev)")
    out = _run(["dpkg-query", "-W", "-f", "${Version}", CSMITH_PACKAGE])
    return f"{CSMITH_PACKAGE} {out.strip()}"


def generate_csmith(layout: SourceLayout, programs: int, workers: int = 2) -> Path:
    """csmith programs for seeds 1..programs (fixed seeds: the same files on every machine)."""
    root = layout.csmith_root
    root.mkdir(parents=True, exist_ok=True)
    layout.version_file(root).write_text(csmith_version() + "\n")

    def one(seed: int) -> None:
        target = root / f"csmith_{seed:06d}.c"
        if target.exists():
            return
        tmp = target.with_suffix(".c.tmp")
        # Each run in a folder of its own: csmith writes and reads `platform.info` in its working directory,
        # and two runs sharing one read each other's half-written file ("please specify integer size").
        # Relative output name: csmith writes its command line into the program, which stays byte-identical.
        with tempfile.TemporaryDirectory(dir=root, prefix=".csmith-") as work:
            _run(["csmith", "--seed", str(seed), *CSMITH_FLAGS, "-o", tmp.name], cwd=Path(work))
            (Path(work) / tmp.name).rename(target)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(1, programs + 1)))
    return root


def _package_of(root: Path) -> str:
    marker = root / "PACKAGE_VERSION"
    return marker.read_text().strip() if marker.exists() else "unknown"


def list_source_files(layout: SourceLayout, sources: tuple[str, ...] = SOURCE_NAMES) -> Iterator[SourceFile]:
    """Every input file of the chosen sources that has been fetched, in a deterministic order."""
    for name in sources:
        if name in GCC_TESTSUITE_DIRS:
            base, pattern, licence = layout.gcc_root, "*.c", LICENCES["gcc"]
            top = base / GCC_TESTSUITE_DIRS[name]
        elif name == "llvm-transforms":
            base, pattern, licence = layout.llvm_root, "*.ll", LICENCES[name]
            top = base / LLVM_TESTS_DIR
        elif name == "csmith":
            base, pattern, licence = layout.csmith_root, "csmith_*.c", LICENCES[name]
            top = base
        else:
            raise SourceError(f"unknown source {name!r}; known: {', '.join(SOURCE_NAMES)}")
        if not top.is_dir():
            continue
        package = _package_of(base)
        for path in sorted(top.rglob(pattern)):
            yield SourceFile(name, package, path.relative_to(base).as_posix(), licence, path)
