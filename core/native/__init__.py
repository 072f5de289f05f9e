"""Thin typed wrappers of the C++ structures in ``core._native``.

``CuckooFilter`` (entity -> ids), ``AbstractForest`` (abstract tree over chunk ranges),
``Graph`` (CSR knowledge graph with localisation and bubble expansion), the fusion kernels
and ``top_k_cosine``. They add Python conveniences (persistence to files, typed results)
and no retrieval policy.
"""

from core.native.cuckoo import CuckooFilter
from core.native.forest import AbstractForest
from core.native.fusion import fuse_weighted, merge_intervals, rrf_fuse
from core.native.graph import Graph
from core.native.scoring import top_k_cosine

__all__ = [
    "AbstractForest",
    "CuckooFilter",
    "Graph",
    "fuse_weighted",
    "merge_intervals",
    "rrf_fuse",
    "top_k_cosine",
]
