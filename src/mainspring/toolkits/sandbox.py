"""Where shell commands run: a bubblewrap sandbox, and the environment they get.

:meth:`SandboxPolicy.workspace` mounts the system read-only (``/usr`` and the
usual links to it, a short list of ``/etc`` files), the workspace root
read-write at its own path, a private ``/tmp``, fresh ``/proc`` and ``/dev``,
and nothing else: the host's home, other projects and secrets are not there.
Every namespace is new (the network too, unless ``network=True``), the
process runs in a user namespace with every capability dropped, in a new
session (no terminal injection), and dies with its parent.

A policy that names bubblewrap never falls back to running unsandboxed: a
missing ``bwrap`` or a sandbox that fails to start is a
:class:`SandboxUnavailable` error. :meth:`SandboxPolicy.unsandboxed` is the
explicit opt-out.

The environment is an allowlist (:func:`child_env`): a fixed ``PATH``,
``HOME``, ``LANG``, ``TERM``, ``TMPDIR``, plus the keys and values you
configure; nothing else of the host's environment reaches the child.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mainspring.errors import ConfigError, ToolError

__all__ = ["BASE_PATH", "SandboxPolicy", "SandboxUnavailable", "child_env"]

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The ``PATH`` a command gets."""

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/protocols",
    "/etc/services",
    "/etc/ssl",
)


class SandboxUnavailable(ToolError):
    """The sandbox a policy asks for cannot run; the command was not run at all."""

    def __init__(self, message: str) -> None:
        super().__init__(message, tool="shell")


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxPolicy:
    """How commands are confined."""

    kind: Literal["bubblewrap", "none"]
    writable: tuple[Path, ...] = ()
    """Bound read-write at their own paths (the workspace root first)."""
    read_only: tuple[Path, ...] = ()
    """Bound read-only at their own paths, besides the system directories."""
    network: bool = False
    """Share the host's network; by default the sandbox has only its own loopback."""
    bwrap: str = "bwrap"
    """The bubblewrap binary (a name looked up on ``PATH``, or a path)."""

    @classmethod
    def workspace(
        cls,
        root: str | os.PathLike[str],
        *,
        writable: Sequence[str | os.PathLike[str]] = (),
        read_only: Sequence[str | os.PathLike[str]] = (),
        network: bool = False,
    ) -> SandboxPolicy:
        """Bubblewrap: ``root`` writable, the system read-only, a private ``/tmp``, no network."""
        paths = [Path(os.path.realpath(p)) for p in (root, *writable)]
        ro = tuple(Path(os.path.realpath(p)) for p in read_only)
        for path in (*paths, *ro):
            if not path.exists():
                raise ConfigError(f"sandbox path {str(path)!r} does not exist")
        return cls(kind="bubblewrap", writable=tuple(paths), read_only=ro, network=network)

    @classmethod
    def unsandboxed(cls) -> SandboxPolicy:
        """Run commands on the host, unconfined (explicit; the environment stays limited)."""
        return cls(kind="none")

    def command(self, argv: Sequence[str], *, cwd: Path) -> list[str]:
        """``argv`` wrapped for this policy, to run in ``cwd``."""
        if self.kind == "none":
            return list(argv)
        args = [self._binary(), "--die-with-parent", "--new-session", "--unshare-all"]
        args += ["--unshare-user", "--cap-drop", "ALL"]
        if self.network:
            args.append("--share-net")
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for extra in (*_ETC_FILES, *map(str, self.read_only)):
            if os.path.lexists(extra):
                args += ["--ro-bind", extra, extra]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for rw in self.writable:
            args += ["--bind", str(rw), str(rw)]
        args += ["--chdir", str(cwd), "--"]
        return args + list(argv)

    def _binary(self) -> str:
        found = shutil.which(self.bwrap)
        if found is None:
            raise SandboxUnavailable(
                f"the shell sandbox needs bwrap ({self.bwrap!r} not found; install the "
                "bubblewrap package); commands are never run unsandboxed instead"
            )
        return found

    def check(self, *, timeout: float = 20.0) -> None:
        """Start the sandbox once (``/bin/true`` inside it) and remember that it works.

        Raises:
            SandboxUnavailable: bwrap is missing or the sandbox does not start.
        """
        if self.kind == "none" or self in _CHECKED:
            return
        cwd = self.writable[0] if self.writable else Path("/")
        argv = self.command(["/bin/true"], cwd=cwd)
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, env=child_env(), check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"the shell sandbox did not start: {exc}") from None
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip()[:500] or f"exit {done.returncode}"
            raise SandboxUnavailable(
                f"the shell sandbox did not start ({reason}); commands are never run "
                "unsandboxed instead"
            )
        with _CHECKED_LOCK:
            _CHECKED.add(self)


_CHECKED: set[SandboxPolicy] = set()
_CHECKED_LOCK = threading.Lock()


def child_env(
    keys: Sequence[str] = (),
    values: Mapping[str, str] | None = None,
    *,
    home: str = "/tmp",
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a command: the essentials, ``keys`` copied from ``source``, ``values``.

    ``source`` defaults to the host's environment; only the named keys are read from it.
    """
    host = os.environ if source is None else source
    env = {
        "PATH": BASE_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
    }
    for key in keys:
        if key in host:
            env[key] = host[key]
    env.update(values or {})
    return env
