"""``BubbleRetriever``: BubbleRAG (evidence-subgraph retrieval) as a LlamaIndex retriever."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import BaseNode

from core.embed import LlamaIndexEmbedder
from core.store import ChunkStore
from core.strategies.bubble import BubbleRAG
from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document

__all__ = ["BubbleRetriever"]


def _embedder(embed_model: Any) -> Any:
    return None if embed_model is None else LlamaIndexEmbedder(embed_model)


class BubbleRetriever(StrategyRetriever):
    """BubbleRAG retriever for LlamaIndex: evidence subgraphs of a knowledge graph, as chunks.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models]"
        ```

    Instantiate:
        ```python
        from llama_index_bridge import BubbleRetriever

        retriever = BubbleRetriever.from_defaults(documents=docs, persist_dir="./bubble_index")
        retriever = BubbleRetriever.from_vector_store(chroma_vector_store, embed_model=embed_model)
        retriever = BubbleRetriever.from_networkx(graph)
        ```

    Usage:
        ```python
        from llama_index.core.query_engine import RetrieverQueryEngine

        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        print(engine.query("Who married the founder of the observatory?"))
        ```
    """

    def __init__(self, strategy: BubbleRAG, **kwargs: Any) -> None:
        """Wraps a BubbleRAG index (keyword arguments as for :class:`StrategyRetriever`).

        Raises:
            TypeError: ``strategy`` is not a BubbleRAG.
        """
        if not isinstance(strategy, BubbleRAG):
            raise TypeError(
                f"strategy must be a core.strategies.bubble.BubbleRAG, got {type(strategy).__name__}"
            )
        super().__init__(strategy, **kwargs)

    @classmethod
    def from_defaults(
        cls,
        documents: Sequence[BaseNode] | None = None,
        *,
        embed_model: Any = None,
        persist_dir: str | os.PathLike[str] | None = None,
        collection_name: str = "bubble_rag",
        similarity_top_k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bubble_settings: Any,
    ) -> BubbleRetriever:
        """Indexes LlamaIndex documents in Chroma and extracts their knowledge graph.

        With ``documents`` None and an existing ``persist_dir``, the saved index is loaded.

        Args:
            documents: LlamaIndex documents or nodes (their text and metadata).
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2 (offline).
            persist_dir: Keep Chroma's data and the graph here.
            collection_name: Chroma collection name.
            similarity_top_k: Number of results.
            search_kwargs: Default query options (``include_triples``).
            llm: Optional LlamaIndex LLM for triples, concepts and expansion.
            show_progress: Show progress bars while building.
            **bubble_settings: :class:`core.strategies.bubble.BubbleConfig` fields.

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
        strategy = BubbleRAG.from_documents(
            [from_llama_document(d) for d in documents],
            embedder=_embedder(embed_model),
            persist_directory=persist_dir,
            collection_name=collection_name,
            llm=llm,
            show_progress=show_progress,
            **bubble_settings,
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
        **bubble_settings: Any,
    ) -> BubbleRetriever:
        """Builds the graph from the nodes already in a ``ChromaVectorStore`` (not re-embedded).

        Raises:
            TypeError: ``vector_store`` is not a Chroma vector store.
        """
        collection = getattr(vector_store, "_collection", None)
        if collection is None:
            raise TypeError(
                f"from_vector_store expects a ChromaVectorStore, got {type(vector_store).__name__}"
            )
        strategy = BubbleRAG.from_store(
            ChunkStore(collection),
            embedder=_embedder(embed_model),
            llm=llm,
            show_progress=show_progress,
            **bubble_settings,
        )
        return cls(strategy, k=similarity_top_k, search_kwargs=search_kwargs)

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        embed_model: Any = None,
        documents: Sequence[BaseNode] | None = None,
        similarity_top_k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **graph_options: Any,
    ) -> BubbleRetriever:
        """Retrieves over an existing networkx graph (no schema assumed).

        Args:
            graph: A networkx graph whose nodes and edges carry text.
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2.
            documents: Optional source documents a ``chunk`` node/edge attribute points to.
            similarity_top_k: Number of results.
            search_kwargs: Default query options.
            llm: Optional LLM for concepts and expansion.
            show_progress: Show progress bars.
            **graph_options: ``node_text``, ``edge_text``, ``chunk_attribute`` and
                :class:`core.strategies.bubble.BubbleConfig` fields.

        Returns:
            The retriever.
        """
        strategy = BubbleRAG.from_networkx(
            graph,
            embedder=_embedder(embed_model),
            documents=None if documents is None else [from_llama_document(d) for d in documents],
            llm=llm,
            show_progress=show_progress,
            **graph_options,
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
        llm: Any = None,
    ) -> BubbleRetriever:
        """Loads an index saved with :meth:`persist` (or built with ``persist_dir``)."""
        strategy = BubbleRAG.load(persist_dir, embedder=_embedder(embed_model), store=store, llm=llm)
        return cls(strategy, k=similarity_top_k, search_kwargs=search_kwargs)

    def persist(self, persist_dir: str | os.PathLike[str]) -> None:
        """Saves the graph atomically (Chroma keeps the chunks)."""
        self.strategy.save(persist_dir)

    def to_networkx(self) -> Any:
        """The knowledge graph as a ``networkx.MultiGraph``."""
        strategy: BubbleRAG = self.strategy  # type: ignore[assignment]
        return strategy.kg.to_networkx()

    def insert(self, documents: BaseNode | Sequence[BaseNode]) -> list[str]:
        """Indexes one document or several without a rebuild; returns their ids."""
        docs = [documents] if isinstance(documents, BaseNode) else list(documents)
        ids: list[str] = self.strategy.add_documents([from_llama_document(d) for d in docs])
        return ids

    def delete_ref_doc(self, ref_doc_id: str) -> int:
        """Removes one document (all its chunks); returns how many chunks were removed."""
        removed: int = self.strategy.delete_documents([ref_doc_id])
        return removed
