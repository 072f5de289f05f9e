"""``UncertaintyFusionRetriever``: UMG-RAG's entropy-weighted fusion over any LangChain retrievers.

A drop-in for ``EnsembleRetriever`` (the same ``retrievers`` and ``weights`` arguments):
instead of reciprocal-rank fusion with fixed weights, each retriever's list is weighted, per
query, by the confidence of its score distribution (:mod:`core.confidence_fusion`).

Where the scores come from, per retriever:

* a vector-store retriever (``vectorstore.as_retriever()``, search type ``similarity``):
  the store's relevance scores (its own distance-to-relevance function) for a search with
  the retriever's ``search_kwargs`` (filters kept); a store without a relevance function
  (``InMemoryVectorStore``) returns its documents, fused by rank;
* LangChain's ``BM25Retriever``, which returns no scores: its own BM25 model scores the query
  once (``vectorizer.get_scores``), as the retriever itself does, and its top ``k`` are kept;
* any other retriever: its documents, scored by a ``relevance_score`` / ``score`` /
  ``similarity_score`` metadata value when every document has one, else by rank (a
  scoreless list, see :mod:`core.confidence_fusion`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config, patch_config
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import Field, model_validator

from core.confidence_fusion import (
    DEFAULT_RANK_CONSTANT,
    DEFAULT_SCALING,
    DEFAULT_TEMPERATURE,
    RankedList,
    Scaling,
    check_weights,
    fuse_ranked_lists,
    item_key,
)

__all__ = ["UncertaintyFusionRetriever"]

#: Metadata keys read as a document's score, in this order.
SCORE_KEYS = ("relevance_score", "score", "similarity_score")

Scored = tuple[list[Document], list[float] | None]


def _metadata_scores(docs: Sequence[Document]) -> list[float] | None:
    for key in SCORE_KEYS:
        values = [d.metadata.get(key) for d in docs]
        if docs and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return [float(v) for v in values]  # type: ignore[arg-type]
    return None


def _bm25_scored(retriever: Any, query: str) -> Scored:
    """LangChain's ``BM25Retriever`` results with the BM25 scores it computes but drops."""
    scores = np.asarray(retriever.vectorizer.get_scores(retriever.preprocess_func(query)), dtype=np.float64)
    k = min(int(retriever.k), scores.size)
    if k <= 0:
        return [], []
    head = np.argpartition(-scores, k - 1)[:k]
    top = head[np.argsort(-scores[head], kind="stable")]
    return [retriever.docs[i] for i in top.tolist()], scores[top].tolist()


def _is_bm25(retriever: Any) -> bool:
    """LangChain's ``BM25Retriever`` itself (a wrapper, binding or configurable, runs as itself)."""
    attributes = ("vectorizer", "preprocess_func", "docs", "k")
    return (
        isinstance(retriever, BaseRetriever)
        and all(hasattr(retriever, a) for a in attributes)
        and callable(getattr(getattr(retriever, "vectorizer", None), "get_scores", None))
    )


def _unzipped(pairs: Sequence[tuple[Document, float]]) -> Scored:
    return [d for d, _ in pairs], [float(s) for _, s in pairs]


def _search_kwargs(retriever: Any) -> dict[str, Any]:
    kwargs = dict(retriever.search_kwargs)
    kwargs.setdefault("k", 4)  # VectorStoreRetriever's default
    return kwargs


def _as_documents(docs: Sequence[Any]) -> list[Document]:
    """A retriever's results as documents (a plain runnable may return strings)."""
    return [Document(page_content=d) if isinstance(d, str) else d for d in docs]


def _with_scores(docs: Sequence[Any]) -> Scored:
    documents = _as_documents(docs)
    return documents, _metadata_scores(documents)


def _store_scored(retriever: Any, query: str) -> Scored:
    """A vector-store retriever's documents with the relevance scores its ``invoke`` drops."""
    store, kwargs = retriever.vectorstore, _search_kwargs(retriever)
    try:  # the store's own distance-to-relevance function (no [0, 1] range warning)
        return _unzipped(store._similarity_search_with_relevance_scores(query, **kwargs))
    except NotImplementedError:  # a store without a relevance function: its documents, fused by rank
        return store.similarity_search(query, **kwargs), None


async def _astore_scored(retriever: Any, query: str) -> Scored:
    store, kwargs = retriever.vectorstore, _search_kwargs(retriever)
    try:
        return _unzipped(await store._asimilarity_search_with_relevance_scores(query, **kwargs))
    except NotImplementedError:
        return await store.asimilarity_search(query, **kwargs), None


async def _abm25_scored(retriever: Any, query: str) -> Scored:
    return await asyncio.to_thread(_bm25_scored, retriever, query)


def _direct_scorer(
    retriever: Any,
) -> tuple[Callable[[Any, str], Scored], Callable[[Any, str], Awaitable[Scored]]] | None:
    """How to read the scores a retriever computes but its ``invoke`` drops (sync, async), if known."""
    if _is_bm25(retriever):
        return _bm25_scored, _abm25_scored
    if isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity":
        return _store_scored, _astore_scored
    return None


