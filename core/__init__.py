"""bridge-rag core: framework-neutral structures and strategies.

The C++ structures (``CuckooFilter``, ``AbstractForest``, ``top_k_cosine``, the fusion kernels
``fuse_weighted`` / ``rrf_fuse`` / ``merge_intervals``) live in the
compiled module ``core._native`` and are re-exported here with Python conveniences.
This package never imports LangChain or LlamaIndex.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from core.cuckoo import CuckooFilter
from core.forest import AbstractForest
from core.fusion import fuse_weighted, merge_intervals, rrf_fuse
from core.graph import Graph
from core.scoring import top_k_cosine

try:
    __version__ = version("bridge-rag")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "AbstractForest",
    "CuckooFilter",
    "Graph",
    "__version__",
    "fuse_weighted",
    "merge_intervals",
    "rrf_fuse",
    "top_k_cosine",
]
