"""``llama_index_bridge.BridgeRetriever`` over real Chroma, real embeddings and the demo corpus.

Two shared indexes, never modified: one built by ``from_defaults`` over part of the demo corpus
(persisted, so the persistence tests can reopen it), and one built by ``from_vector_store`` over
the whole corpus indexed by LlamaIndex's own ``VectorStoreIndex`` in a ``ChromaVectorStore``.
Tests that insert or delete build their own small index.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chromadb
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore

from llama_index_bridge import BridgeRetriever

#: Provenance keys Bridge-RAG puts on every chunk it returns.
PROVENANCE_KEYS = (
    "strategy",
    "found_by",
    "matched_entities",
    "abstract_id",
    "abstract_level",
    "depth",
    "cosine",
)

#: The documents behind demo questions q1, q3, q5 and q7, plus related distractors.
SUBSET_IDS = (
    "marrowick",
    "corvane",
    "ilse-varga",
    "tomas-brel",
    "marrowick-observatory",
    "halden-institute",
    "oskar-halden",
    "anton-falk",
    "comet-varga",
    "lantern-festival",
    "mattias-ferrow",
    "tessel-suite",
    "corvane-conservatory",
    "clara-penhallow",
    "flood-1911",
    "pieter-ashby",
)

NEW_DOC_TEXT = (
    "Zephyrine Quill was a glassblower who opened the Quillworks studio in Marrowick in 1921. "
    "The Quillworks made lenses for lighthouses along the Bay of Corvane."
)
NEW_DOC_QUERY = "Who opened the Quillworks studio?"


def assert_same_nodes(got: Sequence[NodeWithScore], expected: Sequence[NodeWithScore]) -> None:
    assert [n.node.node_id for n in got] == [n.node.node_id for n in expected]
    assert [n.node.get_content() for n in got] == [n.node.get_content() for n in expected]
    assert [n.score for n in got] == pytest.approx([n.score for n in expected])


def doc_ids(nodes: Sequence[NodeWithScore]) -> set[str | None]:
    return {n.node.ref_doc_id for n in nodes}


@pytest.fixture(scope="module")
def subset_questions(demo_questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Demo questions whose supporting documents are all in the subset."""
    chosen = [q for q in demo_questions if set(q["supporting_ids"]) <= set(SUBSET_IDS)]
    assert len(chosen) >= 5
    return chosen


@pytest.fixture(scope="module")
def persist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("li-bridge-index")


@pytest.fixture(scope="module")
def retriever(li_demo_docs: list[Document], li_embed_model: Any, persist_dir: Path) -> BridgeRetriever:
    """Part of the demo corpus, indexed once for the module; tests must not modify it."""
    return BridgeRetriever.from_defaults(
        documents=[d for d in li_demo_docs if d.id_ in SUBSET_IDS],
        embed_model=li_embed_model,
        persist_dir=persist_dir,
        collection_name="li-demo",
        similarity_top_k=4,
        show_progress=False,
    )


@pytest.fixture
def small_retriever(
    li_demo_docs: list[Document], li_embed_model: Any, collection_name: str
) -> BridgeRetriever:
    """A small in-memory index that a test may modify."""
    ids = {"marrowick-observatory", "ilse-varga", "tomas-brel", "lantern-festival"}
    return BridgeRetriever.from_defaults(
        documents=[d for d in li_demo_docs if d.id_ in ids],
        embed_model=li_embed_model,
        collection_name=collection_name,
        similarity_top_k=3,
        show_progress=False,
    )


# --------------------------------------------------------------------------- retrieval


def test_is_a_llama_index_retriever(retriever: BridgeRetriever) -> None:
    assert isinstance(retriever, BaseRetriever)
    assert retriever.k == 4
    assert retriever.strategy.report.counts["documents"] == len(SUBSET_IDS)


