"""Benchmark the workspace toolkits against the system tools on a 10,000-file tree.

Run by hand from the repository root (it is not a pytest test)::

    python bench/toolkits.py            # full run, about a minute
    python bench/toolkits.py --quick    # 1,000 files, a few seconds

Three figures, each the median of several runs, as a ratio to the system tool
doing the same work on the same tree (lower is better; 1.0x is parity):

- **read**: every file read through ``read_text`` (confined walk, fstat checks,
  decoding, the tool's header) against one ``cat`` over all of them.
- **search**: ``search_files`` for a regular expression over the whole tree
  against ``grep -rn``.
- **patch**: ``apply_patch_text`` of a 100-file patch and its reverse against
  ``git apply`` and ``git apply -R`` of the same change as a unified diff.

The system tools' figures include starting their process, as an agent's shell
call would.

``--engines`` measures the search's regular-expression engine instead, on
the same tree: ``search_files``' walk (``scan``) with Python's ``re`` (the
engine before the change, in process) against RE2 (the engine now), over
ordinary patterns, each side's CPU time (``time.process_time``) and wall
time, median of several runs, RE2/re as a ratio in the same run; and the
fallback without RE2 (``re`` in a child process killed at the deadline).
With ``--instructions`` each engine's scan runs once in its own process
under valgrind's callgrind (after a warm-up scan; a 1,000-file tree), and
the instruction counts between two markers are printed, exact and untouched
by other work on the machine.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mainspring.toolkits import FileWorkspace
from mainspring.toolkits.files import read_text, search_files
from mainspring.toolkits.patch import apply_patch_text
from mainspring.toolkits.patterns import Engine, compile_glob, compile_pattern
from mainspring.toolkits.search import Bounds, scan

ORDINARY = (
    ("literal", r"NEEDLE", False),
    ("word class", r"NEEDLE: \w+", False),
    ("ignore case", r"needle: FIND", True),
    ("alternation", r"def f(?:4242|777)_1[0-9]\(", False),
    ("no match", r"return x \* 7\b.*# line 3", False),
)
"""Patterns an agent writes: (name, pattern, ignore_case); none hits the output bound."""


def build_tree(root: Path, files: int) -> list[str]:
    """``files`` Python-ish files in 100 directories; every 200th mentions NEEDLE."""
    paths: list[str] = []
    for i in range(files):
        rel = f"pkg{i % 100:02d}/mod{i:05d}.py"
        path = root / rel
        path.parent.mkdir(exist_ok=True)
        body = [f"def f{i}_{j}(x):\n    return x * {j}  # line {j}\n" for j in range(20)]
        if i % 200 == 0:
            body.append("# NEEDLE: find me\n")
        path.write_text("".join(body))
        paths.append(rel)
    return paths


def timed(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def patches(root: Path, targets: list[str]) -> tuple[str, str, str]:
    """The forward patch, its reverse (*** Begin Patch) and the forward unified diff."""
    forward, backward = ["*** Begin Patch"], ["*** Begin Patch"]
    unified: list[str] = []
    for rel in targets:
        old = (root / rel).read_text()
        new = old.replace("return x * 7  # line 7", "return x * 70  # line 7")
        name = rel.split("mod")[1].split(".")[0].lstrip("0") or "0"
        hunk = ["@@", f" def f{name}_7(x):", "-    return x * 7  # line 7"]
        hunk += ["+    return x * 70  # line 7", f" def f{name}_8(x):"]
        forward += [f"*** Update File: {rel}", *hunk]
        back = ["@@", hunk[1], "-    return x * 70  # line 7"]
        back += ["+    return x * 7  # line 7", hunk[-1]]
        backward += [f"*** Update File: {rel}", *back]
        unified += difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{rel}",
            tofile=f"b/{rel}",
        )
    forward.append("*** End Patch")
    backward.append("*** End Patch")
    return "\n".join(forward) + "\n", "\n".join(backward) + "\n", "".join(unified)


def engine_scan(ws: FileWorkspace, using: Engine, pattern: str, ignore_case: bool) -> str:
    """One whole-tree search through ``scan`` with ``using``'s compiled matchers."""
    return scan(
        ws,
        regex=compile_pattern(pattern, ignore_case=ignore_case, using=using),
        names=compile_glob("*.py", using=using),
        bounds=Bounds(results=100_000, files=100_000, bytes=1 << 40),
    )


