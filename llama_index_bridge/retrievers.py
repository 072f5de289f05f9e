"""LlamaIndex retrievers over any bridge-rag :class:`~core.strategies.base.Strategy`.

:class:`StrategyRetriever` is the one generic adapter: it writes the whole lifecycle once
(``from_defaults``, ``from_vector_store``, ``from_persist_dir``, ``persist``, ``insert``,
``delete_ref_doc``). A named retriever (:class:`BridgeRetriever`, :class:`UMGRetriever`,
:class:`BubbleRetriever`) only declares its strategy and its own fields, plus a constructor
where the strategy really has one of its own (``from_networkx``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    QueryType,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.schema import Document as LlamaDocument
from llama_index.core.vector_stores.types import MetadataFilters
from llama_index_instrumentation.dispatcher import DISPATCHER_SPAN_DECORATED_ATTR

from core.adapters import as_chunk_store, chroma_collection
from core.adapters.lifecycle import StrategyAdapter, with_store_embedder
from core.embed import LlamaIndexEmbedder
from core.store import ChunkStore
from core.strategies.base import COMMON_PROVENANCE_KEYS, Searchable, Strategy, check_k
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.common import HIDDEN_KEYS_KEY, hidden_keys, jsonable
from core.strategies.umg import UMGRAG
from core.types import Document as CoreDocument
from core.types import Retrieved
from llama_index_bridge.filters import to_chroma_where

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "StrategyRetriever",
    "UMGRetriever",
    "check_query_type",
    "core_documents",
    "default_hidden_keys",
    "from_llama_document",
    "hiding",
    "in_base_span",
    "to_node_with_score",
]


#: Metadata keys naming a result's source document, in order of preference.
_SOURCE_KEYS = ("ref_doc_id", "doc_id")


def to_node_with_score(
    r: Retrieved,
    *,
    hidden_metadata_keys: Collection[str] | None = None,
    provenance_keys: Collection[str] = COMMON_PROVENANCE_KEYS,
) -> NodeWithScore:
    """Converts a core retrieval result into a LlamaIndex node with its score.

    The node's metadata is the result's metadata made JSON-friendly (see below), so nodes can be
    serialised, persisted and stored in vector stores. The document the chunk comes from becomes
    the node's ``SOURCE`` relationship (its ``ref_doc_id``): the metadata's ``"ref_doc_id"`` (the
    LlamaIndex document a node was parsed from, or the one LlamaIndex's vector store recorded),
    else its ``"doc_id"``.

    Args:
        r: The result.
        hidden_metadata_keys: Metadata keys to keep out of the text the LLM and embedders see
            (they stay in ``node.metadata``). None: :func:`default_hidden_keys`. The keys the
            source document excluded from its LLM view are hidden either way.
        provenance_keys: The provenance keys of the strategy the result came from (its
            ``provenance_keys``); default the keys every strategy writes.

    Returns:
        ``NodeWithScore(node=TextNode(text=r.text, id_=r.id, metadata=...), score=r.score)``.
    """
    metadata: dict[str, Any] = jsonable(r.metadata)
    if hidden_metadata_keys is None:
        hidden = default_hidden_keys(metadata, provenance_keys)
    else:
        hidden = [key for key in hidden_metadata_keys if key in metadata]
    own = [HIDDEN_KEYS_KEY, *hidden_keys(metadata)]  # the document's own exclusions hold too
    hidden = list(dict.fromkeys([*hidden, *(key for key in own if key in metadata)]))
    relationships: dict[NodeRelationship, RelatedNodeInfo | list[RelatedNodeInfo]] = {}
    source = next((v for v in map(metadata.get, _SOURCE_KEYS) if isinstance(v, str) and v), None)
    if source is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=source)
    node = TextNode(
        text=r.text,
        id_=r.id,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(hidden),
        relationships=relationships,
    )
    return NodeWithScore(node=node, score=float(r.score))


#: Keys LlamaIndex's vector stores write beside a node's own metadata (``node_to_metadata_dict``).
LLAMA_INDEX_STORAGE_KEYS = frozenset({"document_id", "doc_id", "ref_doc_id"})


def default_hidden_keys(metadata: Mapping[str, Any], provenance_keys: Collection[str]) -> list[str]:
    """The metadata keys kept out of a node's LLM and embedding views by default.

    They are the provenance keys, LlamaIndex's storage keys (document ids), private keys
    starting with ``_`` and every structured (dict or list) value: noise in a prompt.
    """
    return [
        key
        for key, value in metadata.items()
        if isinstance(value, dict | list)
        or key.startswith("_")
        or key in provenance_keys
        or key in LLAMA_INDEX_STORAGE_KEYS
    ]


def hiding(node: BaseNode, keys: Sequence[str]) -> dict[str, list[str]]:
    """A ``model_copy`` update that adds ``keys`` to the node's LLM and embedding exclusions."""
    return {
        "excluded_llm_metadata_keys": list(dict.fromkeys([*node.excluded_llm_metadata_keys, *keys])),
        "excluded_embed_metadata_keys": list(dict.fromkeys([*node.excluded_embed_metadata_keys, *keys])),
    }


def from_llama_document(doc: BaseNode) -> CoreDocument:
    """Converts a LlamaIndex document (or any node) into a core input document.

    Args:
        doc: The LlamaIndex document or node.

    Returns:
        A core document with the node's text (without metadata), a copy of its metadata, and
        its id (``doc.doc_id`` / ``doc.id_``). The metadata also carries the id of the
        document it comes from (a ``Document``'s own, a parsed node's ``ref_doc_id``) as
        ``ref_doc_id`` and ``document_id``, as LlamaIndex's vector stores write them, so our
        ``delete_ref_doc`` and the app's own ``index.delete_ref_doc`` find every chunk; its
        ``excluded_llm_metadata_keys`` are kept under
        ``core.strategies.common.HIDDEN_KEYS_KEY``, so the nodes returned hide them too.

    Raises:
        TypeError: ``doc`` is not a LlamaIndex document or node.
    """
    if not isinstance(doc, BaseNode):
        raise TypeError(f"expected a LlamaIndex Document or node, got {type(doc).__name__}")
    metadata = dict(doc.metadata)
    # The document every chunk comes from, under the keys LlamaIndex's vector stores write: our
    # delete_ref_doc and the app's own index.delete_ref_doc (a ChromaVectorStore deletes where
    # document_id matches) both find the chunks we stored.
    source = doc.id_ if isinstance(doc, LlamaDocument) else doc.ref_doc_id
    if source:  # over any the metadata had, as LlamaIndex does
        metadata.update(ref_doc_id=source, document_id=source)
    if doc.excluded_llm_metadata_keys:  # kept with every chunk, hidden again in the nodes returned
        metadata[HIDDEN_KEYS_KEY] = json.dumps(sorted(set(doc.excluded_llm_metadata_keys)))
    return CoreDocument(text=doc.get_content(metadata_mode=MetadataMode.NONE), id=doc.id_, metadata=metadata)


def check_query_type(query: object) -> QueryType:
    """``query`` when it is a str or a ``QueryBundle``.

    Raises:
        TypeError: Anything else (checked before LlamaIndex's instrumentation sees it, which
            would raise a pydantic error).
    """
    if not isinstance(query, str | QueryBundle):
        raise TypeError(f"query must be a str or a llama_index QueryBundle, got {type(query).__name__}")
    return query


F = TypeVar("F", bound=Callable[..., Any])


def in_base_span(method: F) -> F:
    """Marks an override of ``retrieve`` / ``aretrieve`` as traced by the base method's span.

    LlamaIndex wraps every override of a traced method in a span of its own; an override that
    only checks its argument and calls ``super()`` would then open two nested spans per call.
    """
    setattr(method, DISPATCHER_SPAN_DECORATED_ATTR, True)
    return method


def core_documents(documents: BaseNode | Iterable[BaseNode]) -> list[CoreDocument]:
    """One LlamaIndex document or several, as core documents.

    Raises:
        TypeError: Not a document or an iterable of them (an index or a vector store: the
            message says what to pass).
    """
    if isinstance(documents, BaseNode):
        return [from_llama_document(documents)]
    if not isinstance(documents, Iterable) or isinstance(documents, str):
        hint = ""
        if hasattr(documents, "docstore") or hasattr(documents, "as_retriever"):
            hint = "; for an index, pass its documents (or list(index.docstore.docs.values()))"
        elif hasattr(documents, "client") or hasattr(documents, "stores_text"):
            hint = "; for the nodes already in a ChromaVectorStore, use from_vector_store(vector_store)"
        raise TypeError(f"expected LlamaIndex documents or nodes, got {type(documents).__name__}{hint}")
    return [from_llama_document(d) for d in documents]


def _embedder(embed_model: Any) -> Any:
    return None if embed_model is None else LlamaIndexEmbedder(embed_model)


class StrategyRetriever(BaseRetriever, StrategyAdapter):
    """LlamaIndex retriever over any bridge-rag strategy.

    Each call runs ``strategy.retrieve(query_str, k=k, **options)`` and turns every result into
    a :class:`~llama_index.core.schema.NodeWithScore` (see :func:`to_node_with_score`); the
    strategy's provenance keys stay in ``node.metadata`` but out of the LLM's view. The
    options are the named retriever's own fields (``depth``, ``parent_promotion``, ... when
    not None) overridden by ``search_kwargs``. The lifecycle is written once here:
    :meth:`from_defaults`, :meth:`from_vector_store`, :meth:`from_persist_dir`,
    :meth:`persist`, :meth:`insert`, :meth:`delete_ref_doc`.

    Setup:
        Install the LlamaIndex extra:

        ```bash
        pip install "bridge-rag[llama-index]"
        ```

    Key init args:
        strategy: Strategy
            The built core strategy to query (anything meeting ``core.strategies.Searchable``).
        k: int
            Number of nodes to return (default 4).
        search_kwargs: dict[str, Any] | None
            Extra options for ``strategy.retrieve`` (for example ``{"depth": 2}``).

    Instantiate:
        ```python
        from llama_index_bridge import StrategyRetriever

        retriever = StrategyRetriever(strategy, k=4, search_kwargs={"depth": 2})
        ```

    Usage:
        ```python
        nodes = retriever.retrieve("Which tower is in Paris?")
        nodes = await retriever.aretrieve("Which tower is in Paris?")
        print(nodes[0].node.get_content(), nodes[0].score)
        ```
    """

    #: The retriever's own constructor keywords: the ``from_*`` constructors pass them on.
    own_keywords: ClassVar[tuple[str, ...]] = (
        "filters",
        "hidden_metadata_keys",
        "callback_manager",
        "verbose",
    )
    top_k_keyword: ClassVar[str] = "similarity_top_k"
    k_in_search_kwargs: ClassVar[bool] = False

    def __init__(
        self,
        strategy: Searchable,
        *,
        k: int | None = None,
        similarity_top_k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        filters: MetadataFilters | None = None,
        hidden_metadata_keys: Collection[str] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **fields: Any,
    ) -> None:
        """Wraps ``strategy``.

        Args:
            strategy: The core strategy results come from.
            k: Number of nodes to return (a positive int; default 4).
            similarity_top_k: The same, by LlamaIndex's name (give one of the two).
            search_kwargs: Extra options forwarded to ``strategy.retrieve`` (not ``k`` or
                ``query``); an option field given here moves to its field. A Chroma ``where``
                dict may be given as ``{"filter": {...}}``.
            filters: LlamaIndex metadata filters, as ``VectorStoreIndex.as_retriever(filters=...)``
                takes them: every strategy applies them at every stage
                (:func:`llama_index_bridge.filters.to_chroma_where` maps the operators).
            hidden_metadata_keys: Metadata keys kept out of the LLM and embedding views of the
                nodes; None hides the strategy's provenance keys and structured values.
            callback_manager: LlamaIndex callback manager.
            verbose: Whether LlamaIndex prints progress.
            **fields: The named retriever's option fields (None: the strategy's default).

        Raises:
            TypeError: ``strategy`` does not meet the protocol, ``k`` is not an int, a field has
                the wrong type, or an unknown keyword argument.
            ValueError: ``k`` is below 1, ``search_kwargs`` contains ``"k"`` or ``"query"``, or
                a field is given twice with different values.
        """
        unknown = sorted(set(fields) - set(self.option_fields))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected keyword argument(s): {', '.join(unknown)}")
        if k is not None and similarity_top_k is not None and k != similarity_top_k:
            raise ValueError(f"k={k} and similarity_top_k={similarity_top_k} disagree; give one of them")
        top = {} if k is None and similarity_top_k is None else {"k": similarity_top_k if k is None else k}
        checked = self._checked({"strategy": strategy, **top, "search_kwargs": search_kwargs, **fields})
        for name in self.option_fields:
            setattr(self, name, checked[name])
        self.filters = filters  # read at every query: assigning it later takes effect
        _with_filters(checked["search_kwargs"], filters)  # fails early on a filter given twice
        self.strategy: Any = strategy
        self.k, self.search_kwargs = checked["k"], checked["search_kwargs"]
        self.hidden_metadata_keys = None if hidden_metadata_keys is None else frozenset(hidden_metadata_keys)
        self._provenance_keys = frozenset(getattr(strategy, "provenance_keys", COMMON_PROVENANCE_KEYS))
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def similarity_top_k(self) -> int:
        """The number of nodes returned (:attr:`k`), as ``VectorIndexRetriever`` names it; settable."""
        return int(self.k)

    @similarity_top_k.setter
    def similarity_top_k(self, value: int) -> None:
        self.k = check_k(value, default=4)

    @in_base_span
    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Retrieves nodes for a query string or ``QueryBundle``.

        Raises:
            TypeError: The query is neither a str nor a ``QueryBundle`` (checked before
                LlamaIndex's instrumentation sees it, which would raise a pydantic error).
        """
        return super().retrieve(check_query_type(str_or_query_bundle))

    @in_base_span
    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Async :meth:`retrieve`.

        Raises:
            TypeError: The query is neither a str nor a ``QueryBundle``.
        """
        return await super().aretrieve(check_query_type(str_or_query_bundle))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieves nodes with the strategy.

        Args:
            query_bundle: The query; only ``query_str`` is used.

        Returns:
            The strategy's results as scored nodes, best first.
        """
        options = self._field_options() | _with_filters(self.search_kwargs, self.filters)
        results = self.strategy.retrieve(query_bundle.query_str, k=self.k, **options)
        return [
            to_node_with_score(
                r, hidden_metadata_keys=self.hidden_metadata_keys, provenance_keys=self._provenance_keys
            )
            for r in results
        ]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieves nodes in a worker thread, leaving the event loop free.

        Args:
            query_bundle: The query; only ``query_str`` is used.

        Returns:
            The strategy's results as scored nodes, best first.
        """
        return await asyncio.to_thread(self._retrieve, query_bundle)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def from_defaults(
        cls,
        documents: BaseNode | Sequence[BaseNode] | None = None,
        *,
        embed_model: Any = None,
        persist_dir: str | os.PathLike[str] | None = None,
        collection_name: str | None = None,
        similarity_top_k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **settings: Any,
    ) -> Self:
        """Indexes LlamaIndex documents in Chroma and builds the strategy's structures.

        With ``documents`` None and an existing ``persist_dir``, the saved index is loaded.

        Args:
            documents: LlamaIndex documents or nodes (their text and metadata).
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2 (offline).
            persist_dir: Keep Chroma's data and the index here.
            collection_name: Chroma collection name (default: the strategy's).
            similarity_top_k: Number of results (default 4).
            search_kwargs: Default query options.
            llm: Optional LlamaIndex LLM, for the strategies that use one.
            show_progress: Show progress bars while building.
            **settings: The retriever's own fields, and the strategy's config fields (and
                constructor options such as UMG's ``splade``).

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
                **settings,
            )
        return cls._built(
            cls._strategy_type().from_documents,
            core_documents(documents),
            top_k=similarity_top_k,
            search_kwargs=search_kwargs,
            collection_name=collection_name,
            embedder=_embedder(embed_model),
            persist_directory=persist_dir,
            llm=llm,
            show_progress=show_progress,
            **settings,
        )

    @classmethod
    def from_vector_store(
        cls,
        vector_store: Any,
        *,
        embed_model: Any = None,
        similarity_top_k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **settings: Any,
    ) -> Self:
        """The one-line swap: builds the strategy over the nodes already in a ``ChromaVectorStore``.

        Nothing stored is re-embedded (UMG-RAG embeds only its new sentence windows, kept in a
        collection beside the store's). Pass the ``embed_model`` the store was filled with
        (the vector store itself does not know it); the dimensions are checked.

        Args:
            vector_store: A ``llama_index.vector_stores.chroma.ChromaVectorStore``.
            embed_model: The LlamaIndex embedding model used for the stored vectors.
            similarity_top_k: Number of results (default 4).
            search_kwargs: Default query options.
            llm: Optional LLM, for the strategies that use one.
            show_progress: Show progress bars.
            **settings: The retriever's own fields and the strategy's config fields, and
                ``persist_dir`` (keep the index there; reopen it with :meth:`from_persist_dir`
                and ``store=vector_store``).

        Returns:
            The retriever.

        Raises:
            TypeError: ``vector_store`` is not a Chroma vector store.
        """
        collection = chroma_collection(vector_store, "from_vector_store expects a ChromaVectorStore")
        if "persist_dir" in settings:  # this adapter's spelling of the core's persist_directory
            if "persist_directory" in settings:
                raise TypeError("pass persist_dir= or persist_directory=, not both")
            settings["persist_directory"] = settings.pop("persist_dir")
        return cls._built(
            cls._strategy_type().from_store,
            ChunkStore(collection),
            top_k=similarity_top_k,
            search_kwargs=search_kwargs,
            llm=llm,
            show_progress=show_progress,
            **with_store_embedder(settings, _embedder(embed_model), "pass the store's model as embed_model="),
        )

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | os.PathLike[str],
        *,
        embed_model: Any = None,
        similarity_top_k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        store: Any = None,
        **options: Any,
    ) -> Self:
        """Loads an index saved with :meth:`persist` (or built with ``persist_dir``); nothing re-embedded.

        Args:
            persist_dir: The index directory.
            embed_model: The embedding model the index was built with (default all-MiniLM-L6-v2).
            similarity_top_k: Number of results (default 4).
            search_kwargs: Default query options.
            store: The Chroma collection (a ``Chroma`` / ``ChromaVectorStore``, a chromadb
                collection or a ``ChunkStore``), when it is not the embedded one under
                ``persist_dir``; for an index built over the app's vector store, that store.
            **options: The retriever's own fields (None: the index's saved default), and the
                strategy's load options (``llm``, UMG's ``splade``).

        Returns:
            The retriever.
        """
        return cls._built(
            cls._strategy_type().load,
            persist_dir,
            top_k=similarity_top_k,
            search_kwargs=search_kwargs,
            build=False,
            embedder=_embedder(embed_model),
            store=as_chunk_store(store),
            **options,
        )

    def persist(self, persist_dir: str | os.PathLike[str]) -> None:
        """Saves the strategy's structures atomically (Chroma keeps the chunks)."""
        self.strategy.save(persist_dir)

    def insert(self, documents: BaseNode | Sequence[BaseNode]) -> list[str]:
        """Indexes one document (as ``index.insert(doc)``) or several, without a rebuild.

        Returns:
            The document ids.
        """
        return self._add(core_documents(documents))

    def delete_ref_doc(self, ref_doc_id: str, *, filter: Mapping[str, Any] | None = None) -> int:
        """Removes one document (all its chunks); returns how many chunks were removed.

        Only the rows that pass both ``filter`` and the retriever's own ``filters`` are removed
        (a tenant's retriever deletes only that tenant's rows).

        Raises:
            TypeError: ``ref_doc_id`` is not a string.
            ValueError: A name several documents carry, and no filter to tell them apart.
        """
        if not isinstance(ref_doc_id, str):
            raise TypeError(f"ref_doc_id must be a document id (a str), got {type(ref_doc_id).__name__}")
        return self._delete(
            [ref_doc_id], filter, _with_filters(self.search_kwargs, self.filters).get("filter")
        )


def _with_filters(options: Mapping[str, Any], filters: MetadataFilters | None) -> dict[str, Any]:
    """``options`` with LlamaIndex ``filters`` as the Chroma ``filter`` option.

    Raises:
        ValueError: A filter is given both ways.
    """
    out = dict(options)
    where = to_chroma_where(filters)
    if where is not None:
        if out.get("filter") is not None:
            raise ValueError(
                "a filter was given twice (filters=... and search_kwargs['filter']); pass one of them"
            )
        out["filter"] = where
    return out


class BridgeRetriever(StrategyRetriever):
    """Bridge-RAG retriever for LlamaIndex: entity -> abstract -> chunk retrieval over Chroma.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models]"
        ```

    Key init args:
        depth: int | None
            Expansion depth d (None: the index's; 0 unless built with another).
        include_abstracts: bool | None
            Also return abstract summaries as extra context nodes, after the chunks.

    Instantiate:
        ```python
        from llama_index_bridge import BridgeRetriever

        retriever = BridgeRetriever.from_vector_store(chroma_vector_store, embed_model=embed_model)
        retriever = BridgeRetriever.from_defaults(documents=docs, persist_dir="./bridge_index")
        retriever = BridgeRetriever.from_persist_dir("./bridge_index")
        ```

    Usage:
        ```python
        from llama_index.core.query_engine import RetrieverQueryEngine

        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        print(engine.query("Who directed the institute founded by Oskar Halden?"))
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = BridgeRAG
    option_fields: ClassVar[Mapping[str, type]] = {"depth": int, "include_abstracts": bool}
    build_fields: ClassVar[tuple[str, ...]] = ("depth",)
    depth: int | None
    include_abstracts: bool | None


class UMGRetriever(StrategyRetriever):
    """UMG-RAG / UMGP-RAG retriever for LlamaIndex: uncertainty-weighted multi-granularity fusion.

    Documents become overlapping sentence windows of several sizes, scored by dense
    embeddings, BM25 and optionally SPLADE, fused with per-query confidence weights.
    ``parent_promotion=True`` (UMGP-RAG) promotes fine hits to their parent windows and
    removes overlapping passages of a document.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models,sparse]"
        ```

    Key init args:
        parent_promotion: bool | None
            UMGP instead of UMG (None: the index's default, saved at build time).

    Instantiate:
        ```python
        from llama_index_bridge import UMGRetriever

        retriever = UMGRetriever.from_vector_store(chroma_vector_store, embed_model=embed_model)
        retriever = UMGRetriever.from_defaults(documents=docs, persist_dir="./umg_index")
        retriever = UMGRetriever.from_persist_dir("./umg_index", parent_promotion=True)
        ```

    Usage:
        ```python
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        print(engine.query("Who built the telescope at the observatory?"))
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = UMGRAG
    option_fields: ClassVar[Mapping[str, type]] = {"parent_promotion": bool}
    build_fields: ClassVar[tuple[str, ...]] = ("parent_promotion",)
    parent_promotion: bool | None


