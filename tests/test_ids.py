"""Session and stream ids: random UUID4s, never repeated across threads or a fork."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from mainspring.state import new_uuid4


def test_each_id_is_a_uuid4_in_its_text_form() -> None:
    for _ in range(300):  # past one draw of random bytes
        text = new_uuid4()
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_no_two_ids_are_the_same_across_draws_and_threads() -> None:
    seen: list[list[str]] = [[] for _ in range(4)]

    def draw(out: list[str]) -> None:
        out.extend(new_uuid4() for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    every = [i for out in seen for i in out]
    assert len(every) == 8_000
    assert len(set(every)) == len(every)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_uuid4()  # the parent has random bytes drawn and not yet used
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, "\n".join(new_uuid4() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split("\n"))
    _, status = os.waitpid(pid, 0)
    assert status == 0
    parent = {new_uuid4() for _ in range(10)}
    assert len(child) == 10
    assert not child & parent