def cpu_and_wall(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median CPU seconds (this process) and wall seconds of ``fn``."""
    cpu, wall = [], []
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def engines(ws: FileWorkspace, runs: int) -> None:
    """The search's engines on ordinary patterns (see ``--engines``)."""
    print(
        f"{'pattern':<12} {'re cpu ms':>10} {'re2 cpu ms':>11} {'ratio':>6}   "
        f"{'re wall':>8} {'re2 wall':>9} {'ratio':>6}   matches"
    )
    for name, pattern, ignore_case in ORDINARY:
        old = engine_scan(ws, "re", pattern, ignore_case)
        new = engine_scan(ws, "re2", pattern, ignore_case)
        assert old == new, (name, old[-200:], new[-200:])
        re_cpu, re_wall = cpu_and_wall(partial(engine_scan, ws, "re", pattern, ignore_case), runs)
        re2_cpu, re2_wall = cpu_and_wall(
            partial(engine_scan, ws, "re2", pattern, ignore_case), runs
        )
        print(
            f"{name:<12} {re_cpu * 1e3:10.1f} {re2_cpu * 1e3:11.1f} {re2_cpu / re_cpu:5.2f}x   "
            f"{re_wall * 1e3:8.1f} {re2_wall * 1e3:9.1f} {re2_wall / re_wall:5.2f}x   "
            f"{old.rsplit('(', 1)[1].split(' ')[0]}"
        )
    pattern = ORDINARY[1][1]
    wall = timed(lambda: search_files(ws, pattern=pattern, glob="*.py", max_results=100_000), runs)
    child = timed(
        lambda: search_files(ws, pattern=pattern, glob="*.py", max_results=100_000, using="re"),
        runs,
    )
    print(
        f"search_files (word class): RE2 in process {wall * 1e3:.1f} ms, "
        f"re in a child process {child * 1e3:.1f} ms wall ({child / wall:.2f}x)"
    )


def counted_child(root: str, using: Engine) -> None:
    """Scan once to warm up, then once between callgrind's markers (``os.getppid``)."""
    ws = FileWorkspace(root)
    for _name, pattern, ignore_case in ORDINARY:
        engine_scan(ws, using, pattern, ignore_case)
    os.getppid()
    for _name, pattern, ignore_case in ORDINARY:
        engine_scan(ws, using, pattern, ignore_case)
    os.getppid()


def count(root: Path, using: Engine) -> int:
    """Instructions of one scan of every ordinary pattern with ``using``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                using,
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=3_600,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        dump = Path(f"{out}.2")  # .1: everything before the first marker
        found = re.search(r"^summary: (\d+)", dump.read_text() if dump.exists() else "", re.M)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{using} failed under valgrind:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def instructions(root: Path, files: int) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    old, new = count(root, "re"), count(root, "re2")
    print(
        f"instructions, {len(ORDINARY)} patterns over {files} files: re {old:,}  "
        f"re2 {new:,}  ({new / old:.2f}x)"
    )


def run(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--engines", action="store_true", help="re against RE2 in search_files")
    parser.add_argument("--instructions", action="store_true", help="with --engines: valgrind")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        counted_child(args.child[1], args.child[0])
        return
    files = 1_000 if args.quick or args.instructions else 10_000
    runs = 3 if args.quick else 5
    for tool in ("cat", "grep", "git"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool}")
    with tempfile.TemporaryDirectory(prefix="mainspring-bench-") as folder:
        root = Path(folder)
        paths = build_tree(root, files)
        ws = FileWorkspace(root)
        size = sum(os.path.getsize(root / p) for p in paths)
        print(f"tree: {files} files, {size / 1e6:.1f} MB; median of {runs} runs")
        print(f"load average: {os.getloadavg()[0]:.2f}")
        if args.instructions:
            instructions(root, files)
            return
        if args.engines:
            engines(ws, runs)
            return

        def read_all() -> None:
            for rel in paths:
                read_text(ws, rel)

        listfile = root.parent / f"{root.name}.list"
        listfile.write_text("\0".join(paths))

        def cat_all() -> None:
            with listfile.open("rb") as names:
                subprocess.run(
                    ["xargs", "-0", "cat"],
                    stdin=names,
                    cwd=root,
                    check=True,
                    stdout=subprocess.DEVNULL,
                    timeout=600,
                )

        ours, theirs = timed(read_all, runs), timed(cat_all, runs)
        print(
            f"read    {ours * 1e3:8.1f} ms  cat     {theirs * 1e3:8.1f} ms  {ours / theirs:5.2f}x"
        )

        found = search_files(ws, pattern=r"NEEDLE: \w+", max_results=100_000)
        assert found.endswith(f"({files // 200} matches)"), found[-80:]
        ours = timed(lambda: search_files(ws, pattern=r"NEEDLE: \w+", max_results=100_000), runs)
        theirs = timed(lambda: run(["grep", "-rnE", r"NEEDLE: \w+", "."], root), runs)
        print(
            f"search  {ours * 1e3:8.1f} ms  grep -r {theirs * 1e3:8.1f} ms  {ours / theirs:5.2f}x"
        )

        targets = paths[:: max(1, files // 100)][:100]
        forward, backward, unified = patches(root, targets)
        diff = root.parent / f"{root.name}.diff"
        diff.write_text(unified)

        def ours_patch() -> None:
            apply_patch_text(ws, forward)
            apply_patch_text(ws, backward)

        def git_patch() -> None:
            run(["git", "apply", str(diff)], root)
            run(["git", "apply", "-R", str(diff)], root)

        before = (root / targets[0]).read_text()
        ours, theirs = timed(ours_patch, runs), timed(git_patch, runs)
        assert (root / targets[0]).read_text() == before
        print(
            f"patch   {ours * 1e3:8.1f} ms  git apply {theirs * 1e3:6.1f} ms  "
            f"{ours / theirs:5.2f}x  ({len(targets)} files, forward and back)"
        )
        listfile.unlink()
        diff.unlink()


if __name__ == "__main__":
    main()
