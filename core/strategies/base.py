"""The contract every strategy meets, and the input checks they share.

The LangChain and LlamaIndex adapters are written against :class:`Strategy` alone, so a
new strategy gets both adapters for free.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from core.types import Document, Retrieved

__all__ = ["DEFAULT_MAX_QUERY_CHARS", "Strategy", "check_k", "check_query"]

#: Longest query accepted by default (characters). Embedders truncate long inputs anyway,
#: so a longer query almost always means a document was passed by mistake.
DEFAULT_MAX_QUERY_CHARS = 10_000


@runtime_checkable
class Strategy(Protocol):
    """A retrieval strategy over an indexed corpus.

    Implementations are thread-safe for concurrent :meth:`retrieve` calls.
    """

    @property
    def name(self) -> str:
        """Short strategy name (``"bridge"``, ``"dense"``, ...)."""
        ...

    @property
    def default_k(self) -> int:
        """Number of results when the caller gives none."""
        ...

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        """Returns up to ``k`` results for ``query``, best first, each with provenance metadata."""
        ...

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Indexes more documents without a rebuild; returns their document ids."""
        ...

    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        """Removes documents (all their chunks) by id; returns how many chunks were removed."""
        ...

    def save(self, path: str | os.PathLike[str]) -> None:
        """Persists the derived structures (atomically) to the directory ``path``."""
        ...


def check_query(query: object, max_chars: int = DEFAULT_MAX_QUERY_CHARS) -> str:
    """Validates a query string and returns it stripped.

    Args:
        query: The query as given by the caller.
        max_chars: Longest accepted query.

    Returns:
        The query without surrounding whitespace.

    Raises:
        TypeError: ``query`` is not a string.
        ValueError: ``query`` is empty, only whitespace, or longer than ``max_chars``.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    text = query.strip()
    if not text:
        raise ValueError("query is empty; pass the question or search text to retrieve for")
    if len(text) > max_chars:
        raise ValueError(
            f"query is {len(text):,} characters long, above the limit of {max_chars:,}; pass a shorter "
            "query or raise max_query_chars"
        )
    return text


def check_k(k: object, default: int) -> int:
    """Validates a result count.

    Args:
        k: The requested count, or None for ``default``.
        default: The strategy's default count.

    Returns:
        The count to use (a positive int). Counts above the corpus size simply return
        every result there is.

    Raises:
        TypeError: ``k`` is not an int (bools are rejected too).
        ValueError: ``k`` is below 1.
    """
    if k is None:
        return default
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return k
