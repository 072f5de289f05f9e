"""Every strategy a comparison run can measure, by name: ours, the baselines and the peers.

An entry (:class:`StrategySpec`) says how to build a strategy from the run's shared
:class:`~core.evaluation.corpus.BenchContext` (the same documents, the same embedder and the
same Chroma data for everyone) and how to query what was built. Adding a strategy is one
entry in :data:`STRATEGIES`; a strategy whose class has ``from_documents(documents,
store=..., embedder=...)`` and ``retrieve(query, k)`` needs nothing more than
:func:`from_documents`::

    StrategySpec("bubble", "BubbleRAG ...", from_documents("core.strategies.bubble", "BubbleRAG"),
                 requires=("core.strategies.bubble",)),

Entries whose ``requires`` modules do not import (a framework that is not installed, a
strategy still being written) are skipped with a notice instead of failing the run.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.evaluation.corpus import BenchContext
from core.types import Retrieved

__all__ = [
    "DEFAULT_STRATEGIES",
    "STRATEGIES",
    "StrategySpec",
    "from_documents",
    "register",
    "resolve_strategies",
    "unavailable_reason",
]

BuildFn = Callable[[BenchContext], Any]
QueryFn = Callable[[Any, str, int], list[Retrieved]]
#: What a build takes from the shared corpus, for the "built alone" time: nothing, the
#: chunks (texts only), or the whole collection (chunks, embeddings and the Chroma write).
Reuse = Literal["nothing", "chunks", "collection"]


def retrieve_k(index: Any, query: str, k: int) -> list[Retrieved]:
    """The default query: ``index.retrieve(query, k=k)``."""
    results: list[Retrieved] = index.retrieve(query, k=k)
    return results


@dataclass(frozen=True)
class StrategySpec:
    """How to build and query one strategy in a comparison run.

    Attributes:
        name: The name used on the command line and in the table.
        description: One line for the legend under the table.
        build: Builds the index from the run's context.
        query: Queries what ``build`` returned: ``query(index, question, k)``.
        build_key: Strategies with the same key share one build (UMG and UMGP); default ``name``.
        reuses: What the build takes from the shared corpus (see :data:`Reuse`).
        requires: Modules that must import, else the strategy is skipped with a notice.
        family: ``"ours"``, ``"baseline"`` or ``"peer"`` (a framework's own retriever).
    """

    name: str
    description: str
    build: BuildFn
    query: QueryFn = retrieve_k
    build_key: str = ""
    reuses: Reuse = "nothing"
    requires: tuple[str, ...] = ()
    family: Literal["ours", "baseline", "peer"] = "ours"

    @property
    def key(self) -> str:
        """The build this strategy uses."""
        return self.build_key or self.name


def from_documents(module: str, class_name: str, **kwargs: Any) -> BuildFn:
    """A builder calling ``Class.from_documents(documents, store=..., embedder=...)``.

    The store is a new collection named after the class in the run's Chroma; the embedder
    is the run's embedding cache. ``show_progress`` is passed when the method accepts it.

    Args:
        module: Module that defines the class (imported when the build runs).
        class_name: The strategy class.
        **kwargs: More keyword arguments for ``from_documents``.

    Returns:
        The builder.
    """

    def build(ctx: BenchContext) -> Any:
        cls = getattr(importlib.import_module(module), class_name)
        options = dict(kwargs)
        if "show_progress" in inspect.signature(cls.from_documents).parameters:
            options.setdefault("show_progress", ctx.show_progress)
        store = ctx.new_store(class_name.lower())
        return cls.from_documents(ctx.documents, store=store, embedder=ctx.embedder, **options)

    return build


# ---------------------------------------------------------------------- builders


def _dense(ctx: BenchContext) -> Any:
    from core.strategies.baselines import DenseRetriever

    return DenseRetriever(ctx.corpus.store, ctx.embedder)


def _bm25(ctx: BenchContext) -> Any:
    from core.evaluation.baselines import BM25Baseline

    return BM25Baseline(ctx.corpus)


def _hybrid(ctx: BenchContext) -> Any:
    from core.evaluation.baselines import HybridRRFBaseline

    return HybridRRFBaseline(ctx.corpus, ctx.embedder)


def _bridge(ctx: BenchContext) -> Any:
    from core.strategies.bridge import BridgeRAG

    return BridgeRAG.from_store(ctx.corpus.store, embedder=ctx.embedder, show_progress=ctx.show_progress)


def _umg(ctx: BenchContext) -> Any:
    from core.strategies.umg import UMGRAG

    return UMGRAG.from_documents(
        ctx.documents, embedder=ctx.embedder, store=ctx.new_store("umg"), show_progress=ctx.show_progress
    )


def _umg_query(index: Any, query: str, k: int) -> list[Retrieved]:
    results: list[Retrieved] = index.retrieve(query, k=k, parent_promotion=False)
    return results


def _umgp_query(index: Any, query: str, k: int) -> list[Retrieved]:
    results: list[Retrieved] = index.retrieve(query, k=k, parent_promotion=True)
    return results


def _langchain_ensemble(ctx: BenchContext) -> Any:
    from core.evaluation.peers import build_langchain_ensemble

    return build_langchain_ensemble(ctx)


def _llamaindex_fusion(ctx: BenchContext) -> Any:
    from core.evaluation.peers import build_llamaindex_fusion

    return build_llamaindex_fusion(ctx)


_LANGCHAIN = (
    "langchain_classic.retrievers",
    "langchain_community.retrievers",
    "rank_bm25",
    "langchain_chroma",
)
_LLAMA_INDEX = ("llama_index.core", "llama_index.retrievers.bm25", "llama_index.vector_stores.chroma")

STRATEGIES: dict[str, StrategySpec] = {}


def register(spec: StrategySpec) -> StrategySpec:
    """Adds an entry to :data:`STRATEGIES`.

    Raises:
        ValueError: The name is taken or contains a comma or spaces.
    """
    if not spec.name or any(c in spec.name for c in ", \t"):
        raise ValueError(f"strategy name {spec.name!r} must be non-empty, without commas or spaces")
    if spec.name in STRATEGIES:
        raise ValueError(f"a strategy named {spec.name!r} is already registered")
    STRATEGIES[spec.name] = spec
    return spec


for _spec in (
    StrategySpec(
        "dense",
        "dense retrieval: the query's nearest chunks in the shared Chroma collection (HNSW, cosine)",
        _dense,
        reuses="collection",
        family="baseline",
    ),
    StrategySpec(
        "bm25",
        "BM25 (bm25s) over the shared chunks",
        _bm25,
        reuses="chunks",
        family="baseline",
    ),
    StrategySpec(
        "hybrid",
        "reciprocal-rank fusion (k=60) of the top-50 dense and BM25 lists over the shared chunks",
        _hybrid,
        reuses="collection",
        family="baseline",
    ),
    StrategySpec(
        "bridge",
        "Bridge-RAG (default config) built from the shared collection (BridgeRAG.from_store)",
        _bridge,
        reuses="collection",
    ),
    StrategySpec(
        "umg",
        "UMG-RAG: entropy-weighted dense + BM25 over sentence windows (own collection)",
        _umg,
        query=_umg_query,
        build_key="umg",
    ),
    StrategySpec(
        "umgp",
        "UMGP-RAG: UMG with parent promotion (same index as umg)",
        _umg,
        query=_umgp_query,
        build_key="umg",
    ),
    # BubbleRAG: one entry; skipped with a notice while core.strategies.bubble does not import.
    StrategySpec(
        "bubble",
        "BubbleRAG: evidence subgraphs (own collection)",
        from_documents("core.strategies.bubble", "BubbleRAG"),
        requires=("core.strategies.bubble",),
    ),
    StrategySpec(
        "langchain-ensemble",
        "LangChain EnsembleRetriever (RRF, equal weights): BM25Retriever + Chroma retriever "
        "on the shared collection",
        _langchain_ensemble,
        reuses="collection",
        requires=_LANGCHAIN,
        family="peer",
    ),
    StrategySpec(
        "llamaindex-fusion",
        "LlamaIndex QueryFusionRetriever (reciprocal_rerank, num_queries=1, no LLM): BM25Retriever "
        "+ VectorStoreIndex on the shared collection",
        _llamaindex_fusion,
        reuses="collection",
        requires=_LLAMA_INDEX,
        family="peer",
    ),
):
    register(_spec)

#: Every registered strategy, in table order.
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(STRATEGIES)


def unavailable_reason(spec: StrategySpec) -> str | None:
    """Why ``spec`` cannot run here (a required module does not import), or None."""
    for module in spec.requires:
        try:
            importlib.import_module(module)
        except Exception as exc:  # a missing extra, or a module still being written
            return f"{module} does not import ({type(exc).__name__}: {exc})"
    return None


def resolve_strategies(names: Iterable[str] | None) -> tuple[list[StrategySpec], dict[str, str]]:
    """The entries to run, in the order given, and the ones skipped with their reasons.

    Args:
        names: Strategy names (None: every registered strategy).

    Returns:
        ``(specs, skipped)``.

    Raises:
        ValueError: An unknown or repeated name, or no name at all.
    """
    wanted: Sequence[str] = list(DEFAULT_STRATEGIES if names is None else names)
    if not wanted:
        raise ValueError(f"no strategies given; choose from {', '.join(STRATEGIES)}")
    unknown = [n for n in wanted if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    repeated = sorted({n for n in wanted if wanted.count(n) > 1})
    if repeated:
        raise ValueError(f"strategy {repeated[0]!r} is listed twice; list each strategy once")
    specs: list[StrategySpec] = []
    skipped: dict[str, str] = {}
    for name in wanted:
        reason = unavailable_reason(STRATEGIES[name])
        if reason is None:
            specs.append(STRATEGIES[name])
        else:
            skipped[name] = reason
    return specs, skipped
