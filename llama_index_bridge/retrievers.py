"""A LlamaIndex retriever over any bridge-rag :class:`~core.strategies.base.Strategy`.

:class:`StrategyRetriever` is the one generic adapter; a named retriever for a strategy
(``BridgeRetriever`` and friends) is a short subclass that only builds the strategy.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection, Mapping
from typing import Any

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

from core.strategies.base import Strategy, check_k
from core.types import Document as CoreDocument
from core.types import Retrieved

__all__ = ["StrategyRetriever", "from_llama_document", "to_node_with_score"]


def _jsonable(value: Any) -> Any:
    """Returns ``value`` as plain JSON data (str/int/float/bool/None, lists, str-keyed dicts).

    NumPy scalars and arrays become Python numbers and lists, tuples and sets become lists
    (sets sorted when their items allow it), non-finite floats become None, and anything else
    becomes its ``str``.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [_jsonable(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays, without importing numpy
    if callable(tolist) and hasattr(value, "dtype"):
        return _jsonable(tolist())
    return str(value)


#: Provenance keys the strategies add to every result; kept in ``node.metadata`` but out of
#: the prompt by default.
PROVENANCE_KEYS = frozenset(
    {
        "strategy",
        "score",
        "cosine",
        "entity_score",
        "bridge_score",
        "tree_score",
        "matched_entities",
        "abstract_id",
        "abstract_level",
        "depth",
        "found_by",
        "fallback",
        "chunk_order",
        "start_index",
        "end_index",
        "sent_start",
        "sent_end",
        "granularity",
        "granularities",
        "expert_scores",
        "confidences",
        "promoted",
    }
)


def to_node_with_score(r: Retrieved, *, hidden_metadata_keys: Collection[str] | None = None) -> NodeWithScore:
    """Converts a core retrieval result into a LlamaIndex node with its score.

    The node's metadata is the result's metadata made JSON-friendly (see below), so nodes can be
    serialised, persisted and stored in vector stores. A string ``"doc_id"`` in the metadata also
    becomes the node's ``SOURCE`` relationship (its ``ref_doc_id``).

    Args:
        r: The result.
        hidden_metadata_keys: Metadata keys to keep out of the text the LLM and embedders see
            (they stay in ``node.metadata``). None hides the strategies' provenance
            (:data:`PROVENANCE_KEYS`), private keys starting with ``_`` (LlamaIndex's own
            ``_node_content``) and every structured (dict or list) value: noise in a prompt.

    Returns:
        ``NodeWithScore(node=TextNode(text=r.text, id_=r.id, metadata=...), score=r.score)``.
    """
    metadata: dict[str, Any] = _jsonable(r.metadata)
    if hidden_metadata_keys is None:
        hidden = [
            key
            for key, value in metadata.items()
            if isinstance(value, dict | list) or key.startswith("_") or key in PROVENANCE_KEYS
        ]
    else:
        hidden = [key for key in hidden_metadata_keys if key in metadata]
    relationships: dict[NodeRelationship, RelatedNodeInfo | list[RelatedNodeInfo]] = {}
    doc_id = metadata.get("doc_id")
    if isinstance(doc_id, str) and doc_id:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc_id)
    node = TextNode(
        text=r.text,
        id_=r.id,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(hidden),
        relationships=relationships,
    )
    return NodeWithScore(node=node, score=float(r.score))


def from_llama_document(doc: BaseNode) -> CoreDocument:
    """Converts a LlamaIndex document (or any node) into a core input document.

    Args:
        doc: The LlamaIndex document or node.

    Returns:
        A core document with the node's text (without metadata), a copy of its metadata, and
        its id (``doc.doc_id`` / ``doc.id_``).

    Raises:
        TypeError: ``doc`` is not a LlamaIndex document or node.
    """
    if not isinstance(doc, BaseNode):
        raise TypeError(f"expected a LlamaIndex Document or node, got {type(doc).__name__}")
    return CoreDocument(
        text=doc.get_content(metadata_mode=MetadataMode.NONE), id=doc.id_, metadata=dict(doc.metadata)
    )


def _check_query_type(query: object) -> QueryType:
    if not isinstance(query, str | QueryBundle):
        raise TypeError(f"query must be a str or a llama_index QueryBundle, got {type(query).__name__}")
    return query


class StrategyRetriever(BaseRetriever):
    """LlamaIndex retriever over any bridge-rag strategy.

    Each call runs ``strategy.retrieve(query_str, k=k, **search_kwargs)`` and turns every result
    into a :class:`~llama_index.core.schema.NodeWithScore` (see :func:`to_node_with_score`).

    Setup:
        Install the LlamaIndex extra:

        ```bash
        pip install "bridge-rag[llama-index]"
        ```

    Key init args:
        strategy: Strategy
            The built core strategy to query (anything meeting ``core.strategies.Strategy``).
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

    Use within a query engine:
        ```python
        from llama_index.core.query_engine import RetrieverQueryEngine

        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        response = engine.query("Which tower is in Paris?")
        ```
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        hidden_metadata_keys: Collection[str] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        """Wraps ``strategy``.

        Args:
            strategy: The core strategy results come from.
            k: Number of nodes to return (a positive int).
            search_kwargs: Extra options forwarded to ``strategy.retrieve`` (not ``k`` or ``query``).
            hidden_metadata_keys: Metadata keys kept out of the LLM and embedding views of the
                nodes; None hides structured (dict or list) values, where provenance lives.
            callback_manager: LlamaIndex callback manager.
            verbose: Whether LlamaIndex prints progress.

        Raises:
            TypeError: ``strategy`` does not meet the protocol, or ``k`` is not an int.
            ValueError: ``k`` is below 1, or ``search_kwargs`` contains ``"k"`` or ``"query"``.
        """
        if not isinstance(strategy, Strategy):
            raise TypeError(
                "strategy must implement core.strategies.Strategy (name, default_k, retrieve, "
                f"add_documents, delete_documents, save); got {type(strategy).__name__}"
            )
        options = dict(search_kwargs or {})
        reserved = sorted({"query", "k"}.intersection(options))
        if reserved:
            raise ValueError(
                f"search_kwargs may not contain {reserved}; pass k=... to the constructor and the "
                "query to retrieve"
            )
        self.strategy = strategy
        self.k = check_k(k, default=4)
        self.search_kwargs = options
        self.hidden_metadata_keys = None if hidden_metadata_keys is None else frozenset(hidden_metadata_keys)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Retrieves nodes for a query string or ``QueryBundle``.

        Raises:
            TypeError: The query is neither a str nor a ``QueryBundle`` (checked before
                LlamaIndex's instrumentation sees it, which would raise a pydantic error).
        """
        return super().retrieve(_check_query_type(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Async :meth:`retrieve`.

        Raises:
            TypeError: The query is neither a str nor a ``QueryBundle``.
        """
        return await super().aretrieve(_check_query_type(str_or_query_bundle))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieves nodes with the strategy.

        Args:
            query_bundle: The query; only ``query_str`` is used.

        Returns:
            The strategy's results as scored nodes, best first.
        """
        results = self.strategy.retrieve(query_bundle.query_str, k=self.k, **self.search_kwargs)
        return [to_node_with_score(r, hidden_metadata_keys=self.hidden_metadata_keys) for r in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieves nodes in a worker thread, leaving the event loop free.

        Args:
            query_bundle: The query; only ``query_str`` is used.

        Returns:
            The strategy's results as scored nodes, best first.
        """
        return await asyncio.to_thread(self._retrieve, query_bundle)
