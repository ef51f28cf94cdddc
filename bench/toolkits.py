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
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mainspring.toolkits import Workspace
from mainspring.toolkits.files import read_text, search_files
from mainspring.toolkits.patch import apply_patch_text


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


def run(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    files = 1_000 if args.quick else 10_000
    runs = 3 if args.quick else 5
    for tool in ("cat", "grep", "git"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool}")
    with tempfile.TemporaryDirectory(prefix="mainspring-bench-") as folder:
        root = Path(folder)
        paths = build_tree(root, files)
        ws = Workspace(root)
        size = sum(os.path.getsize(root / p) for p in paths)
        print(f"tree: {files} files, {size / 1e6:.1f} MB; median of {runs} runs")
        print(f"load average: {os.getloadavg()[0]:.2f}")

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
