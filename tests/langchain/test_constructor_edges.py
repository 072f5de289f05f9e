"""LangChain spellings at the edges: search_kwargs' k and build fields, custom promotion keys."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from core.strategies.lifecycle import InMemoryStoreWarning
from langchain_bridge import BridgeRetriever, ParentPromotionCompressor, UMGRetriever

DOCS = [
    Document("The Eiffel Tower is in Paris. It was built by Gustave Eiffel.", id="paris"),
    Document("The Colosseum is in Rome. It was built under Vespasian.", id="rome"),
    Document("Osaka Castle is in Osaka. It was built by Toyotomi Hideyoshi.", id="osaka"),
]


def test_search_kwargs_k_is_the_number_of_results_in_every_constructor(
    lc_embeddings: Any, tmp_path: Path
) -> None:
    built = BridgeRetriever.from_documents(
        DOCS,
        embedding=lc_embeddings,
        persist_directory=tmp_path / "index",
        search_kwargs={"k": 2},
        show_progress=False,
    )
    assert built.k == 2
    assert "k" not in built.search_kwargs
    assert len(built.invoke("Who built the Eiffel Tower?")) == 2
    reopened = BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings, search_kwargs={"k": 1})
    assert reopened.k == 1
    assert BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings).k == 4


def test_a_build_field_in_search_kwargs_is_saved_as_the_default(lc_embeddings: Any, tmp_path: Path) -> None:
    built = UMGRetriever.from_documents(
        DOCS,
        embedding=lc_embeddings,
        persist_directory=tmp_path / "umg",
        collection_name=f"edges-{uuid.uuid4().hex[:8]}",
        search_kwargs={"parent_promotion": True},
        show_progress=False,
    )
    assert built.parent_promotion is True
    assert built.strategy.default_options["parent_promotion"] is True
    assert UMGRetriever.load(tmp_path / "umg", embedding=lc_embeddings).parent_promotion is True


def test_custom_offset_keys_leave_a_field_named_like_the_defaults_alone() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(12))
    hit = "Sentence number 5 talks about topic 5."
    compressor = ParentPromotionCompressor(
        texts={"d": text},
        parent_size=4,
        stride=2,
        fine_max_sentences=1,
        start_key="char_start",
        end_key="char_end",
    )
    doc = Document(
        hit, metadata={"doc_id": "d", "char_start": text.index(hit), "start_index": 3, "score": 1.0}
    )
    (out,) = compressor.compress_documents([doc], "q")
    assert out.metadata["promoted"] is True
    assert out.metadata["char_end"] > out.metadata["char_start"]
    assert out.metadata["start_index"] == 3  # the caller's own field, as it was
    assert "end_index" not in out.metadata


def test_a_saved_swap_reopens_with_the_store_the_app_has(lc_embeddings: Any, tmp_path: Path) -> None:
    """``load(store=...)`` takes the app's ``Chroma`` or its collection, not only a ChunkStore."""
    from langchain_chroma import Chroma

    store = Chroma(
        collection_name=f"edges-{uuid.uuid4().hex[:8]}",
        embedding_function=lc_embeddings,
        persist_directory=str(tmp_path / "app-chroma"),
    )
    store.add_documents(DOCS)
    BridgeRetriever.from_vectorstore(store, show_progress=False).save(tmp_path / "index")
    with pytest.raises(ValueError, match=r"a Chroma collection it was given .* pass store="):
        BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings)
    question = "Who built the Eiffel Tower?"
    for given in (store, store._collection):
        reopened = BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings, store=given)
        assert reopened.invoke(question)[0].id == "paris"
    with pytest.raises(TypeError, match="store must be the Chroma collection"):
        BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings, store=str(tmp_path))


