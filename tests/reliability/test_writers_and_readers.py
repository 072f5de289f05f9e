"""Readers never fail beside a writer, in threads of one process and across processes.

Threads: for every strategy, a writer thread keeps adding two documents and deleting one, and
the oldest of its own once it keeps more than ``WRITTEN_ALIVE`` (in memory, so changes come as
fast as the strategy makes them), while reader threads run 10,000 queries with and without
filters, through the core strategy and both framework retrievers. Every query must succeed,
and every result must come from a document that was alive at some point during its query
(added before the query ended, not deleted before it began).

Processes: a writer process keeps changing a saved index (each change a new generation)
while this process follows it with ``refresh_interval`` 0.05 s and queries without pause:
every query succeeds and the reader switches to new generations as they come.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.cases import StrategyCase, synthetic_documents, wiring_embedder

REPO = Path(__file__).resolve().parents[2]
QUERIES_PER_STRATEGY = 10_000  # per strategy, beside a writer
WRITTEN_ALIVE = 24  # the writer's own documents kept alive (older ones are deleted: the index stays small)
READERS = 3
QUERIES = (
    "Who founded the Quellmoor Guild?",
    "Arvel chronicle of Rastwick",
    "salt and copper trade",
    "Brisca Tarnholt",
    "archive",
)
FILTERS: tuple[dict[str, Any] | None, ...] = (None, {"n": {"$gte": 3}}, {"n": {"$lt": 8}})


class Lifetimes:
    """When each document became visible and when it was surely gone (monotonic seconds)."""

    def __init__(self, initial: list[str]) -> None:
        self.added = dict.fromkeys(initial, -math.inf)
        self.deleted: dict[str, float] = {}
        self.lock = threading.Lock()

    def adding(self, ids: list[str]) -> None:
        with self.lock:
            for d in ids:
                self.added.setdefault(d, time.monotonic())

    def gone(self, ids: list[str]) -> None:
        with self.lock:
            for d in ids:
                self.deleted[d] = time.monotonic()

    def alive_between(self, doc: str, start: float, end: float) -> bool:
        with self.lock:
            return self.added.get(doc, math.inf) <= end and self.deleted.get(doc, math.inf) >= start


def test_queries_beside_a_writer_never_fail(case: StrategyCase, wiring_build: Callable[..., Any]) -> None:
    from langchain_bridge import StrategyRetriever as LangChainRetriever
    from llama_index_bridge import StrategyRetriever as LlamaRetriever

    rag = wiring_build(12)
    langchain = LangChainRetriever(strategy=rag, k=5)
    llama = LlamaRetriever(rag, k=5)
    lifetimes = Lifetimes([f"syn-{i:04d}" for i in range(12)])
    stop = threading.Event()
    errors: list[BaseException] = []
    stale: list[tuple[str, str]] = []
    done = [0]
    count_lock = threading.Lock()

    def writer() -> None:
        i, kept = 0, deque[str]()
        try:
            while not stop.is_set():
                docs = synthetic_documents(2, prefix=f"w{i}", seed=i)
                lifetimes.adding([str(d.id) for d in docs])
                ids = rag.add_documents(docs)
                kept.append(ids[1])
                gone = [ids[0], kept.popleft()] if len(kept) > WRITTEN_ALIVE else ids[:1]
                rag.delete_documents(gone)
                lifetimes.gone(gone)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            query, flt = rng.choice(QUERIES), rng.choice(FILTERS)
            way = rng.randrange(3)
            start = time.monotonic()
            try:
                if way == 0:
                    found = [(r.metadata, r.text) for r in rag.retrieve(query, k=5, filter=flt)]
                elif way == 1:
                    found = [(d.metadata, d.page_content) for d in langchain.invoke(query, filter=flt)]
                else:
                    found = [(n.node.metadata, n.node.get_content()) for n in llama.retrieve(query)]
            except BaseException as exc:
                errors.append(exc)
                stop.set()
                return
            end = time.monotonic()
            for meta, text in found:
                doc = meta.get("doc_id")
                if meta.get("type") is None and not lifetimes.alive_between(str(doc), start, end):
                    stale.append((str(doc), text[:80]))
            with count_lock:
                done[0] += 1
                if done[0] >= QUERIES_PER_STRATEGY:
                    stop.set()

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(s,)) for s in range(READERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, f"{len(errors)} failures, first: {errors[0]!r}"
    assert done[0] >= QUERIES_PER_STRATEGY
    assert not stale, stale[:5]
    assert len(lifetimes.deleted) > 0  # the writer really ran beside the readers


@pytest.mark.parametrize("rounds", [12])
def test_a_follower_process_never_fails_while_another_writes(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path, rounds: int
) -> None:
    built = wiring_build(12, persist_directory=tmp_path)
    built.close()
    reader = case.load(tmp_path, embedder=wiring_embedder(), refresh_interval=0.05, **case.wiring_kwargs())
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.churn_writer", case.name, str(tmp_path), str(rounds)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    queries = 0
    try:
        while writer.poll() is None:
            reader.retrieve(QUERIES[queries % len(QUERIES)], k=5)
            queries += 1
    finally:
        out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err[-2000:]
    assert out.split()[-1] == str(rounds)
    deadline = time.monotonic() + 30
    while reader.generation != _current(tmp_path / case.name) and time.monotonic() < deadline:
        reader.retrieve(QUERIES[0], k=5)
        time.sleep(0.05)
    assert reader.generation == _current(tmp_path / case.name)
    assert queries > 0
    assert reader._follower.switches >= 1


def _current(index_dir: Path) -> str | None:
    from core.persist import current_generation

    return current_generation(index_dir)
