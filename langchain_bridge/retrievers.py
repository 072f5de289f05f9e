"""A LangChain retriever over any bridge-rag :class:`~core.strategies.base.Strategy`.

:class:`StrategyRetriever` is the one generic adapter; a named retriever for a strategy
(``BridgeRetriever`` and friends) is a short subclass that only builds the strategy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator, model_validator

from core.strategies.base import Strategy
from core.types import Document as CoreDocument
from core.types import Retrieved

__all__ = ["StrategyRetriever", "from_langchain_document", "to_langchain_document"]

#: Keyword arguments LangChain's ``invoke`` leaves in ``**kwargs`` for its own use; they are
#: not search options and are never forwarded to the strategy.
_LANGCHAIN_KWARGS = frozenset({"verbose"})

#: Keys the adapter passes to ``Strategy.retrieve`` itself.
_RESERVED_SEARCH_KWARGS = frozenset({"query"})


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


def lift_from_search_kwargs(data: Any, name: str) -> Any:
    """Moves ``search_kwargs[name]`` to the field ``name`` in raw constructor data.

    Lets users spell a retriever field the LangChain way (``search_kwargs={"k": 2}``).

    Raises:
        ValueError: The field and ``search_kwargs`` give different values.
    """
    if not isinstance(data, Mapping):
        return data
    search_kwargs = data.get("search_kwargs")
    if not isinstance(search_kwargs, Mapping) or name not in search_kwargs:
        return data
    options = dict(search_kwargs)
    value = options.pop(name)
    if name in data and data[name] != value:
        raise ValueError(
            f"{name} is given twice with different values: "
            f"{name}={data[name]!r}, search_kwargs[{name!r}]={value!r}"
        )
    return {**data, name: value, "search_kwargs": options}


def _check_k_field(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"k must be an int >= 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"k must be >= 1, got {value}")
    return value


class StrategyRetriever(BaseRetriever):
    r"""LangChain retriever over any bridge-rag strategy.

    Each call runs ``strategy.retrieve(query, k=k, **search_kwargs)`` and turns every result
    into a :class:`~langchain_core.documents.Document` that keeps the strategy's provenance
    metadata and adds ``"id"`` and ``"score"``.

    Setup:
        Install the LangChain extra:

        ```bash
        pip install "bridge-rag[langchain]"
        ```

    Key init args:
        strategy: Strategy
            The built core strategy to query (anything meeting ``core.strategies.Strategy``).
        k: int
            Number of documents to return (default 4); ``invoke(query, k=n)`` overrides it.
        search_kwargs: dict[str, Any]
            Extra options for ``strategy.retrieve`` (for example ``{"depth": 2}``);
            keyword arguments given to ``invoke`` override them.

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

    Use within a chain:
        ```python
        from langchain_core.runnables import RunnableLambda

        def format_docs(docs):
            return "\n\n".join(doc.page_content for doc in docs)

        context = (retriever | RunnableLambda(format_docs)).invoke("Which tower is in Paris?")
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    strategy: Any
    """The core strategy results come from (meets ``core.strategies.Strategy``)."""

    k: int = Field(default=4, description="Number of documents to return; overridable per call.")
    """Number of documents to return; ``invoke(query, k=n)`` overrides it for one call."""

    search_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra options forwarded to strategy.retrieve."
    )
    """Extra options forwarded to ``strategy.retrieve`` (e.g. ``depth``); per-call kwargs win.

    ``{"k": n}`` is accepted as LangChain's usual spelling of ``k=n``."""

    @model_validator(mode="before")
    @classmethod
    def _move_k_out_of_search_kwargs(cls, data: Any) -> Any:
        return lift_from_search_kwargs(data, "k")

    @field_validator("strategy")
    @classmethod
    def _check_strategy(cls, value: Any) -> Any:
        if not isinstance(value, Strategy):
            raise ValueError(
                "strategy must implement core.strategies.Strategy (name, default_k, retrieve, "
                f"add_documents, delete_documents, save); got {type(value).__name__}"
            )
        return value

    @field_validator("k", mode="before")
    @classmethod
    def _check_k(cls, value: object) -> int:
        return _check_k_field(value)

    @field_validator("search_kwargs")
    @classmethod
    def _check_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = _RESERVED_SEARCH_KWARGS.intersection(value)
        if reserved:
            raise ValueError(f"search_kwargs may not contain {sorted(reserved)}; pass the query to invoke")
        return value

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves documents with the strategy.

        Args:
            query: The query string.
            run_manager: LangChain's callback manager for this run.
            **kwargs: Per-call options: ``k`` overrides :attr:`k` (``None`` keeps it); the rest
                override :attr:`search_kwargs`.

        Returns:
            The strategy's results as LangChain documents, best first.
        """
        options = {**self.search_kwargs, **kwargs}
        for name in _LANGCHAIN_KWARGS:
            options.pop(name, None)
        k = options.pop("k", None)
        if k is None:
            k = self.k
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
