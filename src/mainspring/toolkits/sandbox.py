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

Every command gets :class:`SandboxLimits` (also unsandboxed): processes,
address space, CPU seconds, open files and file size as resource limits set
in the child before it runs anything, and a bounded ``/tmp`` (a tmpfs of
``tmp_bytes``). A command past a limit fails or is killed by the kernel;
whatever it left running dies with its process group. Linux does not apply
the process limit to root: for a host running as root the count is bounded
by a ``pids`` cgroup where one can be made (:mod:`mainspring.toolkits.cgroup`).

The environment is an allowlist (:func:`child_env`): a fixed ``PATH``,
``HOME``, ``LANG``, ``TERM``, ``TMPDIR``, plus the keys and values you
configure; nothing else of the host's environment reaches the child.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from mainspring.errors import ConfigError, ToolError

__all__ = ["BASE_PATH", "SandboxLimits", "SandboxPolicy", "SandboxUnavailable", "child_env"]

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


_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Resource limits of every command (``None``: that limit is not set).

    Each is a hard limit of each of the command's processes (``setrlimit``),
    except ``tmp_bytes``, the size of the sandbox's in-memory ``/tmp``, and
    ``processes``, which counts the whole command (see
    :func:`mainspring.toolkits.cgroup.process_bound`).
    """

    processes: int | None = 512
    """Processes and threads at once (a fork bomb stops here): a ``pids`` cgroup where
    the host can make one, else ``RLIMIT_NPROC`` above the host user's own count."""
    memory_bytes: int | None = 8 * 1024 * _MiB
    """Address space of each process (``RLIMIT_AS``); an allocation past it fails."""
    cpu_seconds: int | None = 3600
    """CPU time of each process (``RLIMIT_CPU``); past it the kernel kills it."""
    open_files: int | None = 1024
    """Open file descriptors of each process (``RLIMIT_NOFILE``)."""
    file_bytes: int | None = 1024 * _MiB
    """Largest file a process may write (``RLIMIT_FSIZE``), in the workspace or ``/tmp``."""
    core_bytes: int | None = 0
    """Core dumps (``RLIMIT_CORE``): none by default."""
    tmp_bytes: int | None = 512 * _MiB
    """Size of the sandbox's ``/tmp`` (bubblewrap only; a tmpfs in memory)."""

    def __post_init__(self) -> None:
        for item in fields(self):
            name, value = item.name, getattr(self, item.name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"SandboxLimits.{name} must be a non-negative int or None")
        if self.processes == 0 or self.open_files == 0 or self.tmp_bytes == 0:
            raise ConfigError("SandboxLimits: processes, open_files and tmp_bytes must be >= 1")

    @classmethod
    def unlimited(cls) -> SandboxLimits:
        """No limit at all (explicit; the host's own limits still apply)."""
        return cls(
            processes=None,
            memory_bytes=None,
            cpu_seconds=None,
            open_files=None,
            file_bytes=None,
            core_bytes=None,
            tmp_bytes=None,
        )

    def rlimits(self, *, nproc: int | None = None) -> tuple[tuple[int, int], ...]:
        """``(resource, value)`` pairs to set in the child.

        ``RLIMIT_NPROC`` only with ``nproc`` (the kernel counts every task of the
        host's user against it: see :func:`mainspring.toolkits.cgroup.process_bound`).
        """
        table = (
            (resource.RLIMIT_NPROC, nproc),
            (resource.RLIMIT_AS, self.memory_bytes),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_FSIZE, self.file_bytes),
            (resource.RLIMIT_CORE, self.core_bytes),
        )
        return tuple((which, value) for which, value in table if value is not None)

    def preexec(self, *, nproc: int | None = None) -> Callable[[], None]:
        """What the child runs between fork and exec: lower each limit (never raise one).

        Everything is computed here, in the parent; the child only calls
        ``getrlimit``/``setrlimit`` (no imports, no allocation of note).
        """
        pairs = self.rlimits(nproc=nproc)
        get, put = resource.getrlimit, resource.setrlimit

        def apply() -> None:
            for which, value in pairs:
                _soft, hard = get(which)
                cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
                put(which, (cap, cap))

        return apply


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
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """Processes, memory, CPU, open files, file size and ``/tmp`` of every command."""

    @classmethod
    def workspace(
        cls,
        root: str | os.PathLike[str],
        *,
        writable: Sequence[str | os.PathLike[str]] = (),
        read_only: Sequence[str | os.PathLike[str]] = (),
        network: bool = False,
        limits: SandboxLimits | None = None,
    ) -> SandboxPolicy:
        """Bubblewrap: ``root`` writable, the system read-only, a private ``/tmp``, no network.

        ``limits`` defaults to :class:`SandboxLimits()`.
        """
        paths = [Path(os.path.realpath(p)) for p in (root, *writable)]
        ro = tuple(Path(os.path.realpath(p)) for p in read_only)
        for path in (*paths, *ro):
            if not path.exists():
                raise ConfigError(f"sandbox path {str(path)!r} does not exist")
        return cls(
            kind="bubblewrap",
            writable=tuple(paths),
            read_only=ro,
            network=network,
            limits=SandboxLimits() if limits is None else limits,
        )

    @classmethod
    def unsandboxed(cls, *, limits: SandboxLimits | None = None) -> SandboxPolicy:
        """Run commands on the host, unconfined (explicit; the environment stays limited).

        The resource limits still apply (``/tmp``'s size excepted): ``limits``
        defaults to :class:`SandboxLimits()`.
        """
        return cls(kind="none", limits=SandboxLimits() if limits is None else limits)

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
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.limits.tmp_bytes is not None:
            args += ["--size", str(self.limits.tmp_bytes)]
        args += ["--tmpfs", "/tmp"]
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
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=child_env(),
                check=False,
                preexec_fn=self.limits.preexec(),  # (the limits must let the sandbox start)
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
