"""A PostgreSQL server of the tests' own (Debian's postgresql package, installed by
.ci/setup-interop): a fresh cluster in a temporary folder on a free loopback port, trust
authentication, stopped when the block ends. As root (CI) the server runs as the `postgres`
user the package creates, since PostgreSQL refuses to run as root."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from conftest import PATIENCE, free_port

USER = "loom"


def _bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL's server is missing: install Debian's `postgresql` package (.ci/setup-interop does)")
    return os.path.dirname(found[-1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Database:
    url: str
    port: int
    name: str
    bin: str

    def psql(self, sql: str) -> list[list[str]]:
        """The rows `sql` answers, each a list of its values as text (psql's unaligned output)."""
        done = subprocess.run(
            [f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", self.name, "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert done.returncode == 0, done.stderr
        return [line.split("\t") for line in done.stdout.splitlines()]


@contextmanager
def database(name: str, setup_sql: str) -> Iterator[Database]:
    """A new cluster with database `name`, made by `setup_sql`."""
    bin = _bin()
    # Not under pytest's tmp folder: its parents are private to root, and the server runs as postgres.
    folder = tempfile.mkdtemp(prefix="loom-pg-")
    os.chmod(folder, 0o755)
    data = os.path.join(folder, "data")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    port = free_port()
    log = open(os.path.join(folder, "server.log"), "wb")
    server = None
    try:
        subprocess.run(_as_server_user([f"{bin}/initdb", "-D", data, "-A", "trust", "-U", USER, "--no-sync"]), check=True, capture_output=True, timeout=120)
        server = subprocess.Popen(
            _as_server_user([f"{bin}/postgres", "-D", data, "-p", str(port), "-k", folder, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]),
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + PATIENCE
        while subprocess.run([f"{bin}/pg_isready", "-h", "127.0.0.1", "-p", str(port), "-q"]).returncode != 0:
            assert server.poll() is None, open(os.path.join(folder, "server.log")).read()
            assert time.monotonic() < deadline, "PostgreSQL did not start"
            time.sleep(0.1)
        admin = Database(url="", port=port, name="postgres", bin=bin)
        admin.psql(f"CREATE DATABASE {name}")
        db = Database(url=f"postgresql://{USER}@127.0.0.1:{port}/{name}", port=port, name=name, bin=bin)
        db.psql(setup_sql)
        yield db
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                server.kill()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
