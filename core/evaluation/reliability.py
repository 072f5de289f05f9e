"""Reliability benchmark: GIL release in the C++ batch calls, and a memory-leak check.

Run with ``bridge-rag bench-reliability``. Two measurements:

- **GIL scaling.** The same batch entity lookups (``CuckooFilter.lookup_many``) run on one
  thread, then split over two threads. The C++ loop releases the GIL, so on a machine with
  two free cores the two threads should do the work close to twice as fast; the figure is
  the ratio of the two throughputs (best of several repeats).
- **RSS over many queries.** Each strategy is built over the bundled demo corpus with the
  real embedder and answers ``queries`` questions (distinct questions cycle; their
  embeddings are computed once, so the loop exercises the strategy, not the model); the
  resident set size after the first 1,000 queries is compared with the RSS at the end. A
  leak of even a few hundred bytes per query shows up as growth.
"""

from __future__ import annotations

import gc
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from core.evaluation.peak_memory import current_rss_mib
from core.native.cuckoo import CuckooFilter
from core.strategies.workers import using_cores

__all__ = [
    "LEAK_STRATEGIES",
    "GilScaling",
    "LeakCheck",
    "current_rss_mib",
    "format_report",
    "one_torch_thread",
    "run_gil_scaling",
    "run_leak_check",
    "run_reliability_benchmark",
    "to_json",
]

# --------------------------------------------------------------------------- GIL scaling


@dataclass
class GilScaling:
    """Batch lookups on one thread against the same work split over several threads.

    Attributes:
        entities: Entities in the filter.
        batch: Keys per ``lookup_many`` call.
        batches: Calls per measurement (split evenly over the threads).
        touch: Whether lookups warm the entries (atomic temperature increments).
        threads: Thread count of the parallel run.
        one_thread_lookups_per_s: Throughput on one thread (best of the repeats).
        parallel_lookups_per_s: Throughput on ``threads`` threads (best of the repeats).
        cpus: CPU cores of the machine.
        load_average: The machine's one-minute load average before the run: other work on
            the cores lowers the parallel figure, whatever the GIL does.
    """

    entities: int
    batch: int
    batches: int
    touch: bool
    threads: int
    one_thread_lookups_per_s: float
    parallel_lookups_per_s: float
    cpus: int = 0
    load_average: float = 0.0

    @property
    def ratio(self) -> float:
        """Parallel throughput over one-thread throughput."""
        return self.parallel_lookups_per_s / self.one_thread_lookups_per_s


