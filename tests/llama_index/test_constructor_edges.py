"""LlamaIndex spellings at the edges: top-k, build fields in search_kwargs, parsed nodes, storage keys."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore

from llama_index_bridge import BridgeRetriever, ParentPromotionPostprocessor

DOCS = [
    Document(
        text="The Eiffel Tower is in Paris. It was built by Gustave Eiffel.",
        id_="paris",
        metadata={"title": "Paris"},
    ),
    Document(
        text="The Colosseum is in Rome. It was built under Vespasian.", id_="rome", metadata={"title": "Rome"}
    ),
    Document(
        text="Osaka Castle is in Osaka. It was built by Toyotomi Hideyoshi.",
        id_="osaka",
        metadata={"title": "Osaka"},
    ),
]


def _name() -> str:
    return f"edges-{uuid.uuid4().hex[:8]}"


def test_top_k_is_spelt_similarity_top_k_and_can_be_set_later(li_embed_model: Any) -> None:
    with pytest.raises(TypeError, match=r"similarity_top_k=\.\.\., not k="):
        BridgeRetriever.from_defaults(DOCS, embed_model=li_embed_model, collection_name=_name(), k=2)
    retriever = BridgeRetriever.from_defaults(
        DOCS, embed_model=li_embed_model, collection_name=_name(), show_progress=False
    )
    assert retriever.similarity_top_k == 4
    retriever.similarity_top_k = 1  # as VectorIndexRetriever users set it
    assert len(retriever.retrieve("Who built the Eiffel Tower?")) == 1
    with pytest.raises(ValueError, match="k must be >= 1"):
        retriever.similarity_top_k = 0
    wrapped = BridgeRetriever(retriever.strategy, similarity_top_k=2)  # VectorIndexRetriever's spelling
    assert wrapped.k == 2
    assert BridgeRetriever(retriever.strategy, k=2, similarity_top_k=2).k == 2
    with pytest.raises(ValueError, match="k=3 and similarity_top_k=2 disagree"):
        BridgeRetriever(retriever.strategy, k=3, similarity_top_k=2)


def test_the_from_constructors_pass_the_retrievers_own_keywords(li_embed_model: Any, tmp_path: Path) -> None:
    """``callback_manager``, ``verbose`` and ``hidden_metadata_keys`` reach the retriever."""
    from llama_index.core.callbacks import CallbackManager

    manager = CallbackManager([])
    built = BridgeRetriever.from_defaults(
        DOCS,
        embed_model=li_embed_model,
        persist_dir=tmp_path / "index",
        callback_manager=manager,
        verbose=True,
        hidden_metadata_keys=["title"],
        show_progress=False,
    )
    assert built.callback_manager is manager
    assert built._verbose
    assert built.retrieve("Who built the Eiffel Tower?")[0].node.excluded_llm_metadata_keys == ["title"]
    loaded = BridgeRetriever.from_persist_dir(
        tmp_path / "index", embed_model=li_embed_model, callback_manager=manager
    )
    assert loaded.callback_manager is manager


def test_one_span_per_retrieve(li_embed_model: Any) -> None:
    """The query-type check overrides ``retrieve``; LlamaIndex must still open one span per call."""
    import asyncio

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    retriever = BridgeRetriever.from_defaults(
        DOCS, embed_model=li_embed_model, collection_name=_name(), show_progress=False
    )
    handler = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(handler)
    try:
        retriever.retrieve("Who built the Eiffel Tower?")
        asyncio.run(retriever.aretrieve("Who built the Eiffel Tower?"))
    finally:
        root.span_handlers.remove(handler)
    names = [span.id_.rsplit("-", 5)[0] for span in handler.completed_spans]
    assert names.count("BridgeRetriever.retrieve") == 1
    assert names.count("BridgeRetriever.aretrieve") == 1


def test_a_build_field_in_search_kwargs_is_saved_as_the_default(li_embed_model: Any, tmp_path: Path) -> None:
    built = BridgeRetriever.from_defaults(
        DOCS,
        embed_model=li_embed_model,
        persist_dir=tmp_path / "index",
        search_kwargs={"depth": 1},
        show_progress=False,
    )
    assert built.depth == 1
    assert built.strategy.default_options["depth"] == 1
    reopened = BridgeRetriever.from_persist_dir(tmp_path / "index", embed_model=li_embed_model)
    assert reopened.depth == 1


def test_the_apps_own_delete_ref_doc_reaches_what_we_inserted(li_embed_model: Any) -> None:
    """The app keeps its ``VectorStoreIndex`` for deletes: its ``delete_ref_doc`` finds our chunks,
    and ``sync()`` then takes the delete in."""
    store = ChromaVectorStore(chroma_collection=chromadb.EphemeralClient().get_or_create_collection(_name()))
    index = VectorStoreIndex.from_documents(
        DOCS[:2], storage_context=StorageContext.from_defaults(vector_store=store), embed_model=li_embed_model
    )
    retriever = BridgeRetriever.from_vector_store(store, embed_model=li_embed_model, show_progress=False)
    osaka = Document(text=DOCS[2].text, id_="osaka", metadata={"document_id": "INV-7"})  # a field of its own
    retriever.insert(osaka)
    assert "osaka" in {n.node.ref_doc_id for n in retriever.retrieve("Who built Osaka Castle?")}
    index.delete_ref_doc("osaka")  # the app's own delete, through LlamaIndex
    assert store._collection.get(where={"doc_id": "osaka"})["ids"] == []
    assert retriever.sync() == (0, 1, 0)
    assert "osaka" not in {n.node.ref_doc_id for n in retriever.retrieve("Who built Osaka Castle?")}


def test_inserted_nodes_are_deleted_by_their_documents_id(li_embed_model: Any) -> None:
    retriever = BridgeRetriever.from_defaults(
        DOCS[:2], embed_model=li_embed_model, collection_name=_name(), show_progress=False
    )
    long_osaka = Document(text=" ".join([DOCS[2].text] * 12), id_="osaka", metadata={"title": "Osaka"})
    nodes = SentenceSplitter(chunk_size=64, chunk_overlap=0).get_nodes_from_documents([long_osaka])
    assert len(nodes) >= 2
    assert {n.ref_doc_id for n in nodes} == {"osaka"}
    retriever.insert(nodes)
    assert any("Osaka" in n.node.get_content() for n in retriever.retrieve("Who built Osaka Castle?"))
    assert retriever.delete_ref_doc("osaka") == len(nodes)
    assert not any("Osaka" in n.node.get_content() for n in retriever.retrieve("Who built Osaka Castle?"))


def test_nodes_with_their_own_parser_metadata_are_deleted_by_their_documents_id(li_embed_model: Any) -> None:
    """SentenceWindowNodeParser gives each node its own window: still one document to a delete.

    Two tenants' documents of the same id stay two, as for any other name.
    """
    from llama_index.core.node_parser import SentenceWindowNodeParser

    tenants = [
        Document(text=DOCS[2].text + " Its keep has five floors.", id_="osaka", metadata={"tenant": t})
        for t in ("acme", "globex")
    ]
    parser = SentenceWindowNodeParser.from_defaults(window_size=1)
    nodes = [n for doc in tenants for n in parser.get_nodes_from_documents([doc])]  # one id: one call each
    assert {n.metadata["tenant"] for n in nodes} == {"acme", "globex"}
    assert len({n.metadata["window"] for n in nodes}) > 1  # the nodes of one document differ
    retriever = BridgeRetriever.from_defaults(
        DOCS[:2], embed_model=li_embed_model, collection_name=_name(), show_progress=False
    )
    retriever.insert(nodes)
    with pytest.raises(ValueError, match="documents carry the name 'osaka'"):
        retriever.delete_ref_doc("osaka")  # whose? the tenants' metadata differ
    per_tenant = len(nodes) // 2
    assert retriever.delete_ref_doc("osaka", filter={"tenant": "acme"}) == per_tenant
    assert retriever.delete_ref_doc("osaka") == per_tenant  # one tenant's nodes left: one document
    assert not any("Osaka" in n.node.get_content() for n in retriever.retrieve("Who built Osaka Castle?"))


def test_llama_index_storage_keys_stay_out_of_the_llms_view(li_embed_model: Any, tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    store = ChromaVectorStore(chroma_collection=client.create_collection(_name()))
    VectorStoreIndex.from_documents(
        DOCS, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=li_embed_model
    )
    retriever = BridgeRetriever.from_vector_store(store, embed_model=li_embed_model, show_progress=False)
    node = retriever.retrieve("Who built the Eiffel Tower?")[0].node
    assert {"document_id", "ref_doc_id"} <= set(node.metadata)  # kept for the app
    view = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: Paris" in view
    for key in ("document_id", "ref_doc_id", "doc_id"):
        assert f"{key}:" not in view


def _with_a_hidden_key(docs: list[Document]) -> list[Document]:
    """The documents with a ``reviewer`` key that each one excludes from its LLM view."""
    return [
        Document(
            text=d.text,
            id_=d.id_,
            metadata={**d.metadata, "reviewer": "Secret Person"},
            excluded_llm_metadata_keys=["reviewer"],
        )
        for d in docs
    ]


def test_a_documents_own_llm_exclusions_hold_in_the_nodes_returned(
    li_embed_model: Any, tmp_path: Path
) -> None:
    """As LlamaIndex's splitters carry a document's excluded keys to its nodes, so do we."""
    built = BridgeRetriever.from_defaults(
        documents=_with_a_hidden_key(DOCS), embed_model=li_embed_model, show_progress=False
    )
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    store = ChromaVectorStore(chroma_collection=client.create_collection(_name()))
    VectorStoreIndex.from_documents(
        _with_a_hidden_key(DOCS),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=li_embed_model,
    )
    swapped = BridgeRetriever.from_vector_store(store, embed_model=li_embed_model, show_progress=False)
    chosen = BridgeRetriever(built.strategy, hidden_metadata_keys=["title"])
    for retriever in (built, swapped, chosen):
        node = retriever.retrieve("Who built the Eiffel Tower?")[0].node
        assert node.metadata["reviewer"] == "Secret Person"  # kept for the app
        view = node.get_content(metadata_mode=MetadataMode.LLM)
        assert "Eiffel" in view
        assert "Secret Person" not in view
        assert "_hidden_metadata_keys" not in view


def test_promotion_reads_a_start_without_an_end_as_langchains_compressor_does() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(12))
    hit = "Sentence number 5 talks about topic 5."
    node = TextNode(text=hit, metadata={"doc_id": "d", "start_index": text.index(hit)})
    post = ParentPromotionPostprocessor(texts={"d": text}, parent_size=4, stride=2, fine_max_sentences=1)
    (out,) = post.postprocess_nodes([NodeWithScore(node=node, score=1.0)])
    assert out.node.metadata["promoted"] is True
    assert hit in out.node.get_content(metadata_mode=MetadataMode.NONE)
    assert out.node.metadata["end_index"] > out.node.metadata["start_index"]
