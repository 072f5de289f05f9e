"""Metadata filters through LlamaIndex: ``MetadataFilters`` on the retriever and in a query engine.

``filters=`` is what ``VectorStoreIndex.as_retriever(filters=...)`` takes; the operators map
onto Chroma's ``where`` as LlamaIndex's own Chroma store maps them. Over random filters no
node is outside the filter (Chroma's ``get(where=...)`` is the oracle).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import chromadb
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.vector_stores.chroma import ChromaVectorStore

from core.filters import FilterError
from core.types import Document as CoreDocument
from llama_index_bridge import BridgeRetriever, BubbleRetriever, UMGRetriever
from llama_index_bridge.filters import to_chroma_where
from tests.filter_cases import TENANTS, tag_documents

QUERIES = (
    "Who founded the Halden Institute?",
    "What did Varga discover?",
    "Which river flows through Marrowick?",
)
_OPS = {
    "$eq": FilterOperator.EQ,
    "$ne": FilterOperator.NE,
    "$gt": FilterOperator.GT,
    "$gte": FilterOperator.GTE,
    "$lt": FilterOperator.LT,
    "$lte": FilterOperator.LTE,
    "$in": FilterOperator.IN,
    "$nin": FilterOperator.NIN,
}


def random_filters(rng: random.Random, depth: int = 2) -> MetadataFilters:
    items: list[MetadataFilter | MetadataFilters] = []
    for _ in range(rng.randint(1, 3)):
        if depth > 0 and rng.random() < 0.3:
            items.append(random_filters(rng, depth - 1))
            continue
        field = rng.choice(["tenant", "year"])
        op = rng.choice(list(_OPS))
        if field == "tenant":
            op = rng.choice(["$eq", "$ne", "$in", "$nin"])
            value: Any = rng.sample(TENANTS, 2) if op in ("$in", "$nin") else rng.choice(TENANTS)
        else:
            value = (
                [rng.randint(2015, 2024) for _ in range(2)]
                if op in ("$in", "$nin")
                else rng.randint(2015, 2024)
            )
        items.append(MetadataFilter(key=field, value=value, operator=_OPS[op]))
    return MetadataFilters(filters=items, condition=rng.choice([FilterCondition.AND, FilterCondition.OR]))


@pytest.fixture(scope="module")
def app_index(li_demo_docs: list[Document], make_embed_model: Any) -> VectorStoreIndex:
    tagged = tag_documents([CoreDocument(text=d.text, id=d.id_, metadata=d.metadata) for d in li_demo_docs])
    collection = chromadb.EphemeralClient().get_or_create_collection(f"lif-{uuid.uuid4().hex[:12]}")
    return VectorStoreIndex.from_documents(
        [Document(text=d.text, id_=d.id, metadata=d.metadata) for d in tagged],
        storage_context=StorageContext.from_defaults(
            vector_store=ChromaVectorStore(chroma_collection=collection)
        ),
        embed_model=make_embed_model(),
    )


@pytest.fixture(scope="module")
def swapped(app_index: VectorStoreIndex) -> dict[str, Any]:
    embed = app_index._embed_model
    return {
        cls.__name__: cls.from_vector_store(app_index.vector_store, embed_model=embed, show_progress=False)
        for cls in (BridgeRetriever, UMGRetriever, BubbleRetriever)
    }


@pytest.mark.parametrize("name", ["BridgeRetriever", "UMGRetriever", "BubbleRetriever"])
def test_random_metadata_filters_never_leak(swapped: dict[str, Any], name: str) -> None:
    base = swapped[name]
    rng = random.Random(23)
    for _ in range(50):
        filters = random_filters(rng)
        where = to_chroma_where(filters)
        passing = set(base.strategy.store.get(where=where, include_embeddings=False).ids)
        retriever = type(base)(base.strategy, k=4, filters=filters)
        nodes = retriever.retrieve(rng.choice(QUERIES))
        ids = {n.node.node_id for n in nodes}
        assert ids <= passing, (where, ids - passing)
        assert bool(nodes) == bool(passing), where


def test_filters_through_a_query_engine(swapped: dict[str, Any]) -> None:
    filters = MetadataFilters(filters=[MetadataFilter(key="tenant", value="acme")])
    retriever = BridgeRetriever(swapped["BridgeRetriever"].strategy, k=3, filters=filters)
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(QUERIES[0])
    assert response.source_nodes
    assert all(n.node.metadata["tenant"] == "acme" for n in response.source_nodes)


def test_the_mapping_matches_llamaindex_chroma_store() -> None:
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="tenant", value=["acme", "globex"], operator=FilterOperator.IN),
            MetadataFilters(
                filters=[
                    MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE),
                    MetadataFilter(key="region", value="eu"),
                ],
                condition=FilterCondition.OR,
            ),
        ]
    )
    assert to_chroma_where(filters) == {
        "$and": [
            {"tenant": {"$in": ["acme", "globex"]}},
            {"$or": [{"year": {"$gte": 2020}}, {"region": {"$eq": "eu"}}]},
        ]
    }
    assert to_chroma_where(MetadataFilters(filters=[])) is None
    assert to_chroma_where(None) is None


@pytest.mark.parametrize(
    ("filters", "named"),
    [
        (
            MetadataFilters(filters=[MetadataFilter(key="t", value="a", operator=FilterOperator.CONTAINS)]),
            "contains",
        ),
        (
            MetadataFilters(filters=[MetadataFilter(key="t", value="a", operator=FilterOperator.TEXT_MATCH)]),
            "text_match",
        ),
        (MetadataFilters(filters=[MetadataFilter(key="t", value=["a"], operator=FilterOperator.ANY)]), "any"),
        (MetadataFilters(filters=[MetadataFilter(key="t", value="a")], condition=FilterCondition.NOT), "not"),
    ],
)
def test_unsupported_operators_are_refused(
    swapped: dict[str, Any], filters: MetadataFilters, named: str
) -> None:
    with pytest.raises(FilterError, match=named):
        BridgeRetriever(swapped["BridgeRetriever"].strategy, filters=filters)


def test_a_filter_given_twice_is_an_error(swapped: dict[str, Any]) -> None:
    filters = MetadataFilters(filters=[MetadataFilter(key="tenant", value="acme")])
    with pytest.raises(ValueError, match="twice"):
        BridgeRetriever(
            swapped["BridgeRetriever"].strategy, filters=filters, search_kwargs={"filter": {"a": 1}}
        )
    with pytest.raises(TypeError, match="MetadataFilters"):
        BridgeRetriever(swapped["BridgeRetriever"].strategy, filters={"tenant": "acme"})  # type: ignore[arg-type]
