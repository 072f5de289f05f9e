"""A small, deterministic, in-memory :class:`core.strategies.Strategy` for adapter tests.

Scores are word overlap: the share of the query's distinct words found in a document.
Documents with no overlap are not returned. Ties are broken by document id, so every
ranking is deterministic.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core.strategies.base import check_k, check_query
from core.types import Document, Retrieved

__all__ = ["DOCUMENTS", "FakeStrategy"]

_WORD = re.compile(r"[a-z0-9]+")

DOCUMENTS: tuple[Document, ...] = (
    Document(
        "The Eiffel Tower is a wrought iron tower in Paris.", id="eiffel", metadata={"source": "wiki/eiffel"}
    ),
    Document("Paris is the capital city of France.", id="paris", metadata={"source": "wiki/paris"}),
    Document(
        "The Louvre in Paris is the largest art museum.", id="louvre", metadata={"source": "wiki/louvre"}
    ),
    Document("Berlin is the capital city of Germany.", id="berlin", metadata={"source": "wiki/berlin"}),
    Document("The Brandenburg Gate is a monument in Berlin.", id="gate", metadata={"source": "wiki/gate"}),
    Document("Iron ore is smelted into pig iron in a blast furnace.", id="ore", metadata={}),
)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class FakeStrategy:
    """Word-overlap retrieval over a handful of documents.

    Options accepted by :meth:`retrieve` (anything else is a ``TypeError``, as in a real strategy):

    * ``min_score`` (float): drop results scoring below it.
    * ``depth`` (int): recorded in each result's provenance; changes nothing else.

    Every call is recorded in :attr:`calls` as ``(query, k, options, thread id)``; ``hook``,
    when set, runs inside :meth:`retrieve` (tests use it to observe threads and concurrency).
    """

    name = "fake"
    default_k = 4

    def __init__(
        self, documents: Sequence[Document] = DOCUMENTS, *, hook: Callable[[], object] | None = None
    ) -> None:
        self._docs: dict[str, Document] = {}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, int | None, dict[str, Any], int]] = []
        self.hook = hook
        self.add_documents(documents)

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        """Returns up to ``k`` documents ranked by word overlap with ``query``."""
        with self._lock:
            self.calls.append((query, k, dict(options), threading.get_ident()))
        text = check_query(query)
        count = check_k(k, self.default_k)
        min_score = float(options.pop("min_score", 0.0))
        depth = options.pop("depth", 1)
        if options:
            raise TypeError(f"unexpected retrieve options: {sorted(options)}")
        if self.hook is not None:
            self.hook()
        query_words = _words(text)
        with self._lock:
            docs = list(self._docs.values())
        scored: list[Retrieved] = []
        for doc in docs:
            matched = query_words & _words(doc.text)
            score = len(matched) / len(query_words) if query_words else 0.0
            if not matched or score < min_score:
                continue
            assert doc.id is not None
            metadata = {
                **doc.metadata,
                "doc_id": doc.id,
                "provenance": {"strategy": self.name, "matched": sorted(matched), "depth": depth},
            }
            scored.append(Retrieved(id=f"{doc.id}::0", text=doc.text, score=score, metadata=metadata))
        scored.sort(key=lambda r: (-r.score, r.id))
        return scored[:count]

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Adds (or replaces) documents; ids must be given."""
        ids: list[str] = []
        with self._lock:
            for doc in documents:
                if doc.id is None:
                    raise ValueError("FakeStrategy needs documents with ids")
                self._docs[doc.id] = doc
                ids.append(doc.id)
        return ids

    def delete_documents(self, doc_ids: Sequence[str], *, filter: Mapping[str, Any] | None = None) -> int:
        """Removes documents by id; each document is one chunk (a filter is not supported)."""
        if filter is not None:
            raise NotImplementedError("the fake strategy does not filter")
        with self._lock:
            return sum(self._docs.pop(doc_id, None) is not None for doc_id in doc_ids)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Not supported: the fake has nothing worth persisting."""
        raise NotImplementedError("FakeStrategy is in-memory only")
