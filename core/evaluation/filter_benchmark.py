"""Benchmark of the entity filter against a Python dict and a Tree-RAG breadth-first search.

Run with ``bridge-rag bench-filter``. Every figure is measured in the same run: the filter,
a ``dict[str, list[int]]`` holding the same entity -> abstract-id lists, and the lookup the
filter replaces in Tree-RAG (a breadth-first search over an entity tree, which must visit
every node to find all occurrences of an entity).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from core.native.cuckoo import CuckooFilter

__all__ = ["FilterBenchRow", "format_table", "run_filter_benchmark"]


@dataclass
class FilterBenchRow:
    """Figures for one corpus size (rates are operations per second)."""

    entities: int
    filter_inserts: float
    filter_bulk_inserts: float
    filter_single_lookups: float
    filter_batch_lookups: float
    filter_batch_lookups_scattered: float
    table_bytes_per_entity: float
    fingerprint_bytes_per_entity: float
    total_bytes_per_entity: float
    load_factor: float
    fingerprint_false_positive_rate: float
    wrong_lists: int
    dict_inserts: float
    dict_single_lookups: float
    dict_batch_lookups: float
    dict_bytes_per_entity: float
    bfs_lookups: float


def _rate(n: int, fn: Callable[[], object], repeat: int = 3) -> float:
    """Best-of-``repeat`` operations per second of ``fn``, which performs ``n`` operations."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best if best > 0 else float("inf")


def _make_entities(n: int, rng: random.Random) -> tuple[list[str], list[list[int]]]:
    words = ["north", "river", "saint", "castle", "union", "royal", "grand", "old", "new", "lake"]
    keys = [f"{words[i % 10]} {words[(i // 10) % 10]} entity {i}" for i in range(n)]
    n_abstracts = max(1, n // 4)
    ids = [sorted(rng.sample(range(n_abstracts), rng.choice((1, 1, 2, 3)))) for _ in range(n)]
    return keys, ids


def _dict_bytes(d: dict[str, list[int]]) -> int:
    size = sys.getsizeof(d)
    for ids in d.values():
        size += sys.getsizeof(ids) + sum(sys.getsizeof(i) for i in ids if i > 256)
    return size


def _bfs_rate(
    keys: Sequence[str], ids: Sequence[list[int]], queries: Sequence[str], budget_s: float
) -> float:
    """Tree-RAG lookup: BFS from the root of an entity tree (branching 10) collecting matches."""
    children: list[list[int]] = [[] for _ in keys]
    for i in range(1, len(keys)):
        children[(i - 1) // 10].append(i)
    done, t0 = 0, time.perf_counter()
    for q in queries:
        found: list[int] = []
        queue = deque([0])
        while queue:
            v = queue.popleft()
            if keys[v] == q:
                found.extend(ids[v])
            queue.extend(children[v])
        done += 1
        if time.perf_counter() - t0 > budget_s:
            break
    return done / (time.perf_counter() - t0)


def _bench_size(n: int, seed: int) -> FilterBenchRow:
    rng = random.Random(seed)
    keys, ids = _make_entities(n, rng)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in ids])
    flat = np.fromiter((i for x in ids for i in x), dtype=np.int64, count=int(offsets[-1]))
    order = list(range(n))
    rng.shuffle(order)
    scattered = [keys[i] for i in order]  # the same str objects, in random order
    fresh = [k.encode().decode() for k in scattered]  # new str objects, laid out in query order
    n_single = min(n, 200_000)
    single_keys = scattered[:n_single]

    def insert_loop() -> CuckooFilter:
        f = CuckooFilter()
        for k, x in zip(keys, ids, strict=True):
            f.insert(k, x)
        return f

    filt_insert = _rate(n, insert_loop, repeat=1)
    filt_bulk = _rate(n, lambda: CuckooFilter().insert_many(keys, offsets, flat), repeat=2)
    f = CuckooFilter()
    f.insert_many(keys, offsets, flat)

    def single() -> None:
        for k in single_keys:
            f.lookup(k)

    filt_single = _rate(n_single, single)
    filt_batch = _rate(n, lambda: f.lookup_many(fresh))
    filt_scattered = _rate(n, lambda: f.lookup_many(scattered))
    got_off, got_ids = f.lookup_many(keys, touch=False)
    wrong = sum(
        1
        for i in range(n)
        if got_ids[got_off[i] : got_off[i + 1]].tolist() != ids[i]  # every list must be the entity's own
    )
    absent = [f"absent {i}" for i in range(n)]
    before = f.stats()["fingerprint_false_positives"]
    abs_off, _ = f.lookup_many(absent, touch=False)
    wrong += int(abs_off[-1])
    fpr = (f.stats()["fingerprint_false_positives"] - before) / n
    mem = f.memory_breakdown()

    def dict_insert() -> dict[str, list[int]]:
        d: dict[str, list[int]] = {}
        for k, x in zip(keys, ids, strict=True):
            d.setdefault(k, []).extend(x)
        return d

    dict_ins = _rate(n, dict_insert, repeat=1)
    d = dict_insert()

    def dict_single() -> None:
        get = d.get
        for k in single_keys:
            get(k)

    dict_single_rate = _rate(n_single, dict_single)
    dict_batch = _rate(n, lambda: [d.get(k) for k in scattered])
    bfs = _bfs_rate(keys, ids, scattered[:50], budget_s=3.0)
    return FilterBenchRow(
        entities=n,
        filter_inserts=filt_insert,
        filter_bulk_inserts=filt_bulk,
        filter_single_lookups=filt_single,
        filter_batch_lookups=filt_batch,
        filter_batch_lookups_scattered=filt_scattered,
        table_bytes_per_entity=(mem["fingerprint_table"] + mem["slot_refs"]) / n,
        fingerprint_bytes_per_entity=mem["fingerprint_table"] / n,
        total_bytes_per_entity=mem["total"] / n,
        load_factor=f.load_factor(),
        fingerprint_false_positive_rate=fpr,
        wrong_lists=wrong,
        dict_inserts=dict_ins,
        dict_single_lookups=dict_single_rate,
        dict_batch_lookups=dict_batch,
        dict_bytes_per_entity=_dict_bytes(d) / n,
        bfs_lookups=bfs,
    )


