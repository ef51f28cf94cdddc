"""ArtifactStore on obstore: local directory, memory, and a real S3-compatible server.

The S3 case starts moto's server (``moto[server]``, from PyPI) on a free
loopback port for the test session and talks to it through obstore's S3
client over plain HTTP.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring.errors import ArtifactNotFound, ConfigError, StoreError
from mainspring.stores.artifacts import ArtifactRef, ArtifactStore, agent_namespace

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        pytest.skip('needs moto[server] (pip install -e ".[test]")')
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_bucket(endpoint: str) -> str:
    import boto3  # type: ignore[import-untyped]  # no stubs installed

    name = f"test-{uuid.uuid4().hex[:20]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["local", "memory", "s3"])
async def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ArtifactStore]:
    backend: str = request.param
    if backend == "local":
        yield ArtifactStore.local(tmp_path / "artifacts", max_bytes=1 << 20)
    elif backend == "memory":
        yield ArtifactStore.memory(max_bytes=1 << 20)
    else:
        endpoint: str = request.getfixturevalue("s3_endpoint")
        yield ArtifactStore.s3(
            s3_bucket(endpoint),
            endpoint=endpoint,
            access_key_id="test",
            secret_access_key="test",
            allow_http=True,
            max_bytes=1 << 20,
        )


async def test_put_get_list_delete(artifacts: ArtifactStore) -> None:
    data = b"col1,col2\n" + b"1,2\n" * 1000
    ref = await artifacts.put("agent/helper", data, name="rows.csv", content_type="text/csv")
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.size == len(data)
    assert ref.uri == f"artifact://agent/helper/{ref.sha256}"
    assert await artifacts.get(ref) == data
    assert await artifacts.get(ref.uri) == data
    assert await artifacts.describe(ref.uri) == ref
    assert await artifacts.read(ref, offset=10, length=8) == data[10:18]
    assert await artifacts.read(ref, offset=len(data) + 5) == b""
    again = await artifacts.put("agent/helper", data, name="rows.csv", content_type="text/csv")
    assert again == ref  # content-addressed: stored once
    other = await artifacts.put("agent/helper", b"other")
    assert sorted(r.sha256 for r in await artifacts.list("agent/helper")) == sorted(
        [ref.sha256, other.sha256]
    )
    assert await artifacts.list("agent/somebody-else") == []
    assert await artifacts.delete(ref) is True
    assert await artifacts.delete(ref) is False
    with pytest.raises(ArtifactNotFound, match="no artifact"):
        await artifacts.get(ref)
    assert [r.sha256 for r in await artifacts.list("agent/helper")] == [other.sha256]


async def test_namespaces_are_separate(artifacts: ArtifactStore) -> None:
    ref = await artifacts.put("agent/a", b"secret")
    moved = ArtifactRef(namespace="agent/b", sha256=ref.sha256, size=ref.size)
    with pytest.raises(ArtifactNotFound):
        await artifacts.get(moved)


async def test_size_limit(artifacts: ArtifactStore) -> None:
    with pytest.raises(ConfigError, match="larger than this store's limit"):
        await artifacts.put("ns", b"x" * ((1 << 20) + 1))
    assert await artifacts.list("ns") == []


@pytest.mark.parametrize(
    "namespace",
    ["", "/", "a//b", "../etc", "a/../b", ".", "a/./b", "a b", "a\x00b", "/abs", "x" * 129,
     "/".join(["a"] * 9), 7, None],
)  # fmt: skip
async def test_bad_namespaces_are_config_errors(
    artifacts: ArtifactStore, namespace: object
) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        await artifacts.put(namespace, b"x")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


@pytest.mark.parametrize(
    "uri", ["", "s3://x/y", "artifact://", "artifact://ns/notahash", "artifact://../" + "0" * 64, 3]
)
async def test_bad_uris_are_config_errors(artifacts: ArtifactStore, uri: object) -> None:
    with pytest.raises(ConfigError):
        await artifacts.get(uri)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


async def test_damaged_bytes_are_detected(tmp_path: Path) -> None:
    store = ArtifactStore.local(tmp_path)
    ref = await store.put("ns", b"original")
    (tmp_path / "ns" / ref.sha256).write_bytes(b"tampered")
    with pytest.raises(StoreError, match="damaged"):
        await store.get(ref)


async def test_a_local_store_never_writes_outside_its_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = ArtifactStore.local(root)
    await store.put("agent/x", b"data")
    everything = await anyio.to_thread.run_sync(lambda: list(tmp_path.rglob("*")))
    assert [p for p in everything if root not in p.parents and p != root] == []


def test_agent_namespace_is_always_valid_and_never_shared() -> None:
    assert agent_namespace("helper") == "agent/helper"
    assert agent_namespace("../../etc") == "agent/_2e_2e_2f_2e_2e_2fetc"
    assert agent_namespace("") == "agent/_z"
    names = ("team x", "team/x", "team_x", "team-x", "team_2fx", "team__x", "team.x")
    assert len({agent_namespace(n) for n in names}) == len(names)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=60), st.text(max_size=60))
def test_two_agent_names_share_a_namespace_only_when_they_are_equal(a: str, b: str) -> None:
    assert (agent_namespace(a) == agent_namespace(b)) == (a == b)


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=200))
def test_any_agent_name_gives_a_safe_namespace(name: str) -> None:
    from mainspring.stores.artifacts import check_namespace

    assert check_namespace(agent_namespace(name)).startswith("agent/")


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=100))
def test_any_uri_parses_or_is_a_config_error(uri: str) -> None:
    try:
        namespace, sha = ArtifactRef.parse(uri)
    except ConfigError:
        return
    assert ".." not in namespace.split("/")
    assert len(sha) == 64
