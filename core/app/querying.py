"""``bridge-rag query``: ask an index directory built by ``bridge-rag index``.

The strategy is read from ``DIR/sources.json``, or else from the strategy folder that holds
a saved index (``DIR/bridge``, ``DIR/umg``, ``DIR/bubble``). Results are printed for a person
(rank, score, source and title, how each was found, the start of its text) or, with
``--json``, as one JSON document.

Chunk texts and metadata come from the indexed files, so anything printed for a person goes
through :func:`strip_terminal_controls` first: a file cannot clear the screen, retitle the
window or hide lines through escape sequences. The JSON keeps every character (escaped).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from core.app.indexing import CommandError, load_index_dir
from core.app.sources import read_sources
from core.app.terminal import escape_raw_controls, plural, strip_terminal_controls

__all__ = [
    "format_results",
    "parse_filter_json",
    "provenance_lines",
    "results_json",
    "run_query",
]

#: Provenance keys shown first, in this order, when a result has them.
_SHOWN_FIRST = (
    "found_by",
    "fallback",
    "matched_entities",
    "abstract_id",
    "abstract_level",
    "depth",
    "granularity",
    "granularities",
    "promoted",
    "expert_scores",
    "covered_concepts",
    "ceg_rank",
    "evidence_triples",
    "hop",
    "hop_entities",
)
#: Keys never shown as provenance: positions, what is printed elsewhere, and what every result
#: of a query shares (UMG's per-list confidences, BubbleRAG's query concepts and graph nodes).
_NOT_SHOWN = frozenset(
    {
        "strategy",
        "score",
        "chunk_order",
        "start_index",
        "end_index",
        "sent_start",
        "sent_end",
        "confidences",
        "concepts",
        "nodes",
        "ceg_count",
    }
)
_TOP_EXPERTS = 4
_TEXT_LINES = 4
_WIDTH = 100


def parse_filter_json(text: str | None) -> dict[str, Any] | None:
    """A ``--filter`` argument as a Chroma where-filter, checked.

    Raises:
        CommandError: Not JSON, not an object, or a filter bridge-rag cannot honour.
    """
    if text is None:
        return None
    try:
        where = json.loads(text)
    except ValueError as exc:
        raise CommandError(
            f"--filter is not valid JSON ({exc}); give a Chroma where-filter such as "
            '\'{"source": "notes/a.md"}\''
        ) from None
    if not isinstance(where, dict):
        raise CommandError(f"--filter must be a JSON object (a Chroma where-filter), got {text!r}")
    from core.filters import FilterError, parse_filter

    try:
        parse_filter(where)
    except FilterError as exc:
        raise CommandError(f"--filter: {exc}") from None
    return where


def _short(value: Any, limit: int = 160) -> str:
    if isinstance(value, float):
        text = f"{value:.3f}"
    elif isinstance(value, list | tuple):
        text = ", ".join(_short(v, 60) for v in value)
    elif isinstance(value, Mapping):
        text = ", ".join(f"{k} {_short(v, 60)}" for k, v in value.items())
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def provenance_lines(metadata: Mapping[str, Any], keys: frozenset[str]) -> str:
    """How a result was found, as ``key: value`` pairs (``keys``: the strategy's provenance keys).

    The line is for a person: terminal controls in the values are removed.
    """
    shown = [k for k in _SHOWN_FIRST if k in keys] + sorted(k for k in keys if k not in _SHOWN_FIRST)
    parts = []
    for key in shown:
        value = metadata.get(key)
        if key in _NOT_SHOWN or value is None or value == [] or value == "" or value is False:
            continue
        if (key == "cosine" or key.endswith("_score") or key == "evidence") and value == 0:
            continue  # a score this result did not get
        if key == "expert_scores" and isinstance(value, Mapping):
            best = sorted(value.items(), key=lambda kv: -float(kv[1]))[:_TOP_EXPERTS]
            parts.append(f"experts: {_short(dict(best))}")
        elif key == "evidence_triples" and isinstance(value, list | tuple):
            parts.append(f"triples: {' | '.join(_short(t, 80) for t in value[:2])}")
        else:
            parts.append(f"{key}: {_short(value)}")
    if "sent_start" in metadata and "sent_end" in metadata:
        parts.append(f"sentences: {metadata['sent_start']}-{metadata['sent_end']}")
    return strip_terminal_controls("; ".join(parts))


def _trimmed(text: str) -> list[str]:
    lines = textwrap.wrap(" ".join(text.split()), _WIDTH) or [""]
    return (
        lines[:_TEXT_LINES]
        if len(lines) <= _TEXT_LINES
        else [*lines[: _TEXT_LINES - 1], lines[_TEXT_LINES - 1] + " ..."]
    )


def format_results(query: str, strategy: str, results: Sequence[Any], keys: frozenset[str]) -> str:
    """The human-readable answer of ``bridge-rag query``, without terminal controls (see the module)."""
    clean = strip_terminal_controls
    lines = [f"{plural(len(results), 'result')} from {clean(strategy)} for {clean(query)!r}"]
    for rank, r in enumerate(results, start=1):
        meta = r.metadata
        where = clean(str(meta.get("source", r.id)))
        title = clean(str(meta.get("title") or ""))
        head = f"{where} - {title}" if title and title != Path(where).stem else where
        lines.append("")
        lines.append(f"{rank}. [{r.score:.3f}] {head}")
        how = provenance_lines(meta, keys)
        if how:
            lines.append(f"   how: {how}")
        lines += [f"   {line}" for line in _trimmed(clean(r.text))]
    return "\n".join(lines)


def results_document(query: str, strategy: str, k: int, results: Sequence[Any]) -> dict[str, Any]:
    """The answer as a JSON-safe mapping: ``{"query", "strategy", "k", "results": [...]}``.

    Each result is ``{"id", "score", "text", "metadata"}`` with its provenance in the metadata,
    as ``bridge-rag query --json`` prints it and ``bridge-rag serve`` returns it.
    """
    from core.strategies.common import jsonable

    return {
        "query": query,
        "strategy": strategy,
        "k": k,
        "results": [
            {"id": r.id, "score": jsonable(float(r.score)), "text": r.text, "metadata": jsonable(r.metadata)}
            for r in results
        ],
    }


def results_json(query: str, strategy: str, k: int, results: Sequence[Any], *, indent: int | None = 2) -> str:
    r"""The ``--json`` answer (:func:`results_document` as text).

    Every character is kept: the control characters are written as ``\u`` escapes (DEL, C1
    and bidi controls too, which :func:`json.dumps` leaves raw), so no terminal acts on them.
    ``indent=None`` writes it on one line (one answer a line when questions come from standard input).
    """
    doc = results_document(query, strategy, k, results)
    return escape_raw_controls(json.dumps(doc, ensure_ascii=False, indent=indent))


class OpenIndex:
    """An index directory opened once for many questions (``query`` from standard input, ``serve``).

    Attributes:
        directory: The index directory.
        rag: The loaded strategy.
        name: The strategy's name (``bridge``, ``umg``, ``bubble``).
        keys: The provenance keys a person's answer shows.
    """

    def __init__(self, index_dir: str | Path, *, follow: bool = False) -> None:
        """Opens the index saved in ``index_dir``.

        Args:
            index_dir: A directory built by ``bridge-rag index``.
            follow: Pick up what later saves write (``--update``, another writer), as a
                long-running server must; a one-shot command reads the index once.

        Raises:
            CommandError: ``index_dir`` is not an index.
        """
        from core.strategies.base import COMMON_PROVENANCE_KEYS

        self.directory = Path(index_dir)
        record = read_sources(self.directory) if self.directory.is_dir() else None
        from core.onnx_embed import load_onnx_embedder

        embedder = load_onnx_embedder(self.directory) if self.directory.is_dir() else None
        self.rag = load_index_dir(self.directory, record, follow=follow, embedder=embedder)
        if embedder is not None and getattr(self.rag, "queries_use_spacy", False):
            from core.entities import import_spacy_without_torch

            import_spacy_without_torch()  # nothing here needs torch: a second less of start-up
        self.name = str(getattr(self.rag, "name", record.strategy if record else "?"))
        self.keys = COMMON_PROVENANCE_KEYS | frozenset(getattr(self.rag, "provenance_keys", frozenset()))

    def retrieve(self, query: str, *, k: int, where: Mapping[str, Any] | None = None) -> list[Any]:
        """The top ``k`` results for ``query`` (``where``: a checked Chroma where-filter).

        Raises:
            CommandError: The question is empty or ``k`` is below 1.
        """
        if k < 1:
            raise CommandError(f"-k must be at least 1, got {k}")
        if not query.strip():
            raise CommandError("the question is empty; pass the text to search for")
        options: dict[str, Any] = {} if where is None else {"filter": dict(where)}
        return list(self.rag.retrieve(query, k=k, **options))

    def close(self) -> None:
        """Stops following the index and releases what the strategy holds open."""
        close = getattr(self.rag, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> OpenIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_query(
    index_dir: str,
    query: str | None,
    *,
    k: int,
    filter_json: str | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
    questions: TextIO | None = None,
) -> int:
    """Runs ``bridge-rag query`` and prints the results.

    With ``query`` None the questions come from ``questions`` (standard input), one per line,
    and each answer is printed (and flushed) as it comes: ``--json`` writes one JSON object a
    line. The index is opened once for all of them; blank lines are skipped.

    Returns:
        How many results were printed.

    Raises:
        CommandError: ``index_dir`` is not an index, or the filter or k is invalid.
    """
    out = out or sys.stdout
    if k < 1:
        raise CommandError(f"-k must be at least 1, got {k}")
    if query is not None and not query.strip():
        raise CommandError("the question is empty; pass the text to search for")
    where = parse_filter_json(filter_json)
    printed = 0
    with OpenIndex(index_dir) as index:
        if query is not None:
            results = index.retrieve(query, k=k, where=where)
            text = (
                results_json(query, index.name, k, results)
                if as_json
                else format_results(query, index.name, results, index.keys)
            )
            print(text, file=out)
            return len(results)
        for line in questions if questions is not None else sys.stdin:
            question = line.strip()
            if not question:
                continue
            results = index.retrieve(question, k=k, where=where)
            if as_json:
                print(results_json(question, index.name, k, results, indent=None), file=out)
            else:
                print(format_results(question, index.name, results, index.keys) + "\n", file=out)
            out.flush()
            printed += len(results)
    return printed