def _timed_run(work: Callable[[int], None], threads: int, batches: int) -> float:
    """Seconds for ``threads`` threads to run ``batches`` calls of ``work`` between them."""
    share = [batches // threads + (1 if t < batches % threads else 0) for t in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def run(t: int) -> None:
        barrier.wait()
        for i in range(share[t]):
            work(t * 7919 + i)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in pool:
        th.join()
    return time.perf_counter() - t0


def run_gil_scaling(
    entities: int = 200_000,
    batch: int = 20_000,
    batches: int = 64,
    *,
    threads: int = 2,
    repeat: int = 5,
    touch: bool = False,
    seed: int = 0,
) -> GilScaling:
    """Measures how batch lookups scale from one thread to ``threads`` threads.

    Args:
        entities: Entities inserted into the filter.
        batch: Keys per ``lookup_many`` call (a mix of present and absent keys).
        batches: ``lookup_many`` calls per measurement.
        threads: Threads of the parallel run.
        repeat: Measurements of each configuration; the best counts.
        touch: Warm entries on lookup (exercises the atomic temperature counters).
        seed: Seed of the key order.

    Returns:
        The throughputs of both runs.

    Raises:
        ValueError: A count is not positive.
    """
    if min(entities, batch, batches, threads, repeat) < 1:
        raise ValueError("entities, batch, batches, threads and repeat must all be >= 1")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rng = random.Random(seed)
    keys = [f"entity {i}" for i in range(entities)]
    f = CuckooFilter(capacity=entities, reorder_every=0)
    f.insert_many(keys, np.arange(entities + 1), np.arange(entities))
    pool = keys + [f"absent {i}" for i in range(entities // 4)]
    key_batches = []
    for _ in range(16):  # distinct batches, so threads do not share one list object
        rng.shuffle(pool)
        key_batches.append([str(k) for k in pool[:batch]])

    def work(i: int) -> None:
        f.lookup_many(key_batches[i % len(key_batches)], touch=touch)

    work(0)  # warm-up
    one = many = float("inf")
    for _ in range(repeat):  # alternate, so a burst of load elsewhere hits both runs alike
        one = min(one, _timed_run(work, 1, batches))
        many = min(many, _timed_run(work, threads, batches))
    lookups = batch * batches
    return GilScaling(
        entities, batch, batches, touch, threads, lookups / one, lookups / many, os.cpu_count() or 0, load
    )


# --------------------------------------------------------------------------- RSS leak check


@dataclass
class LeakCheck:
    """RSS of one strategy over many queries.

    Attributes:
        strategy: Strategy name.
        queries: Queries run.
        distinct_queries: Distinct query texts cycled through.
        rss_mib: RSS (MiB) after each checkpoint, keyed by the number of queries run.
        seconds: Wall time of the query loop.
    """

    strategy: str
    queries: int
    distinct_queries: int
    rss_mib: dict[int, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def growth(self) -> float:
        """Relative RSS growth from the first checkpoint (1,000 queries) to the last."""
        first, last = self.rss_mib[min(self.rss_mib)], self.rss_mib[max(self.rss_mib)]
        return (last - first) / first


class _QueryMemo:
    """An embedder that computes each distinct query once (documents pass through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self._queries: dict[str, npt.NDArray[np.float32]] = {}
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(self.inner.embed_documents(texts), dtype=np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        with self._lock:
            if text not in self._queries:
                self._queries[text] = np.asarray(self.inner.embed_query(text), dtype=np.float32)
            return self._queries[text].copy()


def _demo_queries() -> list[str]:
    """Demo questions plus lowercase, partial and unmatched variants (about 60 texts)."""
    from core.data import load_demo_corpus, load_demo_questions

    questions = [q["question"] for q in load_demo_questions()]
    titles = [str(d.metadata.get("title", d.id)) for d in load_demo_corpus()]
    out = list(questions)
    out += [q.lower() for q in questions]
    out += [f"Tell me about {t}." for t in titles]
    out += ["quantum chromodynamics on a lattice", "photosynthesis in deep sea algae", "zzz qqq"]
    return out


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one intra-op thread meanwhile (when torch is loaded), restored afterwards.

    Query embeddings are small; on a busy two-core machine OpenMP's spin-waiting makes them
    many times slower with more threads. Results and memory do not depend on it.
    """
    with using_cores(1):
        yield


def _build(name: str, embedder: Any) -> Any:
    from core.data import load_demo_corpus
    from core.store import ChunkStore

    docs = load_demo_corpus()
    store = ChunkStore.ephemeral(f"leak-{name}-{random.Random().getrandbits(32):08x}")
    if name == "bridge":
        from core.strategies.bridge import BridgeRAG

        return BridgeRAG.from_documents(docs, embedder=embedder, store=store, show_progress=True)
    if name == "umg":
        from core.strategies.umg import UMGRAG

        return UMGRAG.from_documents(docs, embedder=embedder, store=store, show_progress=True)
    if name == "bubble":
        from core.strategies.bubble import BubbleRAG

        return BubbleRAG.from_documents(docs, embedder=embedder, store=store, show_progress=True)
    raise ValueError(f"unknown strategy {name!r}; choose from {list(LEAK_STRATEGIES)}")


#: The strategies the leak check builds.
LEAK_STRATEGIES: tuple[str, ...] = ("bridge", "umg", "bubble")


def run_leak_check(
    queries: int = 10_000,
    *,
    strategies: Sequence[str] = LEAK_STRATEGIES,
    first_checkpoint: int = 1_000,
    embedder: Any = None,
    embed_queries: bool = False,
) -> list[LeakCheck]:
    """Runs ``queries`` queries on each strategy and records the RSS along the way.

    Args:
        queries: Queries per strategy (>= ``first_checkpoint``).
        strategies: Strategy names (see :data:`LEAK_STRATEGIES`).
        first_checkpoint: The reference point: RSS after this many queries.
        embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.
        embed_queries: Run the model for every query too (slow: about 20 ms each on a CPU);
            by default each distinct query is embedded once.

    Returns:
        One :class:`LeakCheck` per strategy.

    Raises:
        ValueError: ``queries`` is below ``first_checkpoint``, or an unknown strategy.
    """
    from core.embed import as_embedder

    if first_checkpoint < 1 or queries < first_checkpoint:
        raise ValueError(f"queries must be >= first_checkpoint ({first_checkpoint}), got {queries}")
    unknown = [s for s in strategies if s not in LEAK_STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {list(LEAK_STRATEGIES)}")
    model = as_embedder(embedder)
    memo = model if embed_queries else _QueryMemo(model)
    texts = _demo_queries()
    checkpoints = sorted({first_checkpoint, *range(first_checkpoint, queries + 1, first_checkpoint), queries})
    out = []
    for name in strategies:
        strategy = _build(name, memo)
        check = LeakCheck(name, queries, len(texts))
        t0 = time.perf_counter()
        with one_torch_thread(), tqdm(total=queries, desc=f"{name}: queries", unit="query") as bar:
            done = 0
            for stop in checkpoints:
                while done < stop:
                    strategy.retrieve(texts[done % len(texts)], k=5)
                    done += 1
                    bar.update(1)
                gc.collect()
                check.rss_mib[done] = current_rss_mib()
        check.seconds = time.perf_counter() - t0
        tqdm.write(
            f"{name}: RSS {check.rss_mib[min(check.rss_mib)]:.1f} MiB after {min(check.rss_mib):,} "
            f"queries, {check.rss_mib[queries]:.1f} MiB after {queries:,} ({100 * check.growth:+.2f}%)"
        )
        out.append(check)
        del strategy
        gc.collect()
    return out


# --------------------------------------------------------------------------- report


def run_reliability_benchmark(
    *,
    queries: int = 10_000,
    entities: int = 200_000,
    strategies: Sequence[str] = LEAK_STRATEGIES,
    embed_queries: bool = False,
) -> dict[str, Any]:
    """Runs both measurements and returns their figures (JSON-ready) with a text report.

    Raises:
        ValueError: An unknown strategy, or counts out of range (checked before any work).
    """
    unknown = [s for s in strategies if s not in LEAK_STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {list(LEAK_STRATEGIES)}")
    if queries < 1_000:
        raise ValueError(f"queries must be >= 1,000 (the first checkpoint), got {queries:,}")
    scaling = [run_gil_scaling(entities, touch=touch) for touch in (False, True)]
    leaks = run_leak_check(queries, strategies=strategies, embed_queries=embed_queries)
    out: dict[str, Any] = {
        "gil_scaling": [{**asdict(s), "ratio": s.ratio} for s in scaling],
        "leak_check": [{**asdict(c), "growth": c.growth} for c in leaks],
    }
    out["report"] = format_report(scaling, leaks)
    return out


def format_report(scaling: Sequence[GilScaling], leaks: Sequence[LeakCheck]) -> str:
    """The figures as two markdown tables."""
    lines = [
        "| batch lookups | entities | 1 thread lookups/s | 2 threads lookups/s | 2 threads / 1 thread "
        "| load average before (cores) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in scaling:
        lines.append(
            f"| lookup_many (touch={s.touch}) | {s.entities:,} | {s.one_thread_lookups_per_s / 1e6:.2f}M | "
            f"{s.parallel_lookups_per_s / 1e6:.2f}M | {s.ratio:.2f}x | {s.load_average:.2f} ({s.cpus}) |"
        )
    lines += [
        "",
        "| strategy | queries | distinct | RSS at the 1st checkpoint MiB | RSS at the end MiB | growth | s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in leaks:
        first, last = c.rss_mib[min(c.rss_mib)], c.rss_mib[max(c.rss_mib)]
        lines.append(
            f"| {c.strategy} | {c.queries:,} | {c.distinct_queries} | {first:.1f} | {last:.1f} | "
            f"{100 * c.growth:+.2f}% | {c.seconds:.0f} |"
        )
    return "\n".join(lines)


def to_json(out: dict[str, Any]) -> str:
    """The figures of :func:`run_reliability_benchmark` as JSON (without the text report)."""
    return json.dumps({k: v for k, v in out.items() if k != "report"}, indent=2, default=str)
