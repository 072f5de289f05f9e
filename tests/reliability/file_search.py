"""Searching every file under an index directory for what a delete must have removed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

#: Characters per searched stretch of a deleted text.
WINDOW = 24


def files_under(root: Path) -> Iterator[Path]:
    """Every regular file under ``root``, in path order."""
    yield from (p for p in sorted(root.rglob("*")) if p.is_file())


def text_windows(text: str) -> set[bytes]:
    """Overlapping ``WINDOW``-character stretches of ``text`` (whitespace runs as one space), as UTF-8."""
    words = re.sub(r"\s+", " ", text)
    return {words[i : i + WINDOW].encode() for i in range(0, len(words) - WINDOW + 1, 7)}