def run_filter_benchmark(
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000), seed: int = 0, progress: bool = True
) -> list[FilterBenchRow]:
    """Measures the filter and its baselines at each size.

    Args:
        sizes: Numbers of entities.
        seed: Seed for the synthetic entities, id lists and query order.
        progress: Print a line as each size starts.

    Returns:
        One row per size.
    """
    rows = []
    for n in sizes:
        if n < 1:
            raise ValueError(f"sizes must be positive, got {n}")
        if progress:
            print(f"[bench-filter] {n:,} entities ...", file=sys.stderr, flush=True)
        rows.append(_bench_size(n, seed))
    return rows


def _m(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x:,.0f}"


def format_table(rows: Sequence[FilterBenchRow]) -> str:
    """Markdown tables: absolute figures, then ratios against the baselines."""
    out = [
        "| entities | inserts/s (loop) | inserts/s (bulk) | lookups/s (single, Python) | "
        "batch lookups/s | batch lookups/s (scattered str) | table B/entity | with id lists B/entity | "
        "load | fp-stage FPR | wrong lists |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.entities:,} | {_m(r.filter_inserts)} | {_m(r.filter_bulk_inserts)} | "
            f"{_m(r.filter_single_lookups)} | {_m(r.filter_batch_lookups)} | "
            f"{_m(r.filter_batch_lookups_scattered)} | {r.table_bytes_per_entity:.2f} "
            f"(fingerprints {r.fingerprint_bytes_per_entity:.2f}) | {r.total_bytes_per_entity:.1f} | "
            f"{r.load_factor:.3f} | {r.fingerprint_false_positive_rate:.4%} | {r.wrong_lists} |"
        )
    out += [
        "",
        "| entities | dict inserts/s | dict lookups/s (single) | dict batch lookups/s | dict B/entity | "
        "BFS lookups/s | filter/dict single | filter/dict batch | filter batch / BFS | dict B / filter B |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.entities:,} | {_m(r.dict_inserts)} | {_m(r.dict_single_lookups)} | "
            f"{_m(r.dict_batch_lookups)} | {r.dict_bytes_per_entity:.1f} | {r.bfs_lookups:,.1f} | "
            f"{r.filter_single_lookups / r.dict_single_lookups:.2f}x | "
            f"{r.filter_batch_lookups / r.dict_batch_lookups:.2f}x | "
            f"{r.filter_batch_lookups / r.bfs_lookups:,.0f}x | "
            f"{r.dict_bytes_per_entity / r.total_bytes_per_entity:.2f}x |"
        )
    return "\n".join(out)


def rows_to_json(rows: Sequence[FilterBenchRow]) -> str:
    """The rows as a JSON array."""
    return json.dumps([asdict(r) for r in rows], indent=2)
