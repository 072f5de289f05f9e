"""Metadata filters through LangChain: ``search_kwargs={"filter": ...}`` and ``invoke(q, filter=...)``.

The app had ``vectorstore.as_retriever(search_kwargs={"filter": where})`` over a
``langchain_chroma.Chroma`` store; the one-line swap keeps the filter. Over random tenants
and random ``where`` filters, no returned document is outside the filter (Chroma's own
``get(where=...)`` is the oracle) and a filter that matches something returns something.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document

from core.filters import FilterError
from langchain_bridge import BridgeRetriever, BubbleRetriever, UMGRetriever
from tests.filter_cases import random_where, tag_documents
from tests.langchain.conftest import CountingEmbeddings

QUERIES = (
    "Who founded the Halden Institute?",
    "What did Varga discover?",
    "Which river flows through Marrowick?",
)


@pytest.fixture(scope="module")
def app_store(lc_demo_docs: list[Document], make_embeddings: Any) -> Chroma:
    from core.types import Document as CoreDocument

    tagged = tag_documents(
        [CoreDocument(text=d.page_content, id=d.id, metadata=d.metadata) for d in lc_demo_docs]
    )
    vs = Chroma(collection_name=f"lcf-{uuid.uuid4().hex[:8]}", embedding_function=make_embeddings())
    vs.add_documents([Document(page_content=d.text, id=d.id, metadata=d.metadata) for d in tagged])
    return vs


@pytest.fixture(scope="module")
def swapped(app_store: Chroma) -> dict[str, Any]:
    return {
        cls.__name__: cls.from_vectorstore(app_store, k=4, show_progress=False)
        for cls in (BridgeRetriever, UMGRetriever, BubbleRetriever)
    }


def _passing(retriever: Any, where: dict[str, Any]) -> set[str] | None:
    try:
        return set(retriever.strategy.store.get(where=where, include_embeddings=False).ids)
    except ValueError:
        return None


@pytest.mark.parametrize("name", ["BridgeRetriever", "UMGRetriever", "BubbleRetriever"])
def test_random_filters_through_invoke_and_search_kwargs(swapped: dict[str, Any], name: str) -> None:
    retriever = swapped[name]
    rng = random.Random(17)
    queries = 0
    for _ in range(60):
        where = random_where(rng)
        passing = _passing(retriever, where)
        if passing is None:
            with pytest.raises(FilterError):
                retriever.invoke(QUERIES[0], filter=where)
            continue
        query = rng.choice(QUERIES)
        fixed = retriever.model_copy(update={"search_kwargs": {"filter": where}})
        for docs in (retriever.invoke(query, filter=where), fixed.invoke(query)):
            queries += 1
            ids = {d.metadata["id"] for d in docs}
            assert ids <= passing, (where, ids - passing)
            assert bool(docs) == bool(passing), where
    assert queries > 80


def test_the_swap_keeps_the_apps_filter(app_store: Chroma) -> None:
    where = {"$and": [{"tenant": {"$in": ["acme", "globex"]}}, {"year": {"$gte": 2018}}]}
    before = app_store.as_retriever(search_kwargs={"filter": where, "k": 4})
    after = BridgeRetriever.from_vectorstore(
        app_store, search_kwargs={"filter": where, "k": 4}, show_progress=False
    )
    for query in QUERIES:
        for d in [*before.invoke(query), *after.invoke(query)]:
            assert d.metadata["tenant"] in ("acme", "globex")
            assert d.metadata["year"] >= 2018


def test_a_bad_filter_is_refused_with_its_operator_named(swapped: dict[str, Any]) -> None:
    with pytest.raises(FilterError, match=r"\$regex"):
        swapped["BridgeRetriever"].invoke(QUERIES[0], filter={"tenant": {"$regex": "ac.*"}})


def test_filter_embeds_nothing_when_refused(make_embeddings: Any, app_store: Chroma) -> None:
    retriever = BridgeRetriever.from_vectorstore(app_store, show_progress=False)
    embeddings: CountingEmbeddings = app_store.embeddings  # type: ignore[assignment]
    calls = embeddings.query_calls
    with pytest.raises(FilterError):
        retriever.invoke(QUERIES[0], filter={"a": 1, "b": 2})
    assert embeddings.query_calls == calls


@pytest.mark.parametrize("name", ["BridgeRetriever", "UMGRetriever", "BubbleRetriever"])
def test_a_calls_filter_narrows_a_tenants_retriever_and_never_widens_it(
    swapped: dict[str, Any], name: str
) -> None:
    """A service that passes a request's ``filter=`` to a tenant's retriever keeps to that tenant."""
    acme = swapped[name].model_copy(update={"search_kwargs": {"filter": {"tenant": "acme"}}})
    tenants = {m["tenant"] for m in acme.strategy.store.get(include_embeddings=False).metadatas}
    assert len(tenants) > 1
    for query in QUERIES:
        for call_filter in ({}, {"tenant": {"$ne": "acme"}}, {"year": {"$gte": 2015}}):
            docs = acme.invoke(query, filter=call_filter)
            assert {d.metadata["tenant"] for d in docs} <= {"acme"}, call_filter
        assert acme.invoke(query, filter={}), "an empty filter adds nothing to the retriever's own"
        recent = acme.invoke(query, filter={"year": {"$gte": 2020}})
        assert all(d.metadata["year"] >= 2020 and d.metadata["tenant"] == "acme" for d in recent)
        passing = acme.strategy.store.get(
            where={"$and": [{"tenant": "acme"}, {"year": {"$gte": 2020}}]}, include_embeddings=False
        ).ids
        assert bool(recent) == bool(passing)  # narrowed, not emptied
