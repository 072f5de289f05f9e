"""Candidate scoring: top-k cosine over selected rows of an in-memory embedding matrix."""

from __future__ import annotations

from core._native import top_k_cosine

__all__ = ["top_k_cosine"]
