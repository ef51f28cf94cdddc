"""Signed cross-engine requests: what verifies, and every way a request is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.engine.signing import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SigningKey,
    Verifier,
    public_key_from_text,
    public_key_text,
)
from mainspring.errors import AccessDenied, SignatureRejected

KEY = SigningKey.generate("engine-a")
NOW = 1_900_000_000.0


def verifier(max_skew: float = 300.0) -> Verifier:
    return Verifier({"engine-a": KEY.public_key}, clock=lambda: NOW, max_skew=max_skew)


def reason(v: Verifier, method: str, path: str, body: bytes, headers: dict[str, str]) -> str:
    with pytest.raises(SignatureRejected) as refused:
        v.verify(method, path, body, headers)
    assert isinstance(refused.value, AccessDenied)
    return refused.value.reason


def test_a_signed_request_verifies_once() -> None:
    v = verifier()
    headers = KEY.sign("POST", "/tools/x/call", b"{}", now=NOW)
    assert v.verify("post", "/tools/x/call", b"{}", headers) == "engine-a"
    assert reason(v, "POST", "/tools/x/call", b"{}", headers) == "replayed"


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=63), st.integers(1, 255))
def test_any_change_to_the_body_is_refused(body: bytes, at: int, flip: int) -> None:
    v = verifier()
    headers = KEY.sign("POST", "/p", body, now=NOW)
    changed = bytearray(body or b"\0")
    changed[at % len(changed)] ^= flip
    assert reason(v, "POST", "/p", bytes(changed), headers) == "bad_signature"
    assert v.verify("POST", "/p", body, headers) == "engine-a"  # a forgery burns no nonce


def test_method_path_timestamp_and_nonce_are_all_signed() -> None:
    v = verifier()
    headers = KEY.sign("POST", "/p?a=1", b"x", now=NOW)
    assert reason(v, "GET", "/p?a=1", b"x", headers) == "bad_signature"
    assert reason(v, "POST", "/p?a=2", b"x", headers) == "bad_signature"
    moved = {**headers, TIMESTAMP_HEADER: str(int(NOW) + 1)}
    assert reason(v, "POST", "/p?a=1", b"x", moved) == "bad_signature"
    renonced = {**headers, NONCE_HEADER: "A" * 32}
    assert reason(v, "POST", "/p?a=1", b"x", renonced) == "bad_signature"


def test_unknown_key_stale_and_malformed_are_refused() -> None:
    v = verifier(max_skew=60)
    other = SigningKey.generate("engine-b")
    assert reason(v, "GET", "/", b"", other.sign("GET", "/", b"", now=NOW)) == "unknown_key"
    impostor = SigningKey.generate("engine-a")  # the right id, the wrong key
    assert reason(v, "GET", "/", b"", impostor.sign("GET", "/", b"", now=NOW)) == "bad_signature"
    assert reason(v, "GET", "/", b"", KEY.sign("GET", "/", b"", now=NOW - 61)) == "stale"
    assert reason(v, "GET", "/", b"", KEY.sign("GET", "/", b"", now=NOW + 61)) == "stale"
    good = KEY.sign("GET", "/", b"", now=NOW)
    for header, value in (
        (SIGNATURE_HEADER, "short"),
        (TIMESTAMP_HEADER, "soon"),
        (NONCE_HEADER, "!" * 20),
    ):
        assert reason(v, "GET", "/", b"", {**good, header: value}) == "malformed"
    assert reason(v, "GET", "/", b"", {}) == "malformed"
    assert v.verify("GET", "/", b"", good) == "engine-a"  # none of that burned its nonce


def test_nonces_are_forgotten_once_their_timestamp_is_stale() -> None:
    clock = [NOW]
    v = Verifier({"engine-a": KEY.public_key}, clock=lambda: clock[0], max_skew=10)
    for _ in range(50):
        v.verify("GET", "/", b"", KEY.sign("GET", "/", b"", now=clock[0]))
        clock[0] += 1
    assert v.remembered <= 21


def test_keys_round_trip_as_text_and_bad_text_is_refused() -> None:
    assert public_key_text(public_key_from_text(public_key_text(KEY.public_key))) == (
        public_key_text(KEY.public_key)
    )
    with pytest.raises(ValueError, match="Ed25519"):
        public_key_from_text("not a key")
    with pytest.raises(ValueError, match="key id"):
        SigningKey.generate("has space")
    with pytest.raises(ValueError, match="max_skew"):
        Verifier({}, max_skew=0)


def test_verifiers_sharing_a_store_admit_a_request_once() -> None:
    import anyio

    from mainspring.stores.records import InMemoryRecords

    async def main() -> None:
        shared = InMemoryRecords()
        one = Verifier({"engine-a": KEY.public_key}, clock=lambda: NOW, records=shared)
        two = Verifier({"engine-a": KEY.public_key}, clock=lambda: NOW, records=shared)
        headers = KEY.sign("POST", "/tools/x/call", b"{}", now=NOW)
        assert await one.admit("POST", "/tools/x/call", b"{}", headers) == "engine-a"
        for worker in (two, one):
            with pytest.raises(SignatureRejected) as refused:
                await worker.admit("POST", "/tools/x/call", b"{}", headers)
            assert refused.value.reason == "replayed"
        tampered = {**headers, NONCE_HEADER: "n" * 32}  # refused before any claim
        with pytest.raises(SignatureRejected, match="does not verify"):
            await two.admit("POST", "/tools/x/call", b"{}", tampered)
        assert await shared.owned_records("engine-nonce", "engine-a") == [
            (f"engine-a/{headers[NONCE_HEADER]}", "")
        ]

    anyio.run(main)
