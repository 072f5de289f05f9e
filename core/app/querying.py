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
from core.app.terminal import escape_raw_controls, strip_terminal_controls

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
    lines = [f"{len(results)} results from {clean(strategy)} for {clean(query)!r}"]
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


def results_json(query: str, strategy: str, k: int, results: Sequence[Any]) -> str:
    r"""The ``--json`` answer.

    ``{"query", "strategy", "k", "results": [{"id", "score", "text", "metadata"}]}``, metadata
    made JSON-safe. Every character is kept: the control characters are written as ``\u``
    escapes (DEL, C1 and bidi controls too, which :func:`json.dumps` leaves raw), so no terminal acts on them.
    """
    from core.strategies.common import jsonable

    doc = {
        "query": query,
        "strategy": strategy,
        "k": k,
        "results": [
            {"id": r.id, "score": jsonable(float(r.score)), "text": r.text, "metadata": jsonable(r.metadata)}
            for r in results
        ],
    }
    return escape_raw_controls(json.dumps(doc, ensure_ascii=False, indent=2))


def run_query(
    index_dir: str,
    query: str,
    *,
    k: int,
    filter_json: str | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Runs ``bridge-rag query`` and prints the results.

    Returns:
        How many results were printed.

    Raises:
        CommandError: ``index_dir`` is not an index, or the filter or k is invalid.
    """
    out = out or sys.stdout
    if k < 1:
        raise CommandError(f"-k must be at least 1, got {k}")
    if not query.strip():
        raise CommandError("the question is empty; pass the text to search for")
    where = parse_filter_json(filter_json)
    directory = Path(index_dir)
    record = read_sources(directory) if directory.is_dir() else None
    rag = load_index_dir(directory, record)
    try:
        options: dict[str, Any] = {} if where is None else {"filter": where}
        results = rag.retrieve(query, k=k, **options)
    finally:
        close = getattr(rag, "close", None)
        if callable(close):
            close()
    name = str(getattr(rag, "name", record.strategy if record else "?"))
    from core.strategies.base import COMMON_PROVENANCE_KEYS

    keys = COMMON_PROVENANCE_KEYS | frozenset(getattr(rag, "provenance_keys", frozenset()))
    print(
        results_json(query, name, k, results) if as_json else format_results(query, name, results, keys),
        file=out,
    )
    return len(results)
