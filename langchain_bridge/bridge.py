"""``BridgeRetriever``: Bridge-RAG as a LangChain retriever, in one line."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field

from core.embed import LangChainEmbedder
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document

__all__ = ["BridgeRetriever"]


def _embedder(embedding: Embeddings | None) -> Any:
    return None if embedding is None else LangChainEmbedder(embedding)


class BridgeRetriever(StrategyRetriever):
    """Bridge-RAG retriever: entity -> abstract -> chunk retrieval over a Chroma collection.

    Setup:
        .. code-block:: bash

            pip install torch==2.13.0 && pip install 'bridge-rag[langchain,models]'

    Key init args:
        strategy: BridgeRAG
            The built index (use the constructors below rather than building it yourself).
        k: int
            Number of chunks to return (also accepted at invoke time: ``invoke(q, k=2)``).
        depth: int | None
            Expansion depth d (default: the index's, 2).
        include_abstracts: bool
            Also return abstract summaries as extra context documents, after the chunks.
        search_kwargs: dict[str, Any]
            Any other ``BridgeRAG.retrieve`` options; they override the fields above.

    Instantiate:
        .. code-block:: python

            from langchain_bridge import BridgeRetriever

            # over an existing langchain-chroma store: the one-line swap
            retriever = BridgeRetriever.from_vectorstore(vectorstore, k=4)
            # or over new documents, in an embedded Chroma under ./bridge_index
            retriever = BridgeRetriever.from_documents(docs, persist_directory="./bridge_index")
            # or reopen a saved index
            retriever = BridgeRetriever.load("./bridge_index")

    Usage:
        .. code-block:: python

            docs = retriever.invoke("Who directed the institute founded by Oskar Halden?")
            docs[0].metadata["matched_entities"], docs[0].metadata["depth"]

    Use within a chain:
        .. code-block:: python

            chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
    """

    depth: int | None = Field(
        default=None, ge=0, description="Expansion depth d; None uses the index's setting (2 by default)."
    )
    """Levels up and down the abstract forest to expand (``invoke(q, depth=...)`` overrides it)."""
    include_abstracts: bool = Field(
        default=False, description="Also return the summaries of the abstracts the chunks came through."
    )
    """Return the abstracts' summaries after the chunks, as context documents."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves chunks with Bridge-RAG.

        Args:
            query: The query string.
            run_manager: LangChain's callback manager for this run.
            **kwargs: Per-call options (``k``, ``depth``, ``include_abstracts``) override the fields.

        Returns:
            The chunks (and, with ``include_abstracts``, abstract summaries) as documents.
        """
        for name, value in (("depth", self.depth), ("include_abstracts", self.include_abstracts)):
            if name not in kwargs and name not in self.search_kwargs and value not in (None, False):
                kwargs[name] = value
        return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        embedding: Embeddings | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        collection_name: str = "bridge_rag",
        k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **bridge_settings: Any,
    ) -> BridgeRetriever:
        """Indexes LangChain documents in Chroma and builds the Bridge structures.

        Args:
            documents: The documents; ``doc.id`` (or ``metadata["id"]``) is the document id.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2 (offline).
            persist_directory: Keep Chroma's data and the index here (reopen with :meth:`load`).
            collection_name: Chroma collection name.
            k: Number of results.
            search_kwargs: Default options for every query (``depth``, ``include_abstracts``).
            llm: Optional chat model / LLM for abstract summaries.
            show_progress: Show progress bars while building.
            **bridge_settings: :class:`core.strategies.bridge.BridgeConfig` fields.

        Returns:
            The retriever.
        """
        strategy = BridgeRAG.from_documents(
            [from_langchain_document(d) for d in documents],
            embedder=_embedder(embedding),
            persist_directory=persist_directory,
            collection_name=collection_name,
            llm=llm,
            show_progress=show_progress,
            **bridge_settings,
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
        **bridge_settings: Any,
    ) -> BridgeRetriever:
        """Builds Bridge-RAG over the documents already in a ``langchain_chroma.Chroma`` store.

        Nothing is re-embedded: the stored vectors are used, and queries go through the
        store's own embedding function.

        Args:
            vectorstore: A ``langchain_chroma.Chroma`` with an embedding function.
            k: Number of results.
            search_kwargs: Default query options.
            llm: Optional LLM for abstract summaries.
            show_progress: Show progress bars.
            **bridge_settings: :class:`core.strategies.bridge.BridgeConfig` fields.

        Returns:
            The retriever.

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
        strategy = BridgeRAG.from_store(
            ChunkStore(collection),
            embedder=LangChainEmbedder(embedding),
            llm=llm,
            show_progress=show_progress,
            **bridge_settings,
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
    ) -> BridgeRetriever:
        """Reopens an index saved with ``persist_directory`` or :meth:`save`.

        Args:
            path: The index directory.
            embedding: The embeddings the index was built with (default all-MiniLM-L6-v2).
            k: Number of results.
            search_kwargs: Default query options.
            store: The Chroma collection, when it is not the embedded one under ``path``.

        Returns:
            The retriever.
        """
        strategy = BridgeRAG.load(path, embedder=_embedder(embedding), store=store)
        return cls(strategy=strategy, k=k, search_kwargs=search_kwargs or {})

    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the Bridge structures atomically (Chroma keeps the chunks)."""
        self.strategy.save(path)

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
