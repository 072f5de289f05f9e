"""bridge-rag core: framework-neutral strategies, building blocks and C++ structures.

The public API: the strategies (:class:`BridgeRAG`, :class:`UMGRAG`, :class:`BubbleRAG`), the
data types (:class:`Document`, :class:`Retrieved`), the Chroma store (:class:`ChunkStore`), the
embedders, and the native structures of ``core._native`` (``CuckooFilter``, ``AbstractForest``,
``Graph``, ``top_k_cosine`` and the fusion kernels) and the vector index
(:class:`VectorIndex`, faiss HNSW). The strategies, the store, the embedders and the vector
index are imported on first use, so ``import core`` stays light (no Chroma, torch, spaCy or
faiss until they are needed). This package never imports LangChain or
LlamaIndex outside :mod:`core.evaluation`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from core.native import (
    AbstractForest,
    CuckooFilter,
    Graph,
    fuse_weighted,
    merge_intervals,
    rrf_fuse,
    top_k_cosine,
)
from core.types import Document, Retrieved

if TYPE_CHECKING:
    from core.embed import (
        CallableEmbedder,
        Embedder,
        LangChainEmbedder,
        LlamaIndexEmbedder,
        SentenceTransformerEmbedder,
        as_embedder,
    )
    from core.store import ChunkStore
    from core.strategies import Strategy
    from core.strategies.bridge import BridgeConfig, BridgeRAG
    from core.strategies.bubble import BubbleConfig, BubbleRAG
    from core.strategies.umg import UMGRAG, UMGConfig
    from core.vector_index import VectorIndex

try:
    __version__ = version("bridge-rag")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

#: Names imported on first use, and the module each comes from.
_LAZY = {
    "BridgeConfig": "core.strategies.bridge",
    "BridgeRAG": "core.strategies.bridge",
    "BubbleConfig": "core.strategies.bubble",
    "BubbleRAG": "core.strategies.bubble",
    "CallableEmbedder": "core.embed",
    "ChunkStore": "core.store",
    "Embedder": "core.embed",
    "LangChainEmbedder": "core.embed",
    "LlamaIndexEmbedder": "core.embed",
    "SentenceTransformerEmbedder": "core.embed",
    "Strategy": "core.strategies",
    "UMGConfig": "core.strategies.umg",
    "UMGRAG": "core.strategies.umg",
    "VectorIndex": "core.vector_index",
    "as_embedder": "core.embed",
}

__all__ = [
    "UMGRAG",
    "AbstractForest",
    "BridgeConfig",
    "BridgeRAG",
    "BubbleConfig",
    "BubbleRAG",
    "CallableEmbedder",
    "ChunkStore",
    "CuckooFilter",
    "Document",
    "Embedder",
    "Graph",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "Retrieved",
    "SentenceTransformerEmbedder",
    "Strategy",
    "UMGConfig",
    "VectorIndex",
    "__version__",
    "as_embedder",
    "fuse_weighted",
    "merge_intervals",
    "rrf_fuse",
    "top_k_cosine",
]


def __getattr__(name: str) -> Any:
    """Imports the strategies, the store and the embedders on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