def test_retrieve_returns_scored_nodes_with_provenance(
    retriever: BridgeRetriever, demo_texts: dict[str, str], demo_questions: list[dict[str, Any]]
) -> None:
    question = demo_questions[0]
    nodes = retriever.retrieve(question["question"])

    assert len(nodes) == 4
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    for n in nodes:
        node = n.node
        assert isinstance(node, TextNode)
        meta = node.metadata
        for key in PROVENANCE_KEYS:
            assert key in meta, key
        assert meta["strategy"] == "bridge"
        assert n.score == pytest.approx(meta["score"])
        # The node points to its document, and is an exact slice of it.
        assert node.ref_doc_id == meta["doc_id"]
        assert demo_texts[meta["doc_id"]][meta["start_index"] : meta["end_index"]] == node.text
        # Structured provenance stays out of what the LLM and the embedder see; the title does not.
        llm_view = node.get_content(metadata_mode=MetadataMode.LLM)
        assert "matched_entities" not in llm_view
        assert f"title: {meta['title']}" in llm_view
        assert meta["source"] == "bridge-rag demo corpus"  # the document's own metadata is kept
        assert "matched_entities" not in node.get_content(metadata_mode=MetadataMode.EMBED)
        json.dumps(meta)  # plain JSON, so nodes can be stored and serialised
    assert nodes[0].node.metadata["matched_entities"]
    assert len(doc_ids(nodes) & set(question["supporting_ids"])) >= 2


def test_every_subset_question_reaches_a_supporting_document(
    retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]
) -> None:
    missed = [
        q["id"]
        for q in subset_questions
        if not doc_ids(retriever.retrieve(q["question"])) & set(q["supporting_ids"])
    ]
    assert missed == []


def test_retrieve_accepts_a_query_bundle_and_embeds_the_query_once(
    retriever: BridgeRetriever, li_embed_model: Any, subset_questions: list[dict[str, Any]]
) -> None:
    question = subset_questions[1]["question"]
    before = len(li_embed_model.queries)
    nodes = retriever.retrieve(QueryBundle(query_str=question))
    assert li_embed_model.queries[before:] == [question]
    assert_same_nodes(nodes, retriever.retrieve(question))


async def test_aretrieve_matches_retrieve(
    retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]
) -> None:
    for q in subset_questions[:3]:
        assert_same_nodes(await retriever.aretrieve(q["question"]), retriever.retrieve(q["question"]))


async def test_concurrent_aretrieve_matches_serial(
    retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]
) -> None:
    queries = [q["question"] for q in subset_questions] * 2
    serial = {q: retriever.retrieve(q) for q in dict.fromkeys(queries)}
    results = await asyncio.gather(*(retriever.aretrieve(q) for q in queries))
    for q, got in zip(queries, results, strict=True):
        assert_same_nodes(got, serial[q])


def test_top_k_and_search_kwargs(retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]) -> None:
    question = subset_questions[2]["question"]
    two = BridgeRetriever(retriever.strategy, k=2)
    assert len(two.retrieve(question)) == 2
    flat = BridgeRetriever(retriever.strategy, k=6, search_kwargs={"depth": 0})
    nodes = flat.retrieve(question)
    assert len(nodes) == 6
    assert all(n.node.metadata["depth"] == 0 for n in nodes)
    direct = retriever.strategy.retrieve(question, k=6, depth=0)
    assert [n.node.node_id for n in nodes] == [r.id for r in direct]
    with pytest.raises(ValueError, match="search_kwargs may not contain"):
        BridgeRetriever(retriever.strategy, search_kwargs={"k": 3})
    with pytest.raises(ValueError, match=r"BridgeRAG\.retrieve does not take: alpha; it takes depth"):
        BridgeRetriever(retriever.strategy, search_kwargs={"alpha": 0.5})


def test_include_abstracts(retriever: BridgeRetriever, demo_questions: list[dict[str, Any]]) -> None:
    question = demo_questions[0]["question"]
    with_abstracts = BridgeRetriever(retriever.strategy, search_kwargs={"include_abstracts": True})
    nodes = with_abstracts.retrieve(question)
    chunks = [n for n in nodes if n.node.metadata.get("type") != "abstract"]
    abstracts = [n for n in nodes if n.node.metadata.get("type") == "abstract"]
    assert nodes[: len(chunks)] == chunks
    assert_same_nodes(chunks, retriever.retrieve(question))
    assert [n.node.ref_doc_id for n in abstracts] == list(dict.fromkeys(n.node.ref_doc_id for n in chunks))
    for n in abstracts:
        assert n.node.node_id.startswith("abstract::")
        assert n.node.get_content().strip()
        assert "entities: [" not in n.node.get_content(metadata_mode=MetadataMode.LLM)


def test_bad_queries_are_errors(retriever: BridgeRetriever) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        retriever.retrieve("   ")
    with pytest.raises(ValueError, match="above the limit"):
        retriever.retrieve("Marrowick " * 2_000)


# --------------------------------------------------------------------------- query engine


