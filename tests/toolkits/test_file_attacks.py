"""Every way out of a workspace, each refused on the handle being opened.

The secret lives next to the root, never inside it; each test tries one
escape through the real tools (and the functions under them) and checks the
secret was neither read nor changed. The swap races flip a path between a
real entry and a symlink out, from another thread, while the tool works.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mainspring.toolkits import MAX_FILE_BYTES, FileWorkspace, WorkspaceError
from mainspring.toolkits.files import (
    apply,
    edit_text,
    list_entries,
    read_text,
    search_files,
    write_text,
)

SECRET = "TOP-SECRET-VALUE\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "inside.txt").write_text("inside\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "file.txt").write_text("sub file\n")
    return folder


@pytest.fixture
def ws(root: Path) -> FileWorkspace:
    return FileWorkspace(root)


def refused(action: Callable[[], object], match: str = "") -> WorkspaceError:
    with pytest.raises(WorkspaceError, match=match) as info:
        action()
    return info.value


# ----------------------------------------------------------------- by name


def test_dot_dot_is_refused(ws: FileWorkspace) -> None:
    refused(lambda: read_text(ws, "../outside/secret.txt"), "'..' is not allowed")
    refused(lambda: read_text(ws, "sub/../../outside/secret.txt"), "'..' is not allowed")


def test_an_absolute_path_outside_the_roots_is_refused(ws: FileWorkspace, outside: Path) -> None:
    refused(lambda: read_text(ws, str(outside / "secret.txt")), "outside the workspace roots")
    refused(lambda: read_text(ws, "/etc/passwd"), "outside the workspace roots")


def test_a_root_prefix_that_is_not_a_path_prefix_is_refused(ws: FileWorkspace, root: Path) -> None:
    sibling = root.parent / (root.name + "-evil")
    sibling.mkdir()
    (sibling / "x.txt").write_text(SECRET)
    refused(lambda: read_text(ws, str(sibling / "x.txt")), "outside the workspace roots")


def test_nul_in_a_path_is_refused(ws: FileWorkspace) -> None:
    refused(lambda: read_text(ws, "inside.txt\x00.png"), "NUL")


# ---------------------------------------------------------------- symlinks


def test_a_symlinked_file_is_refused_for_read_write_and_edit(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    refused(lambda: read_text(ws, "link.txt"), "symbolic link")
    refused(lambda: apply(ws, "link.txt", write_text("pwned\n")), "symbolic link")
    refused(lambda: apply(ws, "link.txt", edit_text("TOP", "pwned")), "symbolic link")
    assert (outside / "secret.txt").read_text() == SECRET
    assert (root / "link.txt").is_symlink()


def test_a_symlinked_directory_is_refused(ws: FileWorkspace, root: Path, outside: Path) -> None:
    (root / "door").symlink_to(outside)
    refused(lambda: read_text(ws, "door/secret.txt"), "symbolic link")
    refused(lambda: list_entries(ws, "door"), "symbolic link")
    refused(lambda: apply(ws, "door/new.txt", write_text("x")), "symbolic")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_symlink_to_a_file_inside_the_root_is_refused_too(ws: FileWorkspace, root: Path) -> None:
    (root / "alias.txt").symlink_to(root / "inside.txt")
    refused(lambda: read_text(ws, "alias.txt"), "symbolic link")


def test_creating_directories_never_goes_through_a_symlink(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    (root / "sub" / "door").symlink_to(outside)
    path = "sub/door/made/new.txt"
    refused(lambda: apply(ws, path, write_text("x")), "symbolic link")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_search_does_not_follow_symlinks(ws: FileWorkspace, root: Path, outside: Path) -> None:
    (root / "door").symlink_to(outside)
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    assert search_files(ws, pattern="SECRET") == "(0 matches)"
    assert search_files(ws, glob="*secret*") == "(0 files)"


def test_a_root_given_through_a_symlink_is_resolved_once(tmp_path: Path, root: Path) -> None:
    via = tmp_path / "via"
    via.symlink_to(root)
    ws = FileWorkspace(via)
    assert ws.roots == (root,)
    assert "inside" in read_text(ws, "inside.txt")


# -------------------------------------------------------------- hard links


def test_a_hardlink_to_an_outside_file_is_refused(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    os.link(outside / "secret.txt", root / "hard.txt")
    refused(lambda: read_text(ws, "hard.txt"), "hard links")
    refused(lambda: apply(ws, "hard.txt", write_text("pwned\n")), "hard links")
    refused(lambda: apply(ws, "hard.txt", edit_text("TOP", "pwned")), "hard links")
    assert (outside / "secret.txt").read_text() == SECRET


# -------------------------------------------------------- special files


def test_a_fifo_is_refused_without_blocking(ws: FileWorkspace, root: Path) -> None:
    os.mkfifo(root / "pipe")
    refused(lambda: read_text(ws, "pipe"), "FIFO")
    refused(lambda: apply(ws, "pipe", write_text("x")), "FIFO")


def test_a_device_is_refused(ws: FileWorkspace, root: Path) -> None:
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    refused(lambda: read_text(ws, "null"), "device")
    refused(lambda: apply(ws, "null", write_text("x")), "device")


def test_a_socket_is_refused(ws: FileWorkspace, root: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        try:
            server.bind(str(root / "sock"))
        except OSError:
            pytest.skip("the temporary path is too long for a unix socket")
        refused(lambda: read_text(ws, "sock"), "not a regular file")


def test_a_directory_is_not_read_as_a_file(ws: FileWorkspace) -> None:
    refused(lambda: read_text(ws, "sub"), "is a directory")
    refused(lambda: read_text(ws, "."), "root is not a file")


# ------------------------------------------------------------------ limits


def test_the_size_limit_counts_the_bytes_actually_read(root: Path) -> None:
    ws = FileWorkspace(root, max_file_bytes=1024)
    (root / "big.txt").write_bytes(b"x" * 1025)
    (root / "ok.txt").write_bytes(b"x" * 1024)
    refused(lambda: read_text(ws, "big.txt"), "over the 1024-byte limit")
    assert "lines 1-1" in read_text(ws, "ok.txt")
    refused(lambda: apply(ws, "new.txt", write_text("y" * 1025)), "1024-byte")
    assert not (root / "new.txt").exists()


def test_the_default_limit_is_ten_mebibytes(ws: FileWorkspace, root: Path) -> None:
    assert MAX_FILE_BYTES == 10 * 1024 * 1024
    (root / "huge.txt").write_bytes(b"a\n" * (MAX_FILE_BYTES // 2 + 1))
    refused(lambda: read_text(ws, "huge.txt"), "over the")
    refused(lambda: apply(ws, "huge.txt", edit_text("a", "b")), "over the")


# ------------------------------------------------------------------- races


@contextlib.contextmanager
def flipping(flip: Callable[[], None]) -> Iterator[None]:
    """Run ``flip`` in a loop on another thread while the block runs.

    A tiny switch interval makes the two threads interleave finely.
    """
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                flip()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        sys.setswitchinterval(interval)


def swapper(path: Path, real: Callable[[], object], link_to: Path) -> Callable[[], None]:
    """Each call turns ``path`` into the other of: a real entry (made by ``real``), a link out."""
    spare = path.with_name(path.name + ".link")
    state = {"link": False}

    def flip() -> None:
        if state["link"]:
            path.unlink()
            real()
        else:
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            spare.symlink_to(link_to)
            os.replace(spare, path)  # the symlink takes the name atomically
        state["link"] = not state["link"]

    return flip


RUNS = 400


def keep_going(runs: int, seen: set[str], until: float) -> bool:
    """At least RUNS attempts, then on until both outcomes were seen (bounded by ``until``)."""
    if runs < RUNS:
        return True
    return not {"read", "refused"} <= seen and time.monotonic() < until


def test_a_file_swapped_for_a_symlink_is_never_read_through(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    target = root / "swap.txt"
    target.write_text("benign\n")
    flip = swapper(target, lambda: target.write_text("benign\n"), outside / "secret.txt")
    seen: set[str] = set()
    runs = 0
    until = time.monotonic() + 60
    with flipping(flip):
        while keep_going(runs, seen, until):
            runs += 1
            try:
                text = read_text(ws, "swap.txt")
            except WorkspaceError as exc:
                assert "symbolic link" in str(exc) or "no such file" in str(exc)
                seen.add("refused" if "symbolic link" in str(exc) else "missing")
                continue
            assert "SECRET" not in text
            seen.add("read")
    assert {"read", "refused"} <= seen, f"the race never happened in {runs} runs: {seen}"


def test_a_directory_swapped_for_a_symlink_is_never_walked_through(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    (outside / "file.txt").write_text(SECRET)
    sub = root / "sub"

    def real() -> None:
        sub.mkdir()
        (sub / "file.txt").write_text("sub file\n")

    def remove() -> None:
        (sub / "file.txt").unlink()
        sub.rmdir()
        real_link()

    def real_link() -> None:
        spare = root / "sub.link"
        with contextlib.suppress(FileNotFoundError):
            spare.unlink()
        spare.symlink_to(outside)
        os.replace(spare, sub)

    state = {"link": False}

    def flip() -> None:
        if state["link"]:
            sub.unlink()
            real()
        else:
            remove()
        state["link"] = not state["link"]

    seen: set[str] = set()
    runs = 0
    until = time.monotonic() + 60
    with flipping(flip):
        while keep_going(runs, seen, until):
            runs += 1
            try:
                text = read_text(ws, "sub/file.txt")
            except WorkspaceError as exc:
                seen.add("refused" if "symbolic link" in str(exc) else "missing")
                continue
            assert "SECRET" not in text
            seen.add("read")
    assert {"read", "refused"} <= seen, f"the race never happened in {runs} runs: {seen}"


def test_a_write_racing_a_symlink_swap_never_lands_outside(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    target = root / "swap.txt"
    target.write_text("benign\n")
    flip = swapper(target, lambda: target.write_text("benign\n"), outside / "secret.txt")
    with flipping(flip):
        for i in range(RUNS):
            with contextlib.suppress(WorkspaceError, FileNotFoundError):
                apply(ws, "swap.txt", write_text(f"write {i}\n"))
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_write_racing_a_directory_swap_never_lands_outside(
    ws: FileWorkspace, root: Path, outside: Path
) -> None:
    sub = root / "sub"
    spare = root / "sub.link"
    state = {"link": False}

    def flip() -> None:
        if state["link"]:
            sub.unlink()
            sub.mkdir()
        else:
            for child in sub.iterdir():
                child.unlink()
            sub.rmdir()
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            spare.symlink_to(outside)
            os.replace(spare, sub)
        state["link"] = not state["link"]

    with flipping(flip):
        for i in range(RUNS):
            with contextlib.suppress(WorkspaceError, OSError):
                apply(ws, "sub/new.txt", write_text(f"w{i}\n"))
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
