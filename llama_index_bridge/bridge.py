"""``BridgeRetriever``: Bridge-RAG as a LlamaIndex retriever."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import BaseNode

from core.embed import LlamaIndexEmbedder
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document

__all__ = ["BridgeRetriever"]


def _embedder(embed_model: Any) -> Any:
    return None if embed_model is None else LlamaIndexEmbedder(embed_model)


class BridgeRetriever(StrategyRetriever):
    """Bridge-RAG retriever for LlamaIndex: entity -> abstract -> chunk retrieval over Chroma.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models]"
        ```

    Instantiate:
        ```python
        from llama_index_bridge import BridgeRetriever

        retriever = BridgeRetriever.from_defaults(documents=docs, persist_dir="./bridge_index")
        retriever = BridgeRetriever.from_vector_store(chroma_vector_store, embed_model=embed_model)
        retriever = BridgeRetriever.from_persist_dir("./bridge_index")
        ```

    Usage:
        ```python
        from llama_index.core.query_engine import RetrieverQueryEngine

        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        print(engine.query("Who directed the institute founded by Oskar Halden?"))
        ```
    """

    @classmethod
    def from_defaults(
        cls,
        documents: Sequence[BaseNode] | None = None,
        *,
        embed_model: Any = None,
        persist_dir: str | os.PathLike[str] | None = None,
        collection_name: str = "bridge_rag",
        similarity_top_k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bridge_settings: Any,
    ) -> BridgeRetriever:
        """Indexes LlamaIndex documents in Chroma and builds the Bridge structures.

        With ``documents`` None and an existing ``persist_dir``, the saved index is loaded.

        Args:
            documents: LlamaIndex documents or nodes (their text and metadata).
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2 (offline).
            persist_dir: Keep Chroma's data and the index here.
            collection_name: Chroma collection name.
            similarity_top_k: Number of results.
            search_kwargs: Default query options (``depth``, ``include_abstracts``).
            llm: Optional LlamaIndex LLM for abstract summaries.
            show_progress: Show progress bars while building.
            **bridge_settings: :class:`core.strategies.bridge.BridgeConfig` fields.

        Returns:
            The retriever.

        Raises:
            ValueError: Neither documents nor a saved index were given.
        """
        if documents is None:
            if persist_dir is None:
                raise ValueError("pass documents=... to build an index, or persist_dir=... to load one")
            return cls.from_persist_dir(
                persist_dir,
                embed_model=embed_model,
                similarity_top_k=similarity_top_k,
                search_kwargs=search_kwargs,
            )
        strategy = BridgeRAG.from_documents(
            [from_llama_document(d) for d in documents],
            embedder=_embedder(embed_model),
            persist_directory=persist_dir,
            collection_name=collection_name,
            llm=llm,
            show_progress=show_progress,
            **bridge_settings,
        )
        return cls(strategy, k=similarity_top_k, search_kwargs=search_kwargs)

    @classmethod
    def from_vector_store(
        cls,
        vector_store: Any,
        *,
        embed_model: Any = None,
        similarity_top_k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bridge_settings: Any,
    ) -> BridgeRetriever:
        """Builds Bridge-RAG over the nodes already in a ``ChromaVectorStore``.

        Nothing is re-embedded. Pass the ``embed_model`` the store was filled with (the
        vector store itself does not know it); the dimensions are checked.

        Args:
            vector_store: A ``llama_index.vector_stores.chroma.ChromaVectorStore``.
            embed_model: The LlamaIndex embedding model used for the stored vectors.
            similarity_top_k: Number of results.
            search_kwargs: Default query options.
            llm: Optional LLM for abstract summaries.
            show_progress: Show progress bars.
            **bridge_settings: :class:`core.strategies.bridge.BridgeConfig` fields.

        Returns:
            The retriever.

        Raises:
            TypeError: ``vector_store`` is not a Chroma vector store.
        """
        collection = getattr(vector_store, "_collection", None)
        if collection is None:
            raise TypeError(
                f"from_vector_store expects a ChromaVectorStore, got {type(vector_store).__name__}"
            )
        strategy = BridgeRAG.from_store(
            ChunkStore(collection),
            embedder=_embedder(embed_model),
            llm=llm,
            show_progress=show_progress,
            **bridge_settings,
        )
        return cls(strategy, k=similarity_top_k, search_kwargs=search_kwargs)

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | os.PathLike[str],
        *,
        embed_model: Any = None,
        similarity_top_k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        store: ChunkStore | None = None,
    ) -> BridgeRetriever:
        """Loads an index saved with :meth:`persist` (or built with ``persist_dir``).

        Args:
            persist_dir: The index directory.
            embed_model: The embedding model the index was built with (default all-MiniLM-L6-v2).
            similarity_top_k: Number of results.
            search_kwargs: Default query options.
            store: The Chroma collection, when it is not the embedded one under ``persist_dir``.

        Returns:
            The retriever.
        """
        strategy = BridgeRAG.load(persist_dir, embedder=_embedder(embed_model), store=store)
        return cls(strategy, k=similarity_top_k, search_kwargs=search_kwargs)

    def persist(self, persist_dir: str | os.PathLike[str]) -> None:
        """Saves the Bridge structures atomically (Chroma keeps the chunks)."""
        self.strategy.save(persist_dir)

    def insert(self, documents: BaseNode | Sequence[BaseNode]) -> list[str]:
        """Indexes one document (as ``index.insert(doc)``) or several, without a rebuild.

        Returns:
            The document ids.
        """
        docs = [documents] if isinstance(documents, BaseNode) else list(documents)
        ids: list[str] = self.strategy.add_documents([from_llama_document(d) for d in docs])
        return ids

    def delete_ref_doc(self, ref_doc_id: str) -> int:
        """Removes one document (all its chunks); returns how many chunks were removed."""
        removed: int = self.strategy.delete_documents([ref_doc_id])
        return removed