def test_query_engine_with_mock_llm(retriever: BridgeRetriever, demo_questions: list[dict[str, Any]]) -> None:
    question = demo_questions[0]["question"]
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(question)

    expected = retriever.retrieve(question)
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in expected]
    # MockLLM answers with its prompt: the question and the retrieved chunks made it there, the
    # structured provenance did not.
    answer = str(response)
    assert question in answer
    for n in expected:
        assert n.node.get_content()[:80] in answer
    assert "matched_entities" not in answer


async def test_query_engine_aquery(
    retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]
) -> None:
    question = subset_questions[3]["question"]
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
    response = await engine.aquery(question)
    assert [n.node.node_id for n in response.source_nodes] == [
        n.node.node_id for n in retriever.retrieve(question)
    ]
    assert str(response).strip()


# --------------------------------------------------------------------------- persistence


def test_persist_and_from_persist_dir(
    retriever: BridgeRetriever, tmp_path: Path, li_embed_model: Any, subset_questions: list[dict[str, Any]]
) -> None:
    retriever.persist(tmp_path)
    loaded = BridgeRetriever.from_persist_dir(tmp_path, embed_model=li_embed_model, similarity_top_k=4)
    assert loaded.strategy is not retriever.strategy
    before = len(li_embed_model.embedded_texts)
    for q in subset_questions:
        got, expected = loaded.retrieve(q["question"]), retriever.retrieve(q["question"])
        assert_same_nodes(got, expected)
        assert [n.node.metadata for n in got] == [n.node.metadata for n in expected]
    assert len(li_embed_model.embedded_texts) == before  # loading re-embeds nothing


def test_from_defaults_with_a_persist_dir_and_no_documents_loads(
    retriever: BridgeRetriever, persist_dir: Path, li_embed_model: Any, subset_questions: list[dict[str, Any]]
) -> None:
    loaded = BridgeRetriever.from_defaults(
        documents=None, persist_dir=persist_dir, embed_model=li_embed_model, similarity_top_k=3
    )
    assert loaded.k == 3
    assert loaded.strategy.num_chunks == retriever.strategy.num_chunks
    for q in subset_questions[:3]:
        assert_same_nodes(
            loaded.retrieve(q["question"]), BridgeRetriever(retriever.strategy, k=3).retrieve(q["question"])
        )


def test_from_defaults_needs_documents_or_a_persist_dir() -> None:
    with pytest.raises(ValueError, match="pass documents="):
        BridgeRetriever.from_defaults()


def test_an_in_memory_index_is_reopened_with_its_store(
    small_retriever: BridgeRetriever, tmp_path: Path, li_embed_model: Any
) -> None:
    small_retriever.persist(tmp_path)
    with pytest.raises(ValueError, match="pass store="):
        BridgeRetriever.from_persist_dir(tmp_path, embed_model=li_embed_model)
    loaded = BridgeRetriever.from_persist_dir(
        tmp_path, embed_model=li_embed_model, similarity_top_k=3, store=small_retriever.strategy.store
    )
    question = "Who built the telescope of the Marrowick Observatory?"
    assert_same_nodes(loaded.retrieve(question), small_retriever.retrieve(question))


# --------------------------------------------------------------------------- insert / delete


def test_insert_and_delete_ref_doc(small_retriever: BridgeRetriever) -> None:
    store = small_retriever.strategy.store
    n_before = store.count()
    assert "quill" not in doc_ids(small_retriever.retrieve(NEW_DOC_QUERY))

    assert small_retriever.insert(
        [Document(text=NEW_DOC_TEXT, id_="quill", metadata={"title": "Quill"})]
    ) == ["quill"]
    top = small_retriever.retrieve(NEW_DOC_QUERY)[0]
    assert top.node.ref_doc_id == "quill"
    assert top.node.get_content() == NEW_DOC_TEXT
    assert top.node.metadata["title"] == "Quill"
    # Nodes are accepted too.
    assert small_retriever.insert(
        [TextNode(text="The Quillworks kiln was rebuilt in 1930.", id_="kiln")]
    ) == ["kiln"]
    assert store.count() == n_before + 2

    assert small_retriever.delete_ref_doc("quill") == 1
    assert store.count() == n_before + 1
    assert "quill" not in doc_ids(small_retriever.retrieve(NEW_DOC_QUERY))
    assert small_retriever.delete_ref_doc("no-such-document") == 0

    n_chunks = sum(1 for cid in store.get().ids if cid.startswith("ilse-varga::"))
    assert n_chunks >= 2
    assert small_retriever.delete_ref_doc("ilse-varga") == n_chunks
    assert "ilse-varga" not in doc_ids(small_retriever.retrieve("Ilse Varga's comet"))


