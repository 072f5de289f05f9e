"""`bridge-rag bench DATASET_DIR`: every strategy and its peers in one run, one table, one plot.

The all-strategies configuration of the one runner (:func:`core.evaluation.runner.run_suite`,
which says what is measured and how): one row per registry entry
(:mod:`core.evaluation.registry`), each queried as its entry says, ``k`` results per question
and every metric at ``k``, RAGAS's metrics on top (:mod:`core.evaluation.ragas_eval`: the
non-LLM ones always, the LLM ones when an LLM is passed). A strategy that cannot run here is
skipped, one that raises is reported; the others' figures still come.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Unpack

from core.evaluation.metrics import Dataset
from core.evaluation.registry import DEFAULT_STRATEGIES
from core.evaluation.result import ComparisonResult
from core.evaluation.runner import RunOptions, run_suite
from core.evaluation.suite import Suite, Variant, Versus

__all__ = ["ComparisonResult", "comparison_suite", "run_comparison"]


def comparison_suite(strategies: Sequence[str] | None = None, *, k: int = 5, ragas: bool = True) -> Suite:
    """The all-strategies comparison as a suite: one row per strategy, metrics at ``k``.

    Each query returns ``max(k, 10)`` results, so that passage recall is also reported at
    1, 2 and 10; answer recall, context words, RAGAS and the plot use the top ``k``. Beside them:
    recall@k minus dense retrieval's and minus the two-hop baseline's (points), and context
    words and p50 latency over dense's (ratios), each from the same run.

    Args:
        strategies: Registry names, in table order (None: every registered strategy).
        k: Results per question; the metrics are taken at k.
        ragas: Also compute the RAGAS metrics.

    Raises:
        TypeError / ValueError: A bad ``k``, or a strategy listed twice.
    """
    names = DEFAULT_STRATEGIES if strategies is None else tuple(strategies)
    versus = (
        Versus(f"R@{k} - dense", f"recall@{k}", "dense", include_reference=False),
        Versus(f"R@{k} - two-hop", f"recall@{k}", "two-hop", include_reference=False),
        Versus(f"words@{k} / dense", f"context_words@{k}", "dense", ratio=True, include_reference=False),
        Versus("p50 / dense", "p50_ms", "dense", ratio=True, include_reference=False),
    )
    return Suite(
        "all",
        tuple(Variant(name) for name in names),
        k=max(k, 10),
        ks=tuple(sorted({1, 2, k, 10})),
        answer_k=k,
        without_embedding=False,
        versus=versus,
        ragas=ragas,
        strict=False,
    )


def run_comparison(
    dataset: str | os.PathLike[str] | Dataset,
    *,
    strategies: Sequence[str] | None = None,
    k: int = 5,
    ragas: bool = True,
    **options: Unpack[RunOptions],
) -> ComparisonResult:
    """Builds and measures every requested strategy over the same data in one run.

    Args:
        dataset: A dataset directory (``corpus.jsonl`` + ``questions.jsonl``) or a
            :class:`~core.evaluation.Dataset` (e.g. :func:`core.evaluation.demo_dataset`).
        strategies: Names from :data:`core.evaluation.registry.STRATEGIES` (None: all of them).
            Those that cannot run here (a missing framework, a module that does not import)
            are skipped with a notice.
        k: Results per question; the metrics are taken at k.
        ragas: Also compute the RAGAS metrics (skipped with a notice if ragas is missing).
        **options: How the run goes (:class:`~core.evaluation.runner.RunOptions`: ``sample``,
            ``seed``, ``embedder``, ``llm`` for the RAGAS LLM metrics, ``show_progress``,
            ``notice``, ``shape``).

    Returns:
        The figures.

    Raises:
        FileNotFoundError: The dataset directory or one of its files is missing.
        ValueError: A malformed dataset (file, line and field named), an unknown strategy
            name, no strategy able to run, or a bad ``k`` or ``sample``.
        TypeError: ``k`` is not an int.
    """
    return run_suite(dataset, comparison_suite(strategies, k=k, ragas=ragas), **options)
