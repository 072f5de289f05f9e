"""Concurrency: many threads and many coroutines on one retriever give exactly the serial results.

For every strategy in the table: 8 threads x 200 queries mixing the core strategy, the
LangChain retriever and the LlamaIndex retriever (each with its per-call options), then 200
concurrent ``ainvoke`` and 200 concurrent ``aretrieve`` calls; every result (ids, exact
scores, texts, provenance metadata) must equal a serial run's. Queries repeat, so the query
embeddings come from the session cache and the threads exercise the strategies themselves.
Two more checks: queries keep their results while another thread saves the index, and
loads of an index directory never fail while a writer keeps saving and pruning it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.cases import QUERIES, StrategyCase, result_signature, wiring_embedder
from tests.reliability.conftest import RealStrategy

THREADS = 8
PER_THREAD = 200
ASYNC_CALLS = 200
K = 5

Call = tuple[str, str, tuple[tuple[str, Any], ...]]  # (framework, query, options)


def _lc_signature(docs: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(d.id, d.page_content, dict(d.metadata)) for d in docs]


def _li_signature(nodes: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(n.node.node_id, n.score, n.node.get_content(), dict(n.node.metadata)) for n in nodes]


class Runner:
    """Runs one call through the core strategy or one of the two framework retrievers."""

    def __init__(self, case: StrategyCase, strategy: Any) -> None:
        self.strategy = strategy
        self.langchain = case.langchain(strategy, K)
        variants: list[Mapping[str, Any]] = [{}, *case.options]
        self.llama_index = {_key(o): case.llama_index(strategy, K, o) for o in variants}
        self.calls: list[Call] = [
            (framework, q, _key(o))
            for framework in ("core", "langchain", "llama_index")
            for q in QUERIES
            for o in variants
        ]

    def __call__(self, call: Call) -> list[tuple[Any, ...]]:
        framework, query, options = call
        if framework == "core":
            return result_signature(self.strategy.retrieve(query, k=K, **dict(options)))
        if framework == "langchain":
            return _lc_signature(self.langchain.invoke(query, **dict(options)))
        return _li_signature(self.llama_index[options].retrieve(query))


def _key(options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


@pytest.fixture(scope="module")
def serial(real_strategy: RealStrategy) -> tuple[Runner, dict[Call, list[tuple[Any, ...]]]]:
    case, strategy = real_strategy
    runner = Runner(case, strategy)
    return runner, {call: runner(call) for call in runner.calls}


def test_threads_match_the_serial_run(serial: tuple[Runner, dict[Call, list[tuple[Any, ...]]]]) -> None:
    runner, expected = serial
    assert any(expected.values()), "the serial run found results"
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> list[tuple[Call, list[tuple[Any, ...]]]]:
        barrier.wait()
        calls = runner.calls
        return [(c, runner(c)) for c in (calls[(7 * t + 13 * i) % len(calls)] for i in range(PER_THREAD))]

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        runs = list(pool.map(worker, range(THREADS)))
    assert sum(len(r) for r in runs) == THREADS * PER_THREAD
    frameworks = {call[0] for run in runs for call, _ in run}
    assert frameworks == {"core", "langchain", "llama_index"}
    mismatches = [call for run in runs for call, got in run if got != expected[call]]
    assert not mismatches, f"{len(mismatches)} results differ from the serial run, e.g. {mismatches[:3]}"


async def test_concurrent_ainvoke_matches_serial(
    serial: tuple[Runner, dict[Call, list[tuple[Any, ...]]]],
) -> None:
    runner, expected = serial
    calls = [c for c in runner.calls if c[0] == "langchain"]
    chosen = [calls[(11 * i) % len(calls)] for i in range(ASYNC_CALLS)]
    results = await asyncio.gather(*(runner.langchain.ainvoke(q, **dict(o)) for _, q, o in chosen))
    assert len(results) == ASYNC_CALLS
    for call, docs in zip(chosen, results, strict=True):
        assert _lc_signature(docs) == expected[call], call


async def test_concurrent_aretrieve_matches_serial(
    serial: tuple[Runner, dict[Call, list[tuple[Any, ...]]]],
) -> None:
    runner, expected = serial
    calls = [c for c in runner.calls if c[0] == "llama_index"]
    chosen = [calls[(11 * i) % len(calls)] for i in range(ASYNC_CALLS)]
    results = await asyncio.gather(*(runner.llama_index[o].aretrieve(q) for _, q, o in chosen))
    assert len(results) == ASYNC_CALLS
    for call, nodes in zip(chosen, results, strict=True):
        assert _li_signature(nodes) == expected[call], call


# --------------------------------------------------------------------------- with a writer


def _until_done(work: Callable[[], None], stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        while not stop.is_set():
            work()
    except BaseException as exc:  # reported by the test, which fails on any
        errors.append(exc)


def test_queries_keep_their_results_while_the_index_is_saved(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    strategy = wiring_build(20)
    queries = ["Who founded the Quellmoor Guild?", "salt and copper", "chronicle of Vantry", "zzz qqq"]
    expected = {q: result_signature(strategy.retrieve(q, k=K)) for q in queries}
    saves = itertools.count()
    stop, errors = threading.Event(), list[BaseException]()
    writer = threading.Thread(
        target=_until_done,
        args=(lambda: (strategy.save(tmp_path / "idx"), next(saves)), stop, errors),
    )
    writer.start()
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            rounds = list(
                pool.map(lambda i: [result_signature(strategy.retrieve(q, k=K)) for q in queries], range(60))
            )
    finally:
        stop.set()
        writer.join()
    assert not errors
    assert next(saves) >= 1, "the writer saved at least once while queries ran"
    for got in rounds:
        assert dict(zip(queries, got, strict=True)) == expected


def test_loads_never_fail_while_a_writer_saves_and_prunes(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    strategy = wiring_build(8)
    path = tmp_path / "idx"
    strategy.save(path)
    stop, errors = threading.Event(), list[BaseException]()
    loaded: list[int] = []

    def load() -> None:
        again = case.load(path, embedder=wiring_embedder(), store=strategy.store, **case.wiring_kwargs())
        loaded.append(len(result_signature(again.retrieve("salt and copper", k=3))))

    writer = threading.Thread(target=_until_done, args=(lambda: strategy.save(path), stop, errors))
    readers = [threading.Thread(target=_until_done, args=(load, stop, errors)) for _ in range(2)]
    for t in [writer, *readers]:
        t.start()
    try:
        for _ in range(2400):  # at most two minutes: a hung load fails the test instead of CI
            if len(loaded) >= 30 or errors:
                break
            stop.wait(0.05)
    finally:
        stop.set()
        for t in [writer, *readers]:
            t.join()
    assert not errors, errors[:3]
    assert len(loaded) >= 30
    assert set(loaded) == {3}