def test_insert_a_single_document_like_llama_index(small_retriever: BridgeRetriever) -> None:
    # LlamaIndex's indexes take one document: index.insert(document). Indexing it, or a TypeError
    # that says to pass a list, would both be fine.
    try:
        ids = small_retriever.insert(Document(text=NEW_DOC_TEXT, id_="quill"))  # type: ignore[arg-type]
    except TypeError as exc:
        problem = str(exc)
        acceptable = "list" in problem or "sequence" in problem
    else:
        acceptable = ids == ["quill"]
    assert acceptable


# --------------------------------------------------------------------------- over a ChromaVectorStore


@pytest.fixture(scope="module")
def vs_embed_model(make_embed_model: Any) -> Any:
    """The app's embedding model (own records)."""
    return make_embed_model()


@pytest.fixture(scope="module")
def chroma_collection() -> Any:
    return chromadb.EphemeralClient().get_or_create_collection(f"li-app-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def vector_index(
    li_demo_docs: list[Document], chroma_collection: Any, vs_embed_model: Any
) -> VectorStoreIndex:
    """The demo corpus indexed by LlamaIndex itself into a ChromaVectorStore."""
    vector_store = ChromaVectorStore(chroma_collection=chroma_collection)
    return VectorStoreIndex.from_documents(
        li_demo_docs,
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=vs_embed_model,
    )


@pytest.fixture(scope="module")
def vs_retriever(vector_index: VectorStoreIndex, vs_embed_model: Any) -> BridgeRetriever:
    return BridgeRetriever.from_vector_store(
        vector_index.vector_store, embed_model=vs_embed_model, show_progress=False
    )


def test_from_vector_store_groups_nodes_by_document(
    vs_retriever: BridgeRetriever,
    chroma_collection: Any,
    vector_index: VectorStoreIndex,
    vs_embed_model: Any,
    li_demo_docs: list[Document],
) -> None:
    counts = vs_retriever.strategy.report.counts
    assert counts["chunks"] == chroma_collection.count()
    assert counts["documents"] == 46  # via the ref_doc_id / doc_id LlamaIndex stores on every node
    # Nothing was re-embedded: each document went through the model once, when LlamaIndex indexed
    # it; Bridge read the stored vectors.
    texts = vs_embed_model.embedded_texts
    assert [sum(d.text[:80] in t for t in texts) for d in li_demo_docs] == [1] * len(li_demo_docs)
    # LlamaIndex keeps the text in Chroma, not in a docstore; Bridge needs nothing else.
    assert len(vector_index.storage_context.docstore.docs) == 0


def test_from_vector_store_answers_a_multi_hop_question(
    vs_retriever: BridgeRetriever,
    vector_index: VectorStoreIndex,
    chroma_collection: Any,
    vs_embed_model: Any,
    demo_questions: list[dict[str, Any]],
) -> None:
    question = demo_questions[0]
    before = len(vs_embed_model.queries)
    nodes = vs_retriever.retrieve(question["question"])
    assert vs_embed_model.queries[before:] == [question["question"]]  # the app's model embeds the query

    assert len(nodes) == 4
    stored = chroma_collection.get(ids=[n.node.node_id for n in nodes], include=["documents"])
    text_of = dict(zip(stored["ids"], stored["documents"], strict=True))
    for n in nodes:
        assert n.node.get_content() == text_of[n.node.node_id]  # LlamaIndex's own node ids and texts
        for key in PROVENANCE_KEYS:
            assert key in n.node.metadata, key
    assert nodes[0].node.metadata["matched_entities"]
    assert len(doc_ids(nodes) & set(question["supporting_ids"])) >= 2

    # The same nodes as LlamaIndex's own retriever over the store: same ids, same documents.
    plain = vector_index.as_retriever(similarity_top_k=4).retrieve(question["question"])
    ref_doc_of = {n.node.node_id: n.node.ref_doc_id for n in plain}
    shared = set(ref_doc_of) & {n.node.node_id for n in nodes}
    assert shared
    assert all(ref_doc_of[n.node.node_id] == n.node.ref_doc_id for n in nodes if n.node.node_id in shared)


