"""A private PostgreSQL server for tests: a fresh cluster in a temporary directory, reached only through its
unix socket (no TCP port), stopped and deleted at the end. Running as root, the server runs as the
`postgres` user (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path


def postgres_bin_dir() -> Path | None:
    """The directory of initdb and pg_ctl: $PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


class PostgresServer:
    """initdb + pg_ctl start in a temporary directory; `url(schema)` names a fresh schema of its database."""

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL's server binaries (initdb, pg_ctl) are missing: run `make system-deps`"
            )
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="optserve-pg-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        # fsync off: a test server's durability against power loss is not under test (a killed client is).
        self.options = f"-k {self.root} -c listen_addresses='' -c fsync=off -c max_connections=60"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self.options, "-l", str(self.root / "log"), "-w", "start"
        )

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin_dir / tool), *args], check=True, capture_output=True)

    def url(self, schema: str = "") -> str:
        """A postgresql:// URL over the unix socket; with `schema`, its tables go to that (created) schema."""
        base = f"postgresql://postgres@/postgres?host={self.root}"
        if not schema:
            return base
        import psycopg

        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{schema}"')
        return base + f"&options=-csearch_path%3D{schema}"

    def fresh_url(self) -> str:
        return self.url("t" + uuid.uuid4().hex[:12])

    def restart(self) -> None:
        """Stop the server at once (clients' connections break) and start it again."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self.options, "-l", str(self.root / "log"), "-w", "start"
        )

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
