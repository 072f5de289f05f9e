"""Builds on every core: how many workers a build uses, and the per-chunk work spread over them.

A build's ``workers`` (library ``workers=``, CLI ``--workers``; default: the cores this process
may run on) sets two things while the build runs:

- the torch intra-op threads that embed (restored afterwards); the vectors are the same bits
  whatever the count, since the batches are the same and the model splits no reduction by
  thread;
- the processes of the per-chunk text work: entity extraction, BubbleRAG's triples. The
  texts go out in fixed batches to forked workers that inherit the loaded model (no pickling,
  no second load) and come back in input order, so the result equals one process's result.

Only an extractor that says it may be forked (``fork_safe = True``: the spaCy and rule-based
ones) is spread. Declare it only for an extractor whose work in the child runs no torch or
other OpenMP code the parent has started (that state does not survive a fork). An LLM
extractor, or any other, runs in this process. Without the ``fork`` start method (Windows, or
macOS by policy), or for a small batch of texts, everything runs in this process too.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm.auto import tqdm

from core.ingest.precomputed import precomputed_entities

__all__ = [
    "MIN_TEXTS_PER_WORKER",
    "available_cores",
    "check_workers",
    "extract_entities",
    "map_texts",
    "using_cores",
]

T = TypeVar("T")
R = TypeVar("R")

#: Below this many texts per worker, forking costs more than it saves: one process does it.
MIN_TEXTS_PER_WORKER = 200
_BATCH = 256

# The batch function of the map being run; forked workers inherit it (never pickled).
_TASK: Callable[[Sequence[Any]], list[Any]] | None = None


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def check_workers(workers: int | None) -> int:
    """A build's worker count: ``workers``, or the available cores when None.

    Raises:
        ValueError: ``workers`` is not a positive integer.
    """
    if workers is None:
        return available_cores()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer (or None for every core), got {workers!r}")
    return workers


@contextmanager
def using_cores(workers: int) -> Iterator[None]:
    """Torch on ``workers`` intra-op threads meanwhile (when torch is loaded), restored afterwards."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(workers)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_task(batch: Sequence[Any]) -> list[Any]:
    assert _TASK is not None, "a worker runs only inside map_texts"
    return _TASK(batch)


def _can_fork(worker: Any) -> bool:
    return bool(getattr(worker, "fork_safe", False)) and "fork" in multiprocessing.get_all_start_methods()


def map_texts(
    fn: Callable[[Sequence[T]], list[R]],
    items: Sequence[T],
    *,
    workers: int,
    owner: Any = None,
    desc: str = "extracting",
    show_progress: bool = False,
) -> list[R]:
    """``fn`` over ``items`` in batches, on up to ``workers`` forked processes; results in input order.

    Args:
        fn: Maps a batch to one result per item (a bound method of ``owner``, typically).
        items: The inputs.
        workers: Processes to use at most.
        owner: The object whose ``fork_safe`` attribute says ``fn`` may run in a forked child;
            anything else runs here.
        desc: The progress bar's label.
        show_progress: Show a bar counting items done, across workers.

    Returns:
        ``fn``'s results, one per item, in the order of ``items``.
    """
    global _TASK
    batches = [items[i : i + _BATCH] for i in range(0, len(items), _BATCH)]
    spread = min(workers, len(items) // MIN_TEXTS_PER_WORKER)
    out: list[R] = []
    with tqdm(total=len(items), desc=desc, unit="text", disable=not show_progress, leave=False) as bar:
        if spread < 2 or not _can_fork(owner):
            for batch in batches:
                out += fn(batch)
                bar.update(len(batch))
            return out
        _TASK = fn
        try:
            with multiprocessing.get_context("fork").Pool(spread) as pool:
                for batch, done in zip(batches, pool.imap(_run_task, batches), strict=True):
                    out += done
                    bar.update(len(batch))
        finally:
            _TASK = None
    return out


def extract_entities(
    extractor: Any,
    texts: Sequence[str],
    *,
    workers: int,
    ids: Sequence[str] | None = None,
    metadatas: Sequence[Mapping[str, Any] | None] | None = None,
    show_progress: bool = False,
    desc: str = "extracting entities",
) -> tuple[list[list[str]], int]:
    """Each text's entities: those its metadata carries (:mod:`core.ingest.precomputed`), else extracted.

    Args:
        extractor: The entity extractor (``core.entities``).
        texts: The chunks' texts.
        workers: Processes the extraction may use (:func:`map_texts`).
        ids: The chunks' ids, with ``metadatas`` (named in errors).
        metadatas: The chunks' metadata; None: nothing precomputed, extract every text.
        show_progress: Show a progress bar.
        desc: Its label.

    Returns:
        The names per text, and how many texts the extractor ran on.

    Raises:
        ValueError: A chunk's precomputed value is malformed.
    """
    if metadatas is None:
        known: list[list[str] | None] = [None] * len(texts)
    else:
        chunk_ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
        known = precomputed_entities(metadatas, chunk_ids, str(getattr(extractor, "name", "")))
    todo = [i for i, names in enumerate(known) if names is None]
    found = map_texts(
        extractor.extract,
        [texts[i] for i in todo],
        workers=workers,
        owner=extractor,
        desc=desc,
        show_progress=show_progress,
    )
    for i, names in zip(todo, found, strict=True):
        known[i] = names
    return [names if names is not None else [] for names in known], len(todo)
