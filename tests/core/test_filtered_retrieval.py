"""Every strategy honours a metadata filter at every stage: a property test over random filters.

The documents get random tenants, years, scores and flags (:mod:`tests.filter_cases`); each
random ``where`` filter's passing chunks come from Chroma itself (``get(where=...)`` on the
strategy's collection), and every query must return only those, as many as asked for when
there are enough (Bridge-RAG, BubbleRAG) and at least one whenever one passes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from core.filters import FilterError
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.umg import UMGRAG
from core.types import Document
from tests.core.conftest import CachingEmbedder, unique_name
from tests.filter_cases import random_where, tag_documents

QUERIES = (
    "Who founded the Halden Institute?",
    "Which river flows through Marrowick?",
    "What did Varga discover?",
    "Where was the observatory built?",
    "Who directed the institute founded by Oskar Halden?",
    "Which company makes the engines?",
)


@pytest.fixture(scope="module")
def tagged(demo_docs: list[Document]) -> list[Document]:
    return tag_documents(demo_docs)


@pytest.fixture(scope="module")
def strategies(tagged: list[Document], embedder: CachingEmbedder, extractor: Any) -> dict[str, Any]:
    common = {"embedder": embedder, "show_progress": False}
    return {
        "bridge": BridgeRAG.from_documents(
            tagged, entity_extractor=extractor, store=ChunkStore.ephemeral(unique_name("fb")), **common
        ),
        "umg": UMGRAG.from_documents(tagged, store=ChunkStore.ephemeral(unique_name("fu")), **common),
        "bubble": BubbleRAG.from_documents(tagged, store=ChunkStore.ephemeral(unique_name("fbu")), **common),
    }


def _passing(strategy: Any, where: dict[str, Any]) -> set[str] | None:
    """Ids of the chunks (units) that pass ``where``, by Chroma; None when Chroma refuses it."""
    try:
        return set(strategy.store.get(where=where, include_embeddings=False).ids)
    except ValueError:
        return None


def _run_property(
    strategy: Any, retrieve: Callable[[str, int, dict[str, Any]], list[str]], *, seed: int, filters: int
) -> int:
    rng = random.Random(seed)
    queries = 0
    exact_k = strategy.name in ("bridge", "bubble")
    for _ in range(filters):
        where = random_where(rng)
        passing = _passing(strategy, where)
        if passing is None:
            with pytest.raises(FilterError):
                retrieve(QUERIES[0], 3, where)
            continue
        for query in rng.sample(QUERIES, 3):
            k = rng.choice([1, 3, 5, 8])
            ids = retrieve(query, k, where)
            queries += 1
            outside = set(ids) - passing
            assert not outside, (where, query, outside)
            if passing:
                assert ids, (where, query)
            if exact_k:
                assert len(ids) == min(k, len(passing)), (where, query, k, len(passing))
    return queries


@pytest.mark.parametrize("name", ["bridge", "umg", "umgp", "bubble"])
def test_random_filters_never_leak_and_always_fill(strategies: dict[str, Any], name: str) -> None:
    strategy = strategies["umg" if name == "umgp" else name]
    options = {"parent_promotion": name == "umgp"} if name.startswith("umg") else {}

    def retrieve(query: str, k: int, where: dict[str, Any]) -> list[str]:
        return [r.id for r in strategy.retrieve(query, k, filter=where, **options)]

    assert _run_property(strategy, retrieve, seed=len(name), filters=120) > 250


@pytest.mark.parametrize("name", ["bridge", "umg", "bubble"])
def test_a_filter_matching_nothing_returns_nothing(strategies: dict[str, Any], name: str) -> None:
    assert strategies[name].retrieve(QUERIES[0], 5, filter={"tenant": "nobody"}) == []


@pytest.mark.parametrize("name", ["bridge", "umg", "bubble"])
def test_an_unsupported_operator_is_refused_before_any_work(strategies: dict[str, Any], name: str) -> None:
    with pytest.raises(FilterError, match=r"\$contains"):
        strategies[name].retrieve(QUERIES[0], 3, filter={"tenant": {"$contains": "ac"}})
    with pytest.raises(FilterError, match="exactly one key"):
        strategies[name].retrieve(QUERIES[0], 3, filter={"tenant": "acme", "year": 2020})


@pytest.mark.parametrize("name", ["bridge", "umg", "bubble"])
def test_a_filter_on_one_tenant_gives_the_best_of_that_tenant(strategies: dict[str, Any], name: str) -> None:
    """Within a tenant, the filtered results are the unfiltered ranking of the tenant's chunks
    when the tenant's best chunks rank high anyway: the filter restricts, it does not reshuffle."""
    strategy = strategies[name]
    for tenant in ("acme", "globex"):
        got = strategy.retrieve(QUERIES[4], 3, filter={"tenant": tenant})
        assert got
        assert all(r.metadata["tenant"] == tenant for r in got)
        scores = [r.score for r in got]
        assert scores == sorted(scores, reverse=True)


def test_filter_survives_deletes_and_additions(
    tagged: list[Document], embedder: CachingEmbedder, extractor: Any
) -> None:
    rag = BridgeRAG.from_documents(
        tagged[:12],
        embedder=embedder,
        entity_extractor=extractor,
        store=ChunkStore.ephemeral(unique_name("fd")),
        show_progress=False,
    )
    tenant = tagged[0].metadata["tenant"]
    before = {r.metadata["doc_id"] for r in rag.retrieve(QUERIES[0], 50, filter={"tenant": tenant})}
    rag.delete_documents([str(tagged[0].id)])
    after = {r.metadata["doc_id"] for r in rag.retrieve(QUERIES[0], 50, filter={"tenant": tenant})}
    assert str(tagged[0].id) not in after
    assert after <= before
    rag.add_documents(
        [Document(text="Zed Quill founded the Amber Lab.", id="new", metadata={"tenant": "new"})]
    )
    got = rag.retrieve("Who founded the Amber Lab?", 5, filter={"tenant": "new"})
    assert [r.metadata["doc_id"] for r in got] == ["new"]


def test_bubble_evidence_graphs_stay_inside_the_filter(strategies: dict[str, Any]) -> None:
    """The stage before ranking: anchors, paths and evidence graphs use only allowed parts."""
    rag: BubbleRAG = strategies["bubble"]
    kg = rag.kg
    rng = random.Random(3)
    row_of = {cid: i for i, cid in enumerate(rag._table.ids)}
    seen_edges = 0
    for _ in range(40):
        where = random_where(rng, depth=1)
        passing = _passing(rag, where)
        if not passing:
            continue
        rows = {row_of[c] for c in passing if c in row_of}
        for query in QUERIES[:3]:
            for ceg in rag.evidence_graphs(query, filter=where):
                for e in [*ceg.edges, *ceg.expanded_edges]:
                    assert kg.edge_chunk[e] in rows, (where, query)
                    seen_edges += 1
                for n in ceg.nodes:
                    assert rows.intersection(kg.node_chunks[n]), (where, query)
    assert seen_edges > 20