def test_query_engine_over_the_vector_store(
    vs_retriever: BridgeRetriever, demo_questions: list[dict[str, Any]]
) -> None:
    question = demo_questions[3]["question"]
    response = RetrieverQueryEngine.from_args(vs_retriever, llm=MockLLM()).query(question)
    assert len(response.source_nodes) == 4
    assert question in str(response)


def test_llama_index_private_metadata_stays_out_of_the_prompt(
    vs_retriever: BridgeRetriever, demo_questions: list[dict[str, Any]]
) -> None:
    for n in vs_retriever.retrieve(demo_questions[0]["question"]):
        llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "_node_content" not in llm_view
        assert "_node_type" not in llm_view


def test_delete_ref_doc_and_insert_over_the_vector_store(
    li_demo_docs: list[Document], make_embed_model: Any, collection_name: str
) -> None:
    embed_model = make_embed_model()
    collection = chromadb.EphemeralClient().get_or_create_collection(collection_name)
    vector_store = ChromaVectorStore(chroma_collection=collection)
    small = [d for d in li_demo_docs if d.id_ in {"marrowick-courier", "ilse-varga", "tomas-brel"}]
    index = VectorStoreIndex.from_documents(
        small,
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=embed_model,
    )
    retriever = BridgeRetriever.from_vector_store(
        vector_store, embed_model=embed_model, similarity_top_k=2, show_progress=False
    )
    assert retriever.strategy.report.counts["documents"] == 3

    n_before = collection.count()
    n_courier = len(collection.get(where={"ref_doc_id": "marrowick-courier"})["ids"])
    assert n_courier >= 1
    assert retriever.delete_ref_doc("marrowick-courier") == n_courier
    assert collection.count() == n_before - n_courier
    assert collection.get(where={"ref_doc_id": "marrowick-courier"})["ids"] == []
    assert "marrowick-courier" not in doc_ids(
        index.as_retriever(similarity_top_k=3).retrieve("Marrowick Courier")
    )

    retriever.insert([Document(text=NEW_DOC_TEXT, id_="quill")])
    assert retriever.retrieve(NEW_DOC_QUERY)[0].node.ref_doc_id == "quill"


def test_from_vector_store_errors(chroma_collection: Any, vector_index: VectorStoreIndex) -> None:
    with pytest.raises(TypeError, match="expects a ChromaVectorStore"):
        BridgeRetriever.from_vector_store(chroma_collection)
    with pytest.raises(TypeError, match="expects a ChromaVectorStore"):
        BridgeRetriever.from_vector_store(vector_index)
    with pytest.raises(ValueError, match="dimension"):
        BridgeRetriever.from_vector_store(
            vector_index.vector_store, embed_model=MockEmbedding(embed_dim=8), show_progress=False
        )
    empty = ChromaVectorStore(
        chroma_collection=chromadb.EphemeralClient().get_or_create_collection(f"empty-{uuid.uuid4().hex[:8]}")
    )
    with pytest.raises(ValueError, match="collection is empty"):
        BridgeRetriever.from_vector_store(empty, embed_model=MockEmbedding(embed_dim=8), show_progress=False)
    with pytest.raises(TypeError, match=r"embedder= is not a setting .* as embed_model="):
        BridgeRetriever.from_vector_store(vector_index.vector_store, embedder=MockEmbedding(embed_dim=8))


def test_nodes_stored_without_a_source_document_are_each_their_own_document() -> None:
    """LlamaIndex stores such a node's ``doc_id`` / ``ref_doc_id`` as the text "None": no name."""
    from core.entities import RuleBasedEntityExtractor

    collection = chromadb.EphemeralClient().get_or_create_collection(f"bare-{uuid.uuid4().hex[:8]}")
    store = ChromaVectorStore(chroma_collection=collection)
    embed = MockEmbedding(embed_dim=8)
    nodes = [
        TextNode(text="Falcon launches in May. Acme builds Falcon in Ohio.", id_="node0"),
        TextNode(text="Zeta ships in June. Globex builds Zeta in Texas.", id_="node1"),
    ]
    VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    assert collection.get(ids=["node0"])["metadatas"][0]["ref_doc_id"] == "None"  # as LlamaIndex writes it
    retriever = BridgeRetriever.from_vector_store(
        store, embed_model=embed, entity_extractor=RuleBasedEntityExtractor(), show_progress=False
    )
    assert sorted(retriever.strategy.chunk_table.doc_rows) == ["node0", "node1"]
    assert retriever.delete_ref_doc("node0") == 1
    assert collection.get()["ids"] == ["node1"]