def _run_options(config: RunnableConfig, runnable: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``CallbackManager.configure`` arguments for a run of ``runnable``, as ``BaseRetriever.invoke`` has.

    The retriever's LangSmith parameters (``ls_retriever_name``, ``ls_vector_store_provider``,
    ...) join the run's metadata, so a trace can be filtered by retriever.
    """
    ls_params = getattr(runnable, "_get_ls_params", None)
    return {
        "verbose": kwargs.get("verbose", False),
        "inheritable_callbacks": config.get("callbacks"),
        "inheritable_tags": config.get("tags", []),
        "local_tags": getattr(runnable, "tags", None),
        "inheritable_metadata": {
            **(config.get("metadata") or {}),
            **(ls_params(**kwargs) if callable(ls_params) else {}),
        },
        "local_metadata": getattr(runnable, "metadata", None),
    }


T = TypeVar("T")


def _in_run(
    config: RunnableConfig,
    runnable: Any,
    query: str,
    call: Callable[[CallbackManagerForRetrieverRun], T],
    documents: Callable[[T], list[Document]],
    **kwargs: Any,
) -> T:
    """``call(run)`` inside a retriever run of ``runnable`` that ends with ``documents(result)``."""
    manager = CallbackManager.configure(**_run_options(config, runnable, kwargs))
    run = manager.on_retriever_start(
        None, query, name=config.get("run_name") or runnable.get_name(), run_id=kwargs.get("run_id")
    )
    try:
        result = call(run)
    except Exception as e:
        run.on_retriever_error(e)
        raise
    run.on_retriever_end(documents(result))
    return result


async def _ain_run(
    config: RunnableConfig,
    runnable: Any,
    query: str,
    call: Callable[[AsyncCallbackManagerForRetrieverRun], Awaitable[T]],
    documents: Callable[[T], list[Document]],
    **kwargs: Any,
) -> T:
    """Async :func:`_in_run`."""
    manager = AsyncCallbackManager.configure(**_run_options(config, runnable, kwargs))
    run = await manager.on_retriever_start(
        None, query, name=config.get("run_name") or runnable.get_name(), run_id=kwargs.get("run_id")
    )
    try:
        result = await call(run)
    except Exception as e:
        await run.on_retriever_error(e)
        raise
    await run.on_retriever_end(documents(result))
    return result


#: The keyword arguments of ``invoke`` that are LangChain's own (for the run, not the search).
_RUN_KWARGS = frozenset({"verbose", "run_id"})


def _no_search_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``invoke``'s keyword arguments, once checked to hold no search option.

    Raises:
        TypeError: A search option (``filter``, ``k``, ...): not every retriever would honour
            it (``BM25Retriever`` drops a filter), and a filter is honoured or refused, never
            ignored.
    """
    options = sorted(set(kwargs) - _RUN_KWARGS)
    if options:
        raise TypeError(
            f"UncertaintyFusionRetriever takes no per-call search options (got {', '.join(options)}): "
            "not every retriever would honour them; set them on each retriever instead, e.g. "
            "vectorstore.as_retriever(search_kwargs={'filter': ...})"
        )
    return kwargs


def _documents(docs: list[Document]) -> list[Document]:
    return docs


def _scored_documents(scored: Scored) -> list[Document]:
    return scored[0]


