"""Data files shipped with bridge-rag: the small offline demo corpus and its questions.

The corpus describes a fictional river valley (the town of Marrowick on the River Tessel, the city of
Corvane, their institutions and people). Its documents share named entities, so many of the demo
questions can only be answered by combining two or more documents. The files live in the
``core.data`` package and are read with :mod:`importlib.resources`, so they work from an installed
wheel as well as from a source tree.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from core.types import Document

__all__ = ["DEMO_SOURCE", "load_demo_corpus", "load_demo_questions"]

DEMO_SOURCE = "bridge-rag demo corpus"
_CORPUS_FILE = "demo_corpus.jsonl"
_QUESTIONS_FILE = "demo_questions.jsonl"


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    """Read one JSON-lines file from the ``core.data`` package.

    Args:
        name: The file name inside ``core.data``.

    Returns:
        One dict per non-blank line, in file order.

    Raises:
        ValueError: If a line is not a JSON object.
    """
    text = files("core.data").joinpath(name).read_text(encoding="utf-8")
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"{name}:{lineno}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def load_demo_corpus() -> list[Document]:
    """Load the demo corpus as documents.

    Each document's text is its title, a newline, and its body; its id is the corpus id (for example
    ``"ilse-varga"``), and its metadata holds the title and the source ``"bridge-rag demo corpus"``.

    Returns:
        The demo documents (between 40 and 50), in corpus order.

    Example:
        >>> docs = load_demo_corpus()
        >>> docs[0].id
        'marrowick'
    """
    return [
        Document(
            text=f"{row['title']}\n{row['text']}",
            id=str(row["id"]),
            metadata={"title": row["title"], "source": DEMO_SOURCE},
        )
        for row in _read_jsonl(_CORPUS_FILE)
    ]


def load_demo_questions() -> list[dict[str, Any]]:
    """Load the demo questions.

    Each question is a dict with the keys ``"id"``, ``"question"``, ``"answer"`` (a string that occurs
    verbatim in one of the supporting documents) and ``"supporting_ids"`` (the ids of the demo documents
    needed to answer it; most questions need two or more).

    Returns:
        The demo questions, in file order.

    Example:
        >>> questions = load_demo_questions()
        >>> questions[0]["answer"]
        'Halden Institute'
    """
    return _read_jsonl(_QUESTIONS_FILE)
