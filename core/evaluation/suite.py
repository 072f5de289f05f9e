"""What a benchmark measures: a :class:`Suite` of rows, each a registry entry queried one way.

A suite is configuration only; :func:`core.evaluation.runner.run_suite` runs it. Its rows
(:class:`Variant`) name entries of :data:`core.evaluation.registry.STRATEGIES` with retrieve
options, config fields to change, or another way to query the built index; the suite says
how many results each query returns and where recall is cut, whether latency is also timed
without the query embedding, the columns it prints, columns comparing each row with a
reference row (:class:`Versus`), figures to read off a built index, and an extension that
measures more in the same session. The all-strategies comparison
(:mod:`core.evaluation.comparison`) and the per-strategy suites
(:mod:`~core.evaluation.bridge_suite`, :mod:`~core.evaluation.umg_suite`,
:mod:`~core.evaluation.bubble_suite`) are such configurations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.evaluation.metrics import markdown_table
from core.evaluation.registry import Query, reject_repeated
from core.strategies.base import check_k

if TYPE_CHECKING:
    from core.evaluation.runner import Session

__all__ = ["SUITE_COLUMNS", "SUITE_HEADERS", "Suite", "Variant", "Versus"]

#: Reads figures off a built index while it is alive (e.g. BubbleRAG's graph size).
Inspect = Callable[[Any], Mapping[str, Any]]

#: The columns the per-strategy suites print, before their :class:`Versus` columns.
SUITE_COLUMNS: tuple[str, ...] = (
    "strategy",
    "recall@2",
    "recall@5",
    "recall@10",
    "answer_recall@5",
    "context_words@5",
    "p50_ms",
    "p95_ms",
    "p50_no_embed_ms",
    "build_alone_s",
)
#: The suites' header text: their build column is each row's build on its own.
SUITE_HEADERS: Mapping[str, str] = {"build_alone_s": "build_s"}


@dataclass(frozen=True)
class Variant:
    """One row of a suite: a registry entry, queried one way.

    Attributes:
        strategy: The registry entry (:data:`~core.evaluation.registry.STRATEGIES`) whose
            build the row queries; rows whose entries share a build key share one build.
        label: The row's name in the table (default: the entry's name).
        options: Retrieve options on top of the entry's (``depth=2``, ``parent_promotion=True``).
        config: Fields of the built index's ``config`` replaced while this row runs and
            restored afterwards: a variant that needs no build of its own (Bridge-RAG's
            paper variant).
        query: How to query the built index, instead of the entry's way (one UMG expert).
        build_steps: The row needs only these steps of the build (a UMG expert alone:
            ``("units", "sparse")``); its ``build_alone_s`` is their sum. None: the whole build.
    """

    strategy: str
    label: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    query: Query | None = None
    build_steps: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        """The row's name."""
        return self.label or self.strategy


@dataclass(frozen=True)
class Versus:
    """A column comparing each row with a reference row: the difference, or the ratio.

    Attributes:
        column: The new column's name.
        metric: The column compared (``"recall@5"``, ``"p50_ms"``, ...).
        reference: The reference row's name.
        ratio: ``row / reference`` when True, ``row - reference`` otherwise.
        include_reference: Whether the reference row gets the column too (0 or 1).
    """

    column: str
    metric: str
    reference: str
    ratio: bool = False
    include_reference: bool = True

    def apply(self, rows: Sequence[dict[str, Any]]) -> None:
        """Adds the column to ``rows`` (nothing when the reference row is not among them)."""
        ref = next((r for r in rows if r["strategy"] == self.reference), None)
        if ref is None:
            return
        base = float(ref[self.metric])
        for row in rows:
            if row is not ref or self.include_reference:
                value = float(row[self.metric])
                if self.ratio:
                    row[self.column] = value / base if base else math.nan
                else:
                    row[self.column] = value - base


@dataclass(frozen=True)
class Suite:
    """A benchmark configuration: which rows to measure and what to print.

    Attributes:
        name: The suite's name; for a per-strategy suite also the registry entry whose build
            its summary reports (``{name}_build_s``).
        variants: The rows, in table order.
        k: Results per query.
        ks: The k of each passage recall column.
        answer_k: The k of the answer recall and context words columns.
        without_embedding: Also time each row that has a ``by_vector`` query with the query
            embedding computed beforehand (``p50_no_embed_ms``).
        columns: The printed table's columns, before the :attr:`versus` columns.
        headers: Header text of some columns (default: the column's key).
        versus: Columns comparing every row with a reference row.
        settings: Per build key, keyword arguments for the builder (``{"umg": {"splade": True}}``).
        inspect: Per build key, figures read off the built index (kept in the build's figures).
        extend: Measures more in the same session after the rows (its dict lands in
            :attr:`ComparisonResult.extras <core.evaluation.result.ComparisonResult.extras>`).
        ragas: Also compute the RAGAS metrics.
        strict: A failing build or query, or a row that cannot run here, aborts the run
            (the per-strategy suites); otherwise it is reported and the others still run.

    Raises:
        TypeError / ValueError: A bad ``k`` or ``ks``, or two rows with one name.
    """

    name: str
    variants: tuple[Variant, ...]
    k: int = 10
    ks: tuple[int, ...] = (2, 5, 10)
    answer_k: int = 5
    without_embedding: bool = True
    columns: tuple[str, ...] = SUITE_COLUMNS
    headers: Mapping[str, str] = field(default_factory=lambda: dict(SUITE_HEADERS))
    versus: tuple[Versus, ...] = ()
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    inspect: Mapping[str, Inspect] = field(default_factory=dict)
    extend: Callable[[Session], dict[str, Any]] | None = None
    ragas: bool = False
    strict: bool = True

    def __post_init__(self) -> None:
        for k in (self.k, *self.ks, self.answer_k):
            check_k(k, 1)
        reject_repeated([v.name for v in self.variants])

    def table(self, rows: Sequence[dict[str, Any]]) -> str:
        """The suite's markdown table of ``rows``."""
        columns = [*self.columns, *(v.column for v in self.versus)]
        return markdown_table(rows, columns, self.headers)
