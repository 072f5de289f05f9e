"""A query's direct evidence: how well each unit matches the question itself, before any hop.

Every strategy ranks its units by what the question says directly (its meaning and its exact
words) plus what its structures add (entity evidence, evidence graphs, the entity-hop walk).
The direct part is computed here, once, for all of them:

- **dense**: the cosine of the query with the unit's embedding;
- **lexical**: the unit's BM25 score over the best score the query's words could reach
  (:meth:`core.lexical.LexicalIndex.evidence`), in [0, 1]: names, dates, amounts and
  identifiers the question repeats verbatim are strong evidence in report-like text, and a
  dense model blurs them.

A unit's *direct score* is ``cosine + lexical_weight * lexical``. The lexical index's best
hits join a strategy's candidates beside the dense ones (:meth:`DirectEvidence.lexical_hits`),
and the walk ranks and seeds by the direct score, so the passages it starts from are those
that match the question in meaning or in words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.lexical import LexicalIndex
from core.strategies.common import row_cosines
from core.strategies.entity_links import confident_units
from core.strategies.table import ChunkTable

__all__ = ["DirectConfig", "DirectEvidence"]

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DirectConfig:
    """How a strategy weighs a unit's direct evidence (the strategies' configs derive from it).

    Attributes:
        lexical_weight: Weight of the lexical evidence (BM25 over the best the query's words
            could reach, in [0, 1]) beside the cosine in a unit's direct score; 0 = dense only.
        lexical_pool: Lexical hits (the units with the best BM25 scores) added to the
            candidates beside the dense ones; None = as many as the strategy's dense pool
            or k, whichever is larger; 0 = none.
        cover_named: When the question names several subjects (the things units are about:
            two companies, two films), the top k holds a unit of each before a second unit
            of one already covered (:func:`core.strategies.entity_links.cover_named`).
        confident_z: A unit of the direct ranking (dense and lexical hits by direct score)
            whose score stands this many standard deviations above the ranking's mean is a
            confident direct match: hops may move it down but not out of the top k
            (:func:`core.strategies.entity_links.keep_confident`); a large value (1e9) turns the guard off.
    """

    lexical_weight: float = 0.2
    lexical_pool: int | None = None
    cover_named: bool = True
    confident_z: float = 2.0

    def direct_checks(self) -> list[tuple[str, bool]]:
        """Range checks of the direct-evidence settings, as a strategy config's ``checks()`` lists them."""
        return [
            (
                "lexical_weight must be finite and >= 0",
                math.isfinite(self.lexical_weight) and self.lexical_weight >= 0,
            ),
            ("lexical_pool must be None or >= 0", self.lexical_pool is None or self.lexical_pool >= 0),
            ("confident_z must be > 0", self.confident_z > 0),
        ]


class DirectEvidence:
    """One query's direct evidence over a table's rows.

    Args:
        table: The strategy's rows.
        query: The question.
        query_vector: Its unit-length embedding.
        config: The weights.
        lexical: The lexical index to read (UMG-RAG's of one window size); None: the table's
            own, over all its live rows (:meth:`core.strategies.table.ChunkTable.lexical`).
    """

    def __init__(
        self,
        table: ChunkTable,
        query: str,
        query_vector: FloatArray,
        config: DirectConfig,
        *,
        lexical: LexicalIndex | None = None,
    ) -> None:
        self.table = table
        self.query_vector = query_vector
        self.weight = float(config.lexical_weight)
        self._config = config
        n_rows = len(table)
        if self.weight > 0:
            self.lexical: FloatArray = (lexical or table.lexical()).evidence(query, n_rows)
        else:
            self.lexical = np.zeros(n_rows, dtype=np.float32)

    def cosine(self, rows: IntArray) -> npt.NDArray[np.float64]:
        """The cosine of the query with each of ``rows``."""
        return row_cosines(self.query_vector, self.table.matrix, rows).astype(np.float64)

    def lexical_of(self, rows: IntArray) -> npt.NDArray[np.float64]:
        """The lexical evidence of each of ``rows``."""
        if not rows.size:
            return np.zeros(0, dtype=np.float64)
        inside = rows < self.lexical.shape[0]
        out = np.zeros(rows.shape[0], dtype=np.float64)
        out[inside] = self.lexical[rows[inside]]
        return out

    def score(self, rows: IntArray) -> npt.NDArray[np.float64]:
        """The direct score of each of ``rows``: cosine plus ``lexical_weight`` x lexical evidence."""
        rows = np.asarray(rows, dtype=np.int64)
        return self.cosine(rows) + self.weight * self.lexical_of(rows)

    def ranked(self, rows: Iterable[int]) -> list[tuple[int, float, float, float]]:
        """``rows`` (each once), best direct score first (ties: lower row).

        Returns:
            ``(row, direct score, cosine, lexical evidence)`` tuples.
        """
        unique = np.asarray(list(dict.fromkeys(int(r) for r in rows)), dtype=np.int64)
        if not unique.size:
            return []
        cos, lex = self.cosine(unique), self.lexical_of(unique)
        scores = cos + self.weight * lex
        order = np.lexsort((unique, -scores))
        return list(
            zip(
                unique[order].tolist(),
                scores[order].tolist(),
                cos[order].tolist(),
                lex[order].tolist(),
                strict=True,
            )
        )

    def confident(self, ranked: Sequence[tuple[int, float, float, float]]) -> list[int]:
        """The rows of a direct ranking (:meth:`ranked`) that stand out of it, best first.

        Those standing ``confident_z`` standard deviations above the ranking's mean
        (:func:`~core.strategies.entity_links.confident_units`): hops may move them down but
        not out of the top k (:func:`~core.strategies.entity_links.keep_confident`).
        """
        return confident_units([(row, score) for row, score, _, _ in ranked], z=self._config.confident_z)

    def lexical_hits(self, n: int, allowed: npt.NDArray[np.bool_]) -> list[int]:
        """The ``n`` allowed rows of best lexical evidence (those with any), best first (ties: lower row)."""
        if n <= 0 or self.weight <= 0:
            return []
        m = min(allowed.shape[0], self.lexical.shape[0])
        values = np.where(allowed[:m], self.lexical[:m], np.float32(0.0))
        rows = np.flatnonzero(values > 0)
        if not rows.size:
            return []
        if rows.size > n:
            part = np.argpartition(-values[rows], n - 1)[:n]
            rows = rows[part]
        best: list[int] = rows[np.lexsort((rows, -values[rows]))].tolist()
        return best

    def pool(self, dense_pool: int) -> int:
        """How many lexical hits join the candidates beside a dense pool of ``dense_pool`` (at least k)."""
        size = self._config.lexical_pool
        return dense_pool if size is None else size
