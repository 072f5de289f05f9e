"""The indexed-chunk table every strategy keeps in memory.

Chroma is the source of truth for texts, metadata and vectors; a strategy keeps the rows it
indexed in a :class:`ChunkTable` (ids, document ids, texts, metadata, a live mask, the
normalised embedding matrix, and document -> rows) so that a query never waits on Chroma.
Rows are appended in index order and never move; deleting a document marks its rows dead.
Updates build new arrays and swap them in, so a concurrent query reads either the old table
or the new one (callers hold their own write lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from core.store import ChunkStore

__all__ = ["ChunkRows", "ChunkTable"]

FloatMatrix = npt.NDArray[np.float32]


@dataclass
class ChunkRows:
    """A batch of chunk rows (new ones to index, or a table's own) in index order."""

    ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


class ChunkTable:
    """The rows a strategy indexed, with their live mask and embedding matrix.

    Attributes:
        rows: Ids, document ids, texts and metadata, one entry per row.
        alive: Whether each row is still indexed.
        matrix: One unit-length float32 embedding per row.
        doc_rows: Live rows of each document.
        id_to_row: Row of each live chunk id.
    """

    def __init__(self, dimension: int) -> None:
        self.rows = ChunkRows()
        self.alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.matrix: FloatMatrix = np.zeros((0, dimension), dtype=np.float32)
        self.doc_rows: dict[str, list[int]] = {}
        self.id_to_row: dict[str, int] = {}

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self.rows.ids)

    @property
    def ids(self) -> list[str]:
        """Chunk id of every row."""
        return self.rows.ids

    @property
    def doc_ids(self) -> list[str]:
        """Document id of every row."""
        return self.rows.doc_ids

    @property
    def texts(self) -> list[str]:
        """Text of every row."""
        return self.rows.texts

    @property
    def metadatas(self) -> list[dict[str, Any]]:
        """Metadata of every row."""
        return self.rows.metadatas

    @property
    def num_live(self) -> int:
        """Rows still indexed."""
        return int(self.alive.sum())

    def has_document(self, doc_id: str) -> bool:
        """Whether a document has live rows."""
        return doc_id in self.doc_rows

    # ------------------------------------------------------------------ updates
    def append(self, rows: ChunkRows, vectors: FloatMatrix) -> int:
        """Appends rows and their (unit-length) vectors; returns the first new row's index.

        Raises:
            ValueError: ``vectors`` does not have one row per chunk of the table's dimension.
        """
        if vectors.shape != (len(rows), self.matrix.shape[1]):
            raise ValueError(
                f"{len(rows)} rows need a ({len(rows)}, {self.matrix.shape[1]}) matrix, got {vectors.shape}"
            )
        base = len(self)
        self.rows.ids += rows.ids
        self.rows.doc_ids += rows.doc_ids
        self.rows.texts += rows.texts
        self.rows.metadatas += rows.metadatas
        for i, (cid, did) in enumerate(zip(rows.ids, rows.doc_ids, strict=True)):
            self.id_to_row[cid] = base + i
            self.doc_rows.setdefault(did, []).append(base + i)
        self.matrix = np.ascontiguousarray(np.vstack([self.matrix, vectors]), dtype=np.float32)
        self.alive = np.concatenate([self.alive, np.ones(len(rows), dtype=bool)])
        return base

    def remove_documents(self, doc_ids: Iterable[str]) -> list[int]:
        """Marks every row of the documents dead; returns those rows (sorted, unknown ids ignored)."""
        wanted = list(dict.fromkeys(str(d) for d in doc_ids))
        rows = sorted({r for d in wanted for r in self.doc_rows.get(d, [])})
        if not rows:
            return []
        alive = self.alive.copy()
        alive[rows] = False
        self.alive = alive
        for d in wanted:
            for r in self.doc_rows.pop(d, []):
                self.id_to_row.pop(self.rows.ids[r], None)
        return rows

    # ------------------------------------------------------------------ persistence
    def to_json(self, *, with_texts: bool = False) -> dict[str, Any]:
        """Ids, document ids and the live mask as JSON data (texts too, for a table without a store)."""
        data: dict[str, Any] = {
            "ids": self.rows.ids,
            "doc_ids": self.rows.doc_ids,
            "alive": self.alive.astype(int).tolist(),
        }
        if with_texts:
            data["texts"] = self.rows.texts
        return data

    @classmethod
    def restore(
        cls,
        data: Mapping[str, Any],
        matrix: FloatMatrix,
        *,
        store: ChunkStore | None,
        what: str = "chunks",
        texts: Sequence[str] | None = None,
    ) -> ChunkTable:
        """Rebuilds a table saved with :meth:`to_json`, reading live rows' texts and metadata from Chroma.

        Args:
            data: The saved ids, document ids and live mask.
            matrix: The saved embedding matrix.
            store: The Chroma collection holding the chunks (None: ``texts`` are given).
            what: What the rows are, for error messages.
            texts: Saved texts, for a table without a store.

        Raises:
            ValueError: The saved parts disagree in size, or the collection lacks a live row.
        """
        from core.strategies.common import read_from_store

        try:
            ids = [str(x) for x in data["ids"]]
            doc_ids = [str(x) for x in data["doc_ids"]]
            alive = np.asarray(data["alive"], dtype=bool)
        except KeyError as exc:
            raise ValueError(f"the index is missing {exc}; rebuild it") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the index files are malformed ({exc}); rebuild the index") from exc
        n = len(ids)
        row_texts = [str(t) for t in texts] if texts is not None else [""] * n
        sizes = {len(doc_ids), len(row_texts), alive.shape[0] if alive.ndim == 1 else -1}
        if sizes != {n} or matrix.ndim != 2 or matrix.shape[0] != n:
            raise ValueError(
                "the index files disagree with each other (sizes or dimensions); rebuild the index"
            )
        table = cls(matrix.shape[1])
        metas: list[dict[str, Any]] = [{} for _ in range(n)]
        if store is not None:
            stored = read_from_store(store, [ids[i] for i in range(n) if alive[i]], what)
            if stored is not None:
                lookup = {cid: i for i, cid in enumerate(ids)}
                for cid, text, meta in zip(stored.ids, stored.texts, stored.metadatas, strict=True):
                    row_texts[lookup[cid]] = text or ""
                    metas[lookup[cid]] = dict(meta or {})
        table.rows = ChunkRows(ids=ids, doc_ids=doc_ids, texts=row_texts, metadatas=metas)
        table.alive = alive
        table.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        for i, (cid, did) in enumerate(zip(ids, doc_ids, strict=True)):
            if alive[i]:
                table.id_to_row[cid] = i
                table.doc_rows.setdefault(did, []).append(i)
        return table
