"""Live sessions: what N conversations kept in one process cost, beside the floor.

```sh
python bench/live_sessions.py                     # N = 1000 and 10000, 3 rounds
python bench/live_sessions.py --n 1000 --rounds 1 # quick look
python bench/live_sessions.py --baseline ../old/src # also an older checkout's src/, interleaved
```

The scenario is the peer harness's (`bench/peers/scale.py`): N conversations
gathered at once on one asyncio loop, each one S1 turn (one read-only tool
round) on a fresh `Session`, every session kept afterwards. Each figure comes
from its own child process, floor and mainspring interleaved round by round:

- RSS KiB/conv: VmRSS growth over the gather (all N kept), as `scale.py`
  reports it; RSS never shrinks, so this is the peak of the N runs in flight;
- traced KiB/conv: what tracemalloc sees still allocated once every run ended
  and a collection ran (the Python objects N idle sessions hold), and its
  peak while all N were in flight (a separate child: tracing slows it down);
- tracked/conv: objects the cyclic GC has to walk per kept session;
- CPU us/conv: process time of the gather (cyclic GC included: more live
  objects make each full collection longer, which is what bends the time per
  conversation upward from 1k to 10k).

Figures are printed with the spread over rounds and as ratios to the floor of
the same round. Run by hand; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"


def _vmrss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _measure(framework: str, n: int, traced: bool) -> dict[str, float]:
    sys.path.insert(0, str(PEERS))
    scale: Any = importlib.import_module("scale")
    one = scale.make(framework)
    for _ in range(20):
        await one()
    gc.collect()
    if traced:
        tracemalloc.start()
    objects0, rss0 = len(gc.get_objects()), _vmrss_kib()
    cpu0 = time.process_time()
    kept = await asyncio.gather(*(one() for _ in range(n)))
    cpu1 = time.process_time()
    gc.collect()
    out = {"cpu_us": (cpu1 - cpu0) * 1e6 / n, "rss_kib": (_vmrss_kib() - rss0) / n}
    out["tracked"] = (len(gc.get_objects()) - objects0) / n
    if traced:
        current, peak = tracemalloc.get_traced_memory()
        out["traced_kib"], out["traced_peak_kib"] = current / 1024 / n, peak / 1024 / n
    assert len(kept) == n
    return out


def _child(framework: str, n: int, traced: bool, src: str | None = None) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:  # that checkout's package first on the path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, __file__, "--child", framework, str(n), "1" if traced else "0"],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float]) -> str:
    mid = statistics.median(values)
    return f"{mid:8.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    """Run the rounds and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="an older checkout's src/ directory, measured too")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        framework, n, traced = a.child
        print(json.dumps(asyncio.run(_measure(framework, int(n), traced == "1"))))
        return
    print(f"load average at start: {os.getloadavg()}")
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    runs = [("floor", "floor", None), ("mainspring", "mainspring", None)]
    if a.baseline:
        runs.insert(1, ("baseline", "mainspring", a.baseline))
    for _ in range(a.rounds):
        for n in a.n:
            for label, framework, src in runs:
                plain = _child(framework, n, traced=False, src=src)
                traced = _child(framework, n, traced=True, src=src)
                rows.setdefault((label, n), []).append(
                    {**plain, "traced_kib": traced["traced_kib"], "peak": traced["traced_peak_kib"]}
                )
    print(f"load average at end: {os.getloadavg()}")
    keys = ("rss_kib", "traced_kib", "peak", "tracked", "cpu_us")
    print(f"{'':18s}" + "".join(f"{k:>24s}" for k in keys))
    for (framework, n), measured in rows.items():
        cells = "".join(f"{_spread([r[k] for r in measured]):>24s}" for k in keys)
        print(f"{framework:10s} N={n:<6d}{cells}")
        if framework != "floor":
            floor = rows[("floor", n)]
            pairs = list(zip(measured, floor, strict=True))
            ratios = [f"{statistics.median([m[k] / f[k] for m, f in pairs]):>23.1f}x" for k in keys]
            print(f"{'  vs floor':18s}" + "".join(ratios))


if __name__ == "__main__":
    main()
