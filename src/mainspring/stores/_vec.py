"""sqlite-vec on a connection that can load it, found at run time.

Python's ``sqlite3`` can load extensions only when CPython was built with
``--enable-loadable-sqlite-extensions``; many builds (Debian's python3.11, macOS
framework builds) are not. :func:`vec_driver` uses the standard library when it
can, else ``pysqlite3`` (the ``pysqlite3-binary`` wheel, a DB-API drop-in with
its own SQLite), and otherwise says what to install.
"""

from __future__ import annotations

import importlib
import sqlite3
from types import ModuleType

from mainspring.errors import ConfigError

__all__ = ["INSTALL", "load_vec", "vec_driver"]

INSTALL = 'pip install "mainspring[vec]"'


def vec_driver() -> ModuleType:
    """A DB-API ``sqlite3`` module whose connections can load sqlite-vec.

    Raises:
        ConfigError: Neither the standard library nor ``pysqlite3`` can, or
            ``sqlite-vec`` is missing; the message says what to install.
    """
    try:
        importlib.import_module("sqlite_vec")
    except ImportError:
        raise ConfigError(f"vector recall in SQLite needs sqlite-vec: {INSTALL}") from None
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        raise ConfigError(
            "vector recall in SQLite needs a sqlite3 that can load extensions, and this"
            f" Python's cannot: {INSTALL} (it brings pysqlite3-binary and sqlite-vec)"
        ) from None


def load_vec(conn: sqlite3.Connection) -> None:
    """Load sqlite-vec into ``conn`` (extension loading is switched off again after)."""
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)
