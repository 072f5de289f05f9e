"""Builds on every core: the same index with one worker or several, and entities handed over in metadata."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from core.entities import EntityExtractor, RuleBasedEntityExtractor
from core.evaluation.build_scale import index_file_digests
from core.ingest.precomputed import ENTITIES_FORMAT, ENTITIES_KEY, entity_metadata, precomputed_entities
from core.store import ChunkStore
from core.strategies import workers as workers_module
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.entity_links import EntityLinks
from core.strategies.umg import UMGRAG
from core.strategies.workers import check_workers, extract_entities, map_texts
from core.types import Document
from tests.core.conftest import unique_name

STRATEGIES: dict[str, Any] = {"bridge": BridgeRAG, "umg": UMGRAG, "bubble": BubbleRAG}


class _ForkablePids:
    """A batch function that says which process ran each item."""

    fork_safe = True

    def run(self, batch: Sequence[int]) -> list[tuple[int, int]]:
        return [(x * x, os.getpid()) for x in batch]


class _Failing:
    fork_safe = True

    def run(self, batch: Sequence[int]) -> list[int]:
        if 7 in batch:
            raise RuntimeError("item 7 cannot be read")
        return list(batch)


class _Counting:
    """An extractor that counts the texts it is asked about (and is never forked)."""

    def __init__(self, inner: EntityExtractor) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts = 0

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        self.texts += len(texts)
        return self.inner.extract(texts)


class _PoolSpy:
    """Stands in for the ``multiprocessing`` module in :mod:`core.strategies.workers`: counts pools."""

    def __init__(self) -> None:
        self.pools = 0

    def get_all_start_methods(self) -> list[str]:
        return multiprocessing.get_all_start_methods()

    def get_context(self, method: str) -> Any:
        context, spy = multiprocessing.get_context(method), self

        class _Context:
            def Pool(self, processes: int) -> Any:  # noqa: N802 - multiprocessing's name
                spy.pools += 1
                return context.Pool(processes)

        return _Context()


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> _PoolSpy:
    """Small inputs are spread too (batches of 4, no minimum per worker); pools are counted."""
    monkeypatch.setattr(workers_module, "MIN_TEXTS_PER_WORKER", 1)
    monkeypatch.setattr(workers_module, "_BATCH", 4)
    spy = _PoolSpy()
    monkeypatch.setattr(workers_module, "multiprocessing", spy)
    return spy


def test_map_texts_spreads_batches_over_processes_in_order(forking: None) -> None:
    items = list(range(50))
    out = map_texts(_ForkablePids().run, items, workers=2, owner=_ForkablePids())
    assert [value for value, _ in out] == [x * x for x in items]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2


def test_map_texts_stays_in_process_for_one_worker_or_an_unforkable_owner(forking: None) -> None:
    one = map_texts(_ForkablePids().run, list(range(20)), workers=1, owner=_ForkablePids())
    assert {pid for _, pid in one} == {os.getpid()}
    other = map_texts(_ForkablePids().run, list(range(20)), workers=2, owner=object())
    assert {pid for _, pid in other} == {os.getpid()}


def test_a_worker_error_reaches_the_caller(forking: None) -> None:
    with pytest.raises(RuntimeError, match="item 7"):
        map_texts(_Failing().run, list(range(20)), workers=2, owner=_Failing())


def test_entity_links_scanned_on_two_processes_equal_one(forking: _PoolSpy) -> None:
    texts = [
        f"Ada Vance met Bo Lind in Varga City, chapter {i}; the Varga City archive of Ada Vance."
        for i in range(30)
    ]
    entities = [["Ada Vance"], ["Bo Lind", "Varga City"], []] * 10
    about = [["Ada Vance"]] * 30
    arrays = []
    for workers in (1, 2):
        links = EntityLinks()
        links.add_units(about, entities, texts, groups=[f"d{i // 5}" for i in range(30)], workers=workers)
        names, lists = links.to_arrays()
        arrays.append((names, {k: v.tolist() for k, v in lists.items()}))
    assert forking.pools == 1  # the second scan forked
    assert arrays[0] == arrays[1]
    names, lists = arrays[0]
    start, end = lists["named_indptr"][0], lists["named_indptr"][1]
    assert names.index("varga city") in lists["named_indices"][start:end]  # unit 0's NER did not name it


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_workers_must_be_a_positive_integer(bad: Any, fake_embedder: Any) -> None:
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        check_workers(bad)
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        BridgeRAG.from_documents([Document("a", "Some text.")], embedder=fake_embedder, workers=bad)


def test_default_workers_are_the_cores() -> None:
    assert check_workers(None) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_the_index_built_on_two_workers_is_the_one_built_on_one(
    name: str, forking: _PoolSpy, demo_docs: list[Document], embedder: Any, tmp_path: Path
) -> None:
    cls = STRATEGIES[name]
    digests = []
    for workers in (1, 2):
        rag = cls.from_documents(
            demo_docs,
            embedder=embedder,
            persist_directory=tmp_path / f"w{workers}",
            show_progress=False,
            workers=workers,
        )
        assert rag.workers == workers
        assert (forking.pools > 0) == (workers == 2)  # the second build forked, the first did not
        digests.append(index_file_digests(tmp_path / f"w{workers}" / rag.name))
        rag.close()
    assert digests[0] == digests[1]
    assert sum(name.endswith(".npy") for name in digests[0]) > 3


# ----------------------------------------------------------------------------- precomputed entities


def _store_with_entities(docs: list[Document], embedder: Any, extractor: Any | None) -> ChunkStore:
    """The demo documents as one chunk each in a store, with precomputed entities when given an extractor."""
    texts = [d.text for d in docs]
    metas: list[dict[str, Any]] = [{"doc_id": d.id} for d in docs]
    if extractor is not None:
        for meta, value in zip(metas, entity_metadata(extractor, texts), strict=True):
            meta[ENTITIES_KEY] = value
    store = ChunkStore.ephemeral(unique_name("pre"))
    store.add([f"{d.id}::0" for d in docs], texts, embedder.embed_documents(texts), metas)
    return store


def test_entity_metadata_keeps_names_spans_and_types(extractor: Any) -> None:
    text = "Marie Curie worked at the University of Paris."
    value = json.loads(entity_metadata(extractor, [text])[0])
    assert value["v"] == ENTITIES_FORMAT
    assert value["extractor"] == extractor.name
    assert value["names"] == extractor.extract([text])[0]
    for start, end, label in value["mentions"]:
        assert text[start:end]
        assert label in extractor.labels
    rules = json.loads(entity_metadata(RuleBasedEntityExtractor(), [text])[0])
    assert rules["names"] == RuleBasedEntityExtractor().extract([text])[0]
    assert rules["mentions"] == []


def _counted_build(store: ChunkStore, embedder: Any, extractor: Any) -> tuple[BridgeRAG, _Counting]:
    """Bridge-RAG over ``store``, with an extractor that counts the texts it is given."""
    counted = _Counting(extractor)
    rag = BridgeRAG.from_store(store, embedder=embedder, entity_extractor=counted, show_progress=False)
    return rag, counted


def test_a_build_from_precomputed_entities_runs_no_ner_and_equals_one_that_does(
    demo_docs: list[Document], embedder: Any, extractor: Any
) -> None:
    pre, counted = _counted_build(_store_with_entities(demo_docs, embedder, extractor), embedder, extractor)
    assert counted.texts == 0
    assert pre.report.counts["entities precomputed"] == len(demo_docs)
    plain, plain_counted = _counted_build(
        _store_with_entities(demo_docs, embedder, None), embedder, extractor
    )
    assert plain_counted.texts == len(demo_docs)
    assert pre.num_entities == plain.num_entities > 0
    for doc in demo_docs[:5]:
        question = doc.text.split(".")[0]
        assert [r.id for r in pre.retrieve(question)] == [r.id for r in plain.retrieve(question)]


def test_entities_of_another_extractor_or_version_are_extracted_again(extractor: Any) -> None:
    texts = ["Ada Lovelace met Charles Babbage in London.", "Nothing here."]
    other = entity_metadata(RuleBasedEntityExtractor(), texts[:1])[0]
    old = json.dumps({"v": ENTITIES_FORMAT + 1, "extractor": extractor.name, "names": ["x"]})
    counted = _Counting(extractor)
    names, extracted = extract_entities(
        counted, texts, workers=1, ids=["a", "b"], metadatas=[{ENTITIES_KEY: other}, {ENTITIES_KEY: old}]
    )
    assert extracted == 2 == counted.texts
    assert names == extractor.extract(texts)


@pytest.mark.parametrize(
    "value",
    ["not json", json.dumps(["a list"]), json.dumps({"extractor": "x"}), 7],
)
def test_a_malformed_value_names_the_chunk(value: Any, extractor: Any) -> None:
    with pytest.raises(ValueError, match=r"chunk 'c1'.*entity_metadata"):
        precomputed_entities([{ENTITIES_KEY: value}], ["c1"], extractor.name)


def test_names_that_are_not_strings_are_refused(extractor: Any) -> None:
    value = json.dumps({"v": ENTITIES_FORMAT, "extractor": extractor.name, "names": [1, 2]})
    with pytest.raises(ValueError, match="list of strings under 'names'"):
        precomputed_entities([{ENTITIES_KEY: value}], ["c1"], extractor.name)


# ----------------------------------------------------------------------------- the build benchmarks


def test_the_precomputed_benchmark_builds_with_no_model_and_no_ner() -> None:
    from core.evaluation.build_scale import run_precomputed_benchmark

    out = run_precomputed_benchmark(1_000, queries=20)
    small, large = out["rows"]
    assert (small["chunks"], large["chunks"]) == (100, 1_000)
    for row in (small, large):
        assert row["extractor_texts"] == 0
        assert row["precomputed"] == row["chunks"]
        assert row["entities"] > 0
        assert row["bytes_per_row_disk"] > 0
    assert "NER texts" in out["report"]


def test_precomputed_rows_are_a_prefix_whatever_the_size() -> None:
    from core.evaluation.build_scale import precomputed_rows

    small = [row for batch in precomputed_rows(50, batch=20) for row in zip(*batch, strict=True)]
    large = [row for batch in precomputed_rows(100, batch=35) for row in zip(*batch, strict=True)]
    assert [r[0] for r in small] == [r[0] for r in large[:50]]
    assert all((a[2] == b[2]).all() and a[3] == b[3] for a, b in zip(small, large, strict=False))


def test_bench_scale_refuses_bad_worker_counts(capsys: pytest.CaptureFixture[str]) -> None:
    from core.app.cli import main

    with pytest.raises(SystemExit):
        main(["bench-scale", "--compare-workers", "0,2"])
    assert "worker counts must be positive integers" in capsys.readouterr().err
