"""LangChain retrievers over any bridge-rag :class:`~core.strategies.base.Strategy`.

:class:`StrategyRetriever` is the one generic adapter: it writes the whole lifecycle once
(``from_documents``, ``from_vectorstore``, ``load``, ``save``, ``add_documents``,
``delete_documents``). A named retriever (:class:`BridgeRetriever`, :class:`UMGRetriever`,
:class:`BubbleRetriever`) only declares its strategy and its own fields, plus a constructor
where the strategy really has one of its own (``from_networkx``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from core.adapters import as_chunk_store, chroma_collection
from core.adapters.lifecycle import StrategyAdapter, narrowed_filter, with_store_embedder
from core.embed import LangChainEmbedder
from core.store import ChunkStore
from core.strategies.base import Strategy, check_doc_ids
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.umg import UMGRAG
from core.types import Document as CoreDocument
from core.types import Retrieved

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "StrategyRetriever",
    "UMGRetriever",
    "chroma_store_parts",
    "core_documents",
    "from_langchain_document",
    "to_langchain_document",
]


def to_langchain_document(r: Retrieved) -> Document:
    """Converts a core retrieval result into a LangChain document.

    Args:
        r: The result.

    Returns:
        A document whose ``page_content`` is the result's text, whose ``id`` is the result's id,
        and whose metadata is the result's metadata (provenance included) plus ``"id"`` and
        ``"score"``.
    """
    return Document(page_content=r.text, metadata={**r.metadata, "id": r.id, "score": r.score}, id=r.id)


def from_langchain_document(d: Document) -> CoreDocument:
    """Converts a LangChain document into a core input document.

    Args:
        d: The LangChain document.

    Returns:
        A core document with ``d.page_content`` as text and a copy of ``d.metadata``. Its id is
        ``d.id`` when set, else the metadata's ``"id"`` or ``"doc_id"`` (stringified), else None
        (the strategy then derives one from the text).

    Raises:
        TypeError: ``d`` is not a LangChain document.
    """
    if not isinstance(d, Document):
        raise TypeError(f"expected a langchain_core Document, got {type(d).__name__}")
    metadata = dict(d.metadata)
    doc_id: Any = d.id
    if doc_id is None:
        doc_id = metadata.get("id", metadata.get("doc_id"))
    return CoreDocument(text=d.page_content, id=None if doc_id is None else str(doc_id), metadata=metadata)


def core_documents(documents: Iterable[Document]) -> list[CoreDocument]:
    """LangChain documents as core documents.

    Raises:
        TypeError: A single document or string instead of a list of documents, or an item
            that is not a LangChain document.
    """
    if isinstance(documents, Document | str):
        raise TypeError(
            f"expected a list of LangChain Documents, got a single {type(documents).__name__}; "
            "wrap it in a list"
        )
    if not isinstance(documents, Iterable):
        hint = ""
        if callable(getattr(documents, "as_retriever", None)):
            hint = "; for the documents already in a Chroma store, use from_vectorstore(store)"
        raise TypeError(f"expected a list of LangChain Documents, got {type(documents).__name__}{hint}")
    return [from_langchain_document(d) for d in documents]


def chroma_store_parts(vectorstore: Any) -> tuple[ChunkStore, LangChainEmbedder]:
    """A ``langchain_chroma.Chroma`` store's collection and embedding function, read as they are.

    Raises:
        TypeError: ``vectorstore`` is not a Chroma store.
        ValueError: The store has no embedding function.
    """
    collection = chroma_collection(vectorstore, "from_vectorstore expects a langchain_chroma.Chroma store")
    embedding = getattr(vectorstore, "embeddings", None)
    if embedding is None:
        raise ValueError("the Chroma store has no embedding function; create it with embedding_function=...")
    return ChunkStore(collection), LangChainEmbedder(embedding)


def _embedder(embedding: Embeddings | None) -> Any:
    return None if embedding is None else LangChainEmbedder(embedding)


class StrategyRetriever(BaseRetriever, StrategyAdapter):
    """LangChain retriever over any bridge-rag strategy.

    Each call runs ``strategy.retrieve(query, k=k, **options)`` and turns every result into a
    :class:`~langchain_core.documents.Document` that keeps the strategy's provenance metadata
    and adds ``"id"`` and ``"score"``. The options are, lowest precedence first: the named
    retriever's own fields (``depth``, ``parent_promotion``, ... when not None), then
    :attr:`search_kwargs`, then the keyword arguments given to ``invoke``.

    Setup:
        Install the LangChain extra:

        ```bash
        pip install "bridge-rag[langchain]"
        ```

    Key init args:
        strategy: Strategy
            The built core strategy to query (anything meeting ``core.strategies.Searchable``).
        k: int
            Number of documents to return (default 4); ``invoke(query, k=n)`` overrides it.
        search_kwargs: dict[str, Any]
            Extra options for ``strategy.retrieve`` (for example ``{"depth": 2}``, or a
            metadata filter in Chroma's ``where`` syntax: ``{"filter": {"tenant": "acme"}}``,
            as ``Chroma.as_retriever`` takes it); keyword arguments given to ``invoke``
            override them, except a ``filter``: ``invoke(q, filter=...)`` narrows the
            retriever's own (a row must pass both), so a tenant's retriever is never widened.

    Instantiate:
        ```python
        from langchain_bridge import StrategyRetriever

        retriever = StrategyRetriever(strategy=strategy, k=4, search_kwargs={"depth": 2})
        ```

    Usage:
        ```python
        docs = retriever.invoke("Which tower is in Paris?")
        docs = retriever.invoke("Which tower is in Paris?", k=2)
        docs = await retriever.ainvoke("Which tower is in Paris?")
        print(docs[0].page_content, docs[0].metadata["score"])
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    no_strategy_hint: ClassVar[str] = "build one yourself and pass it as strategy=..."
    #: LangChain's own retriever fields: the ``from_*`` constructors pass them on.
    own_keywords: ClassVar[tuple[str, ...]] = ("tags", "metadata", "name")
    #: What LangChain's ``invoke`` leaves in ``**kwargs`` for its own use: never a search option.
    ignored_options: ClassVar[frozenset[str]] = frozenset({"verbose"})

    strategy: Any
    """The core strategy results come from (meets ``core.strategies.Searchable``)."""

    k: int = Field(default=4, ge=1, description="Number of documents to return; overridable per call.")
    """Number of documents to return; ``invoke(query, k=n)`` overrides it for one call."""

    search_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra options forwarded to strategy.retrieve."
    )
    """Extra options forwarded to ``strategy.retrieve`` (e.g. ``depth``); per-call kwargs win.

    ``{"k": n}`` (and any option field, e.g. ``{"parent_promotion": True}``) is accepted as
    LangChain's usual spelling of the field."""

    @model_validator(mode="before")
    @classmethod
    def _check_arguments(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        try:
            return cls._checked(data)
        except TypeError as e:  # pydantic reports ValueErrors as a ValidationError
            raise ValueError(str(e)) from e

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves documents with the strategy.

        Args:
            query: The query string.
            run_manager: LangChain's callback manager for this run.
            **kwargs: Per-call options: ``k`` overrides :attr:`k` (``None`` keeps it); a
                ``filter`` narrows the one in :attr:`search_kwargs` (both must pass); the rest
                override the option fields and :attr:`search_kwargs` (``None`` keeps them).

        Returns:
            The strategy's results as LangChain documents, best first.
        """
        options = self._field_options() | self.search_kwargs
        options.update({key: value for key, value in kwargs.items() if value is not None})
        if kwargs.get("filter") is not None:  # a tenant's retriever is never widened by a call
            options["filter"] = narrowed_filter(self.search_kwargs.get("filter"), kwargs["filter"])
        for name in self.ignored_options:
            options.pop(name, None)
        k = options.pop("k", self.k)
        results: list[Retrieved] = self.strategy.retrieve(query, k=k, **options)
        return [to_langchain_document(r) for r in results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves documents in a worker thread, leaving the event loop free.

        Args:
            query: The query string.
            run_manager: LangChain's async callback manager for this run.
            **kwargs: As for :meth:`_get_relevant_documents`.

        Returns:
            The strategy's results as LangChain documents, best first.
        """
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **kwargs
        )

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        embedding: Embeddings | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        collection_name: str | None = None,
        k: int | None = None,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **settings: Any,
    ) -> Self:
        """Indexes LangChain documents in Chroma and builds the strategy's structures.

        Args:
            documents: The documents; ``doc.id`` (or ``metadata["id"]``) is the document id.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2 (offline).
            persist_directory: Keep Chroma's data and the index here (reopen with :meth:`load`).
            collection_name: Chroma collection name (default: the strategy's).
            k: Number of results (default 4, or ``search_kwargs["k"]``).
            search_kwargs: Default options for every query.
            llm: Optional chat model / LLM, for the strategies that use one.
            show_progress: Show progress bars while building.
            **settings: The retriever's own fields, and the strategy's config fields (and
                constructor options such as UMG's ``splade``).

        Returns:
            The retriever.
        """
        return cls._built(
            cls._strategy_type().from_documents,
            core_documents(documents),
            top_k=k,
            search_kwargs=search_kwargs,
            collection_name=collection_name,
            embedder=_embedder(embedding),
            persist_directory=persist_directory,
            llm=llm,
            show_progress=show_progress,
            **settings,
        )

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        *,
        k: int | None = None,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **settings: Any,
    ) -> Self:
        """The one-line swap: builds the strategy over a ``langchain_chroma.Chroma`` store's documents.

        Nothing stored is re-embedded: the stored chunks and vectors are read, and queries go
        through the store's own embedding function (UMG-RAG embeds only its new sentence
        windows, which it keeps in a collection beside the store's).

        Args:
            vectorstore: A ``langchain_chroma.Chroma`` with an embedding function.
            k: Number of results (default 4, or ``search_kwargs["k"]``).
            search_kwargs: Default query options.
            llm: Optional LLM, for the strategies that use one.
            show_progress: Show progress bars.
            **settings: The retriever's own fields and the strategy's config fields.

        Returns:
            The retriever.

        Raises:
            TypeError: ``vectorstore`` is not a Chroma store.
            ValueError: The store has no embedding function, or is empty.
        """
        store, embedder = chroma_store_parts(vectorstore)
        return cls._built(
            cls._strategy_type().from_store,
            store,
            top_k=k,
            search_kwargs=search_kwargs,
            llm=llm,
            show_progress=show_progress,
            **with_store_embedder(settings, embedder, "it embeds with the vectorstore's own"),
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        embedding: Embeddings | None = None,
        k: int | None = None,
        search_kwargs: dict[str, Any] | None = None,
        store: Any = None,
        **options: Any,
    ) -> Self:
        """Reopens an index saved with ``persist_directory`` or :meth:`save` (nothing re-embedded).

        Args:
            path: The index directory.
            embedding: The embeddings the index was built with (default all-MiniLM-L6-v2).
            k: Number of results (default 4, or ``search_kwargs["k"]``).
            search_kwargs: Default query options.
            store: The Chroma collection (a ``Chroma`` / ``ChromaVectorStore``, a chromadb
                collection or a ``ChunkStore``), when it is not the embedded one under
                ``path``; for an index built over the app's vector store, that store.
            **options: The retriever's own fields (None: the index's saved default), and the
                strategy's load options (``llm``, UMG's ``splade``).

        Returns:
            The retriever.
        """
        return cls._built(
            cls._strategy_type().load,
            path,
            top_k=k,
            search_kwargs=search_kwargs,
            build=False,
            embedder=_embedder(embedding),
            store=as_chunk_store(store),
            **options,
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the strategy's structures atomically (Chroma keeps the chunks)."""
        self.strategy.save(path)

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Indexes more LangChain documents without a rebuild; returns their document ids."""
        return self._add(core_documents(documents))

    def delete_documents(self, ids: Sequence[str], *, filter: Mapping[str, Any] | None = None) -> int:
        """Removes documents by id (or by the ``source`` their chunks carry); returns chunks removed.

        Only the rows that pass both ``filter`` and the retriever's own ``search_kwargs["filter"]``
        are removed (a tenant's retriever deletes only that tenant's rows).

        Raises:
            TypeError: ``ids`` is a single string (wrap it in a list).
            ValueError: A name several documents carry, and no filter to tell them apart.
        """
        return self._delete(check_doc_ids(ids), filter, self.search_kwargs.get("filter"))


class BridgeRetriever(StrategyRetriever):
    """Bridge-RAG retriever: entity -> abstract -> chunk retrieval over a Chroma collection.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install 'bridge-rag[langchain,models]'
        ```

    Key init args:
        k: int
            Number of chunks to return (also accepted at invoke time: ``invoke(q, k=2)``).
        depth: int | None
            Expansion depth d (None: the index's; 0 unless built with another).
        include_abstracts: bool
            Also return abstract summaries as extra context documents, after the chunks.

    Instantiate:
        ```python
        from langchain_bridge import BridgeRetriever

        retriever = BridgeRetriever.from_vectorstore(vectorstore, k=4)  # the one-line swap
        retriever = BridgeRetriever.from_documents(docs, persist_directory="./bridge_index")
        retriever = BridgeRetriever.load("./bridge_index")
        ```

    Usage:
        ```python
        docs = retriever.invoke("Who directed the institute founded by Oskar Halden?")
        docs[0].metadata["matched_entities"], docs[0].metadata["depth"]
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = BridgeRAG
    option_fields: ClassVar[Mapping[str, type]] = {"depth": int, "include_abstracts": bool}
    build_fields: ClassVar[tuple[str, ...]] = ("depth",)

    depth: int | None = Field(None, description="Expansion depth d; None: the index's.")
    """Levels up and down the abstract forest to expand (``invoke(q, depth=...)`` overrides it)."""
    include_abstracts: bool | None = Field(None, description="Abstract summaries after the chunks.")
    """Return the abstracts' summaries after the chunks, as context documents."""


class UMGRetriever(StrategyRetriever):
    """UMG-RAG / UMGP-RAG retriever: uncertainty-weighted dense + sparse fusion over granularities.

    Documents become overlapping windows of 2, 4, 8, 16 and 32 sentences; dense embeddings,
    BM25 and optionally SPLADE score every size, each list weighted by the entropy of its score
    distribution. ``parent_promotion=True`` (UMGP-RAG) promotes fine hits to their parent
    windows and removes overlapping passages of a document.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[langchain,models,sparse]"
        ```

    Key init args:
        k: int
            Number of passages to return (``invoke(q, k=2)`` overrides it).
        parent_promotion: bool | None
            UMGP instead of UMG (None: the index's default, saved at build time).

    Instantiate:
        ```python
        from langchain_bridge import UMGRetriever

        retriever = UMGRetriever.from_vectorstore(vectorstore, parent_promotion=True)  # one line
        retriever = UMGRetriever.from_documents(docs, persist_directory="./umg_index", splade=True)
        retriever = UMGRetriever.load("./umg_index")
        ```

    Usage:
        ```python
        docs = retriever.invoke("Who built the telescope at the observatory?")
        docs[0].metadata["granularity"], docs[0].metadata["confidences"]
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = UMGRAG
    option_fields: ClassVar[Mapping[str, type]] = {"parent_promotion": bool}
    build_fields: ClassVar[tuple[str, ...]] = ("parent_promotion",)

    parent_promotion: bool | None = Field(
        default=None, description="UMGP (parent promotion) instead of UMG; None: the index's default."
    )
    """UMGP (promote fine hits to parent windows, de-duplicate) instead of plain UMG."""


class BubbleRetriever(StrategyRetriever):
    """BubbleRAG retriever: evidence subgraphs of a knowledge graph, mapped back to their chunks.

    The graph comes from the documents (spaCy triples offline, an LLM's with ``llm=``) or from
    any networkx graph. A query's concepts anchor groups of nodes and edges; a multi-source
    "bubble" expansion in C++ fuses low-cost paths between them into candidate evidence
    graphs, ranked by semantic cost plus a penalty for uncovered concepts.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install 'bridge-rag[langchain,models]'
        ```

    Key init args:
        k: int
            Number of chunks to return (``invoke(q, k=2)`` overrides it).
        include_triples: bool
            Also return the evidence graphs' triples as one extra document.

    Instantiate:
        ```python
        from langchain_bridge import BubbleRetriever

        retriever = BubbleRetriever.from_vectorstore(chroma_store)  # the one-line swap
        retriever = BubbleRetriever.from_documents(docs, persist_directory="./bubble_index")
        retriever = BubbleRetriever.from_networkx(graph)  # an existing graph
        ```

    Usage:
        ```python
        docs = retriever.invoke("Who married the founder of the observatory?")
        docs[0].metadata["evidence_triples"]  # over documents: the chunks behind the evidence
        # from a graph alone (no documents=), each document is an evidence graph: its text the triples
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = BubbleRAG
    option_fields: ClassVar[Mapping[str, type]] = {"include_triples": bool}

    include_triples: bool | None = Field(None, description="The evidence triples as one more document.")
    """Append the serialised triples of the kept evidence graphs (type ``evidence_graph``)."""

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        embedding: Embeddings | None = None,
        documents: Sequence[Document] | None = None,
        k: int | None = None,
        search_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **graph_options: Any,
    ) -> Self:
        """Retrieves over an existing networkx graph (no schema assumed).

        Args:
            graph: A networkx graph whose nodes and edges carry text.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2.
            documents: Optional source documents that a ``chunk`` node/edge attribute points to;
                without them each result is one evidence graph, its triples as the text.
            k: Number of results (default 4, or ``search_kwargs["k"]``).
            search_kwargs: Default query options.
            llm: Optional LLM for concepts and expansion.
            show_progress: Show progress bars.
            **graph_options: ``include_triples``, ``node_text``, ``edge_text``,
                ``chunk_attribute`` and :class:`core.strategies.bubble.BubbleConfig` fields.

        Returns:
            The retriever.
        """
        return cls._built(
            BubbleRAG.from_networkx,
            graph,
            top_k=k,
            search_kwargs=search_kwargs,
            embedder=_embedder(embedding),
            documents=None if documents is None else core_documents(documents),
            llm=llm,
            show_progress=show_progress,
            **graph_options,
        )

    def to_networkx(self) -> Any:
        """The knowledge graph as a ``networkx.MultiGraph``."""
        return self.strategy.to_networkx()
