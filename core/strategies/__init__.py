"""Retrieval strategies: each one framework-neutral, each one a :class:`Strategy`."""

from __future__ import annotations

from core.strategies.base import Strategy, check_k, check_query

__all__ = ["Strategy", "check_k", "check_query"]