def test_saving_an_in_memory_index_warns_that_it_reopens_only_in_this_process(
    lc_embeddings: Any, tmp_path: Path
) -> None:
    retriever = BridgeRetriever.from_documents(DOCS, embedding=lc_embeddings, show_progress=False)
    with pytest.warns(InMemoryStoreWarning, match="persist_directory"):
        retriever.save(tmp_path / "index")
    from langchain_chroma import Chroma

    app_store = Chroma(collection_name=f"edges-{uuid.uuid4().hex[:8]}", embedding_function=lc_embeddings)
    app_store.add_documents(DOCS)  # the app's own in-memory store
    with pytest.warns(InMemoryStoreWarning):
        BridgeRetriever.from_vectorstore(app_store, show_progress=False).save(tmp_path / "swap")
    with pytest.raises(ValueError, match="in-memory Chroma collection, which ends with the process"):
        BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings)


def test_a_single_document_where_a_list_is_expected_is_named(lc_embeddings: Any) -> None:
    """It was iterated into its fields: 'expected a langchain_core Document, got tuple'."""
    from langchain_bridge import EntityHopCompressor

    for build in (
        lambda: BridgeRetriever.from_documents(DOCS[0], embedding=lc_embeddings),  # type: ignore[arg-type]
        lambda: EntityHopCompressor.from_documents(DOCS[0], embedding=lc_embeddings),  # type: ignore[arg-type]
        lambda: BridgeRetriever.from_documents("Paris", embedding=lc_embeddings),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match=r"got a single (Document|str); wrap it in a list"):
            build()


def test_a_custom_strategy_that_passes_options_on_keeps_its_search_kwargs(lc_embeddings: Any) -> None:
    """A subclass whose retrieve takes **options may accept any option: nothing is refused for it."""
    from core.strategies.bridge import BridgeRAG
    from core.types import Document as CoreDocument
    from langchain_bridge import StrategyRetriever

    class Boosted(BridgeRAG):
        def retrieve(self, query: str, k: int | None = None, **options: Any) -> Any:
            options.pop("boost", None)
            return super().retrieve(query, k, **options)

    rag = Boosted.from_documents(
        [CoreDocument(d.page_content, id=d.id, metadata={"tenant": d.id}) for d in DOCS],
        embedder=lc_embeddings,
        show_progress=False,
    )
    retriever = StrategyRetriever(strategy=rag, search_kwargs={"boost": 2, "filter": {"tenant": "rome"}})
    assert [d.metadata["tenant"] for d in retriever.invoke("Who built it?")] == ["rome"]


def test_a_delete_takes_parsed_filters_too(lc_embeddings: Any) -> None:
    from core.filters import parse_filter
    from core.strategies.bridge import BridgeRAG
    from core.types import Document as CoreDocument
    from langchain_bridge import StrategyRetriever

    rag = BridgeRAG.from_documents(
        [CoreDocument(d.page_content, id=d.id, metadata={"tenant": "a"}) for d in DOCS],
        embedder=lc_embeddings,
        show_progress=False,
    )
    tenant = StrategyRetriever(strategy=rag, search_kwargs={"filter": parse_filter({"tenant": "a"})})
    assert tenant.delete_documents(["paris"], filter=parse_filter({"tenant": {"$ne": "b"}})) == 1
    assert tenant.delete_documents(["rome"]) == 1


def test_the_from_constructors_pass_langchains_own_fields(lc_embeddings: Any, tmp_path: Path) -> None:
    """``tags``, ``metadata`` and ``name`` reach the retriever (``Chroma.as_retriever`` takes them too)."""
    built = BridgeRetriever.from_documents(
        DOCS,
        embedding=lc_embeddings,
        persist_directory=tmp_path / "index",
        tags=["docs"],
        metadata={"app": "faq"},
        name="faq",
        show_progress=False,
    )
    assert (built.tags, built.metadata, built.get_name()) == (["docs"], {"app": "faq"}, "faq")
    reopened = BridgeRetriever.load(tmp_path / "index", embedding=lc_embeddings, tags=["again"])
    assert reopened.tags == ["again"]
