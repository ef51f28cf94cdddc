"""Fixtures for the postgres backend: stores on a fresh schema of the session's server."""

from __future__ import annotations

import pytest

from mainspring.stores import SessionStore


async def session_stores(request: pytest.FixtureRequest) -> tuple[SessionStore, SessionStore]:
    """Two store objects (two connections) on one database: two workers."""
    url: str = request.getfixturevalue("postgres_url")
    from mainspring.stores.postgres import PostgresSessionStore

    one = await PostgresSessionStore.open(url)
    try:
        two = await PostgresSessionStore.open(url)
    except BaseException:
        await one.aclose()
        raise
    return one, two