class BubbleRetriever(StrategyRetriever):
    """BubbleRAG retriever for LlamaIndex: evidence subgraphs of a knowledge graph, as nodes.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models]"
        ```

    Key init args:
        include_triples: bool | None
            Also return the evidence graphs' triples as one extra node.

    Instantiate:
        ```python
        from llama_index_bridge import BubbleRetriever

        retriever = BubbleRetriever.from_vector_store(chroma_vector_store, embed_model=embed_model)
        retriever = BubbleRetriever.from_defaults(documents=docs, persist_dir="./bubble_index")
        retriever = BubbleRetriever.from_networkx(graph, embed_model=embed_model)
        ```

    Usage:
        ```python
        nodes = retriever.retrieve("Who married the founder of the observatory?")
        nodes[0].node.metadata["evidence_triples"]  # over documents: the chunks behind the evidence
        # from a graph alone (no documents=), each node is an evidence graph: its text the triples
        ```
    """

    strategy_cls: ClassVar[type[Strategy] | None] = BubbleRAG
    option_fields: ClassVar[Mapping[str, type]] = {"include_triples": bool}
    include_triples: bool | None

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        embed_model: Any = None,
        documents: Sequence[BaseNode] | None = None,
        similarity_top_k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **graph_options: Any,
    ) -> Self:
        """Retrieves over an existing networkx graph (no schema assumed).

        Args:
            graph: A networkx graph whose nodes and edges carry text.
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2.
            documents: Optional source documents that a ``chunk`` node/edge attribute points to.
            similarity_top_k: Number of results (default 4).
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
            top_k=similarity_top_k,
            search_kwargs=search_kwargs,
            embedder=_embedder(embed_model),
            documents=None if documents is None else core_documents(documents),
            llm=llm,
            show_progress=show_progress,
            **graph_options,
        )

    def to_networkx(self) -> Any:
        """The knowledge graph as a ``networkx.MultiGraph``."""
        return self.strategy.to_networkx()