class UncertaintyFusionRetriever(BaseRetriever):
    """Fuses several retrievers' results, each list weighted by its per-query confidence.

    Documents are matched across lists by their text, as ``EnsembleRetriever`` matches them
    (or by ``metadata[id_key]``). Each retriever runs with the caller's config (callbacks,
    tags, metadata, configurable fields) as a child run tagged ``retriever_<i>``, also when
    its scores are read from its vector store or BM25 model instead of its ``invoke``.

    Example:
        >>> fused = UncertaintyFusionRetriever(retrievers=[bm25, chroma.as_retriever()])  # doctest: +SKIP
        >>> fused.invoke("Who founded the observatory?")  # doctest: +SKIP
    """

    retrievers: list[RetrieverLike] = Field(description="The retrievers whose lists are fused.")
    weights: list[float] | None = Field(
        default=None, description="A prior weight per retriever (default equal), times its confidence."
    )
    c: float = Field(
        default=DEFAULT_RANK_CONSTANT,
        ge=0,
        description="Rank constant: the item at 1-based rank r contributes 1 / (r + c).",
    )
    """The ``c`` of ``EnsembleRetriever``; 1 by default (its 60 flattens a short list's ranks, leaving
    the confidences less to weigh: :data:`core.confidence_fusion.DEFAULT_RANK_CONSTANT`)."""
    temperature: float = Field(
        default=DEFAULT_TEMPERATURE, gt=0, description="Softmax temperature of the confidence (z-scores)."
    )
    scaling: Scaling = Field(
        default=DEFAULT_SCALING,
        description="An item's contribution: 'rank' (1 / (r + c)) or 'minmax' (its score).",
    )
    k: int | None = Field(default=None, ge=1, description="Fused documents returned; None: all of them.")
    id_key: str | None = Field(
        default=None,
        description="Metadata key identifying a document across lists; default its text.",
    )

    @model_validator(mode="before")
    @classmethod
    def _a_list_of_retrievers(cls, data: Any) -> Any:
        retrievers = data.get("retrievers") if isinstance(data, dict) else None
        if isinstance(retrievers, Runnable):
            raise ValueError("retrievers must be a list of retrievers, got a single one; wrap it in a list")
        if isinstance(retrievers, list | tuple):
            if not retrievers:
                raise ValueError("UncertaintyFusionRetriever needs at least one retriever")
            for i, r in enumerate(retrievers):
                if not isinstance(r, Runnable) and callable(getattr(r, "as_retriever", None)):
                    raise ValueError(
                        f"retrievers[{i}] ({type(r).__name__}) is a vector store, not a retriever; "
                        "pass store.as_retriever()"
                    )
        return data

    @model_validator(mode="after")
    def _one_weight_each(self) -> UncertaintyFusionRetriever:
        if self.weights is not None:
            self.weights = check_weights(self.weights, len(self.retrievers))
        return self

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The configurable fields of the retrievers (as ``EnsembleRetriever`` lists them)."""
        return get_unique_config_specs(spec for r in self.retrievers for spec in r.config_specs)

    def _key(self, doc: Document, source: int) -> Hashable:
        return item_key(doc.page_content, doc.metadata, self.id_key, source, "document")

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        """Fuses the retrievers' results for ``input``, each run with ``config`` (as a child run).

        Raises:
            TypeError: A per-call search option such as ``filter=`` (set it on each retriever).
        """
        config, kwargs = ensure_config(config), _no_search_options(kwargs)
        return _in_run(config, self, input, lambda run: self._fused(input, run, config), _documents, **kwargs)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async :meth:`invoke`: the retrievers run concurrently."""
        config, kwargs = ensure_config(config), _no_search_options(kwargs)
        return await _ain_run(
            config, self, input, lambda run: self._afused(input, run, config), _documents, **kwargs
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._fused(query, run_manager, ensure_config())

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self._afused(query, run_manager, ensure_config())

    def _fused(
        self, query: str, run: CallbackManagerForRetrieverRun, config: RunnableConfig
    ) -> list[Document]:
        return self._fuse(
            [
                self._scored(
                    r, query, patch_config(config, callbacks=run.get_child(tag=f"retriever_{i + 1}"))
                )
                for i, r in enumerate(self.retrievers)
            ]
        )

    async def _afused(
        self, query: str, run: AsyncCallbackManagerForRetrieverRun, config: RunnableConfig
    ) -> list[Document]:
        children = [
            patch_config(config, callbacks=run.get_child(tag=f"retriever_{i + 1}"))
            for i in range(len(self.retrievers))
        ]
        results = await asyncio.gather(
            *(self._ascored(r, query, child) for r, child in zip(self.retrievers, children, strict=True))
        )
        return self._fuse(results)

    def _scored(self, retriever: Any, query: str, config: RunnableConfig) -> Scored:
        if isinstance(retriever, DynamicRunnable):  # configurable fields: the configured retriever
            retriever, config = retriever.prepare(config)
        scorer = _direct_scorer(retriever)
        if scorer is None:
            return _with_scores(retriever.invoke(query, config))
        # Read the scores directly, inside a child run of the retriever's own.
        return _in_run(config, retriever, query, lambda _: scorer[0](retriever, query), _scored_documents)

    async def _ascored(self, retriever: Any, query: str, config: RunnableConfig) -> Scored:
        if isinstance(retriever, DynamicRunnable):
            retriever, config = retriever.prepare(config)
        scorer = _direct_scorer(retriever)
        if scorer is None:
            return _with_scores(await retriever.ainvoke(query, config))
        return await _ain_run(
            config, retriever, query, lambda _: scorer[1](retriever, query), _scored_documents
        )

    def _fuse(self, results: Sequence[Scored]) -> list[Document]:
        by_key: dict[Hashable, Document] = {}
        lists = []
        for source, (docs, scores) in enumerate(results):
            keys = [self._key(d, source) for d in docs]
            for key, doc in zip(keys, docs, strict=True):
                by_key.setdefault(key, doc)
            lists.append(RankedList(keys, scores))
        fused, confidences = fuse_ranked_lists(
            lists, self.weights, temperature=self.temperature, k=self.k, scaling=self.scaling, c=self.c
        )
        out = []
        for item in fused:
            doc = by_key[item.key]
            meta = {**doc.metadata, "fusion_score": item.score, "fusion_confidences": confidences}
            out.append(Document(page_content=doc.page_content, metadata=meta, id=doc.id))
        return out
