"""Retrieval strategies: each one framework-neutral, each one a :class:`Strategy`.

``base`` holds the contract, ``common`` the plumbing every strategy shares, ``baselines`` the
plain dense retriever; each strategy is a package of its own (``bridge``, ``umg``, ``bubble``)
with the modules only it uses.
"""

from __future__ import annotations

from core.strategies.base import COMMON_PROVENANCE_KEYS, Searchable, Strategy, check_k, check_query

__all__ = ["COMMON_PROVENANCE_KEYS", "Searchable", "Strategy", "check_k", "check_query"]
