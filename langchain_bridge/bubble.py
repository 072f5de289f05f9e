"""``BubbleRetriever``: BubbleRAG (evidence-subgraph retrieval) as a LangChain retriever."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field, field_validator

from core.embed import LangChainEmbedder
from core.store import ChunkStore
from core.strategies.bubble import BubbleRAG
from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document

__all__ = ["BubbleRetriever"]


def _embedder(embedding: Embeddings | None) -> Any:
    return None if embedding is None else LangChainEmbedder(embedding)


class BubbleRetriever(StrategyRetriever):
    """BubbleRAG retriever: evidence subgraphs of a knowledge graph, mapped back to their chunks.

    The graph is extracted from the documents (spaCy triples offline by default, an LLM's
    when ``llm`` is given) or taken from any networkx graph. A query's concepts anchor groups
    of nodes and edges; a multi-source "bubble" expansion in C++ fuses low-cost paths between
    the groups into candidate evidence graphs, ranked by semantic cost plus a penalty for
    uncovered concepts; their source chunks are returned, each with its evidence triples.

    Setup:
        .. code-block:: bash

            pip install torch==2.13.0 && pip install 'bridge-rag[langchain,models]'

    Key init args:
        strategy: BubbleRAG
            The built index (use the constructors below).
        k: int
            Number of chunks to return (``invoke(q, k=2)`` overrides it).
        include_triples: bool
            Also return the evidence graphs' triples as one extra document.

    Instantiate:
        .. code-block:: python

            from langchain_bridge import BubbleRetriever

            retriever = BubbleRetriever.from_documents(docs, persist_directory="./bubble_index")
            retriever = BubbleRetriever.from_vectorstore(chroma_store)  # the one-line swap
            retriever = BubbleRetriever.from_networkx(graph)            # an existing graph

    Usage:
        .. code-block:: python

            docs = retriever.invoke("Who married the founder of the observatory?")
            docs[0].metadata["evidence_triples"], docs[0].metadata["covered_concepts"]

    Use within a chain:
        .. code-block:: python

            chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
    """

    include_triples: bool = Field(
        default=False, description="Also return the evidence graphs' triples as one extra document."
    )
    """Append the serialised triples of the kept evidence graphs (type ``evidence_graph``)."""

    @field_validator("strategy")
    @classmethod
    def _check_bubble(cls, value: Any) -> Any:
        if not isinstance(value, BubbleRAG):
            raise ValueError(
                f"strategy must be a core.strategies.bubble.BubbleRAG, got {type(value).__name__}"
            )
        return value

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves chunks with BubbleRAG.

        Args:
            query: The query string.
            run_manager: LangChain's callback manager for this run.
            **kwargs: Per-call options (``k``, ``include_triples``) override the fields.

        Returns:
            The chunks as documents (plus the evidence triples with ``include_triples``).
        """
        if (
            self.include_triples
            and "include_triples" not in kwargs
            and "include_triples" not in self.search_kwargs
        ):
            kwargs["include_triples"] = True
        return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        embedding: Embeddings | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        collection_name: str = "bubble_rag",
        k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bubble_settings: Any,
    ) -> BubbleRetriever:
        """Indexes LangChain documents in Chroma and extracts their knowledge graph.

        Args:
            documents: The documents; ``doc.id`` (or ``metadata["id"]``) is the document id.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2 (offline).
            persist_directory: Keep Chroma's data and the graph here (reopen with :meth:`load`).
            collection_name: Chroma collection name.
            k: Number of results.
            search_kwargs: Default options for every query (``include_triples``).
            llm: Optional chat model / LLM for triples, concepts and expansion.
            show_progress: Show progress bars while building.
            **bubble_settings: :class:`core.strategies.bubble.BubbleConfig` fields.

        Returns:
            The retriever.
        """
        strategy = BubbleRAG.from_documents(
            [from_langchain_document(d) for d in documents],
            embedder=_embedder(embedding),
            persist_directory=persist_directory,
            collection_name=collection_name,
            llm=llm,
            show_progress=show_progress,
            **bubble_settings,
        )
        return cls(strategy=strategy, k=k, search_kwargs=search_kwargs or {})

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        *,
        k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bubble_settings: Any,
    ) -> BubbleRetriever:
        """Builds the graph from the documents already in a ``langchain_chroma.Chroma`` store.

        Nothing is re-embedded: the stored chunk vectors are used; nodes, edges and queries
        go through the store's embedding function.

        Raises:
            TypeError: ``vectorstore`` is not a Chroma store.
            ValueError: The store has no embedding function, or is empty.
        """
        collection = getattr(vectorstore, "_collection", None)
        if collection is None:
            raise TypeError(
                f"from_vectorstore expects a langchain_chroma.Chroma store, got {type(vectorstore).__name__}"
            )
        embedding = getattr(vectorstore, "embeddings", None)
        if embedding is None:
            raise ValueError(
                "the Chroma store has no embedding function; create it with embedding_function=..."
            )
        strategy = BubbleRAG.from_store(
            ChunkStore(collection),
            embedder=LangChainEmbedder(embedding),
            llm=llm,
            show_progress=show_progress,
            **bubble_settings,
        )
        return cls(strategy=strategy, k=k, search_kwargs=search_kwargs or {})

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        embedding: Embeddings | None = None,
        documents: Sequence[Document] | None = None,
        k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **graph_options: Any,
    ) -> BubbleRetriever:
        """Retrieves over an existing networkx graph (no schema assumed).

        Args:
            graph: A networkx graph whose nodes and edges carry text.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2.
            documents: Optional source documents that a ``chunk`` node/edge attribute points to;
                without them each result is one evidence graph, its triples as the text.
            k: Number of results.
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
            embedder=_embedder(embedding),
            documents=None if documents is None else [from_langchain_document(d) for d in documents],
            llm=llm,
            show_progress=show_progress,
            **graph_options,
        )
        return cls(strategy=strategy, k=k, search_kwargs=search_kwargs or {})

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        embedding: Embeddings | None = None,
        k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        store: ChunkStore | None = None,
        llm: Any = None,
    ) -> BubbleRetriever:
        """Reopens an index saved with ``persist_directory`` or :meth:`save` (nothing re-embedded)."""
        strategy = BubbleRAG.load(path, embedder=_embedder(embedding), store=store, llm=llm)
        return cls(strategy=strategy, k=k, search_kwargs=search_kwargs or {})

    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the graph atomically (Chroma keeps the chunks)."""
        self.strategy.save(path)

    def to_networkx(self) -> Any:
        """The knowledge graph as a ``networkx.MultiGraph``."""
        return self.strategy.kg.to_networkx()

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Indexes more LangChain documents without a rebuild; returns their document ids."""
        ids: list[str] = self.strategy.add_documents([from_langchain_document(d) for d in documents])
        return ids

    def delete_documents(self, ids: Sequence[str]) -> int:
        """Removes documents by id; returns how many chunks were removed.

        Raises:
            TypeError: ``ids`` is a single string (wrap it in a list).
        """
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of document ids, not a single string; wrap it in a list")
        removed: int = self.strategy.delete_documents(list(ids))
        return removed
