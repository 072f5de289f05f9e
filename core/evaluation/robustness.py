"""The robustness table: every strategy and dense over every corpus shape, from saved bench runs.

Each ``bridge-rag bench DATASET --titles ... --documents ... --questions ... --out FILE.json``
run measures one corpus shape; :func:`robustness_table` reads their JSON and lays the R@k of
every strategy side by side, with its gain over dense retrieval in the same run, and
:func:`kept_gains` says how much of each strategy's gain on the dev corpora's own shape
(titles in metadata) it keeps on each other shape. ``bridge-rag bench-table FILE...`` prints
both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["kept_gains", "load_runs", "robustness_table", "variant_label"]

_REFERENCE = "dense"
_TITLES = {"meta": "titles in metadata", "text": "title as first line", "none": "no titles"}


def load_runs(paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Reads the JSON files of ``bridge-rag bench --out`` runs.

    Raises:
        FileNotFoundError: A file is missing.
        ValueError: A file is not a bench run's JSON (no ``dataset`` and ``rows``).
    """
    runs = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "rows" not in data or "dataset" not in data:
            raise ValueError(f"{path} is not the JSON of a bridge-rag bench run (no dataset and rows)")
        runs.append(data)
    return runs


def variant_label(run: Mapping[str, Any]) -> str:
    """A run's corpus shape and questions in a few words, e.g. ``titles none`` or ``grouped, text``."""
    shape = run.get("shape", {"titles": "meta", "documents": "passages"})
    titles = {"meta": "titles in metadata", "text": "title as first line", "none": "no titles"}[
        shape["titles"]
    ]
    if shape["documents"] == "own":
        label = f"its own documents, {titles}"
    elif shape["documents"] == "passages":
        label = titles
    else:
        label = f"{shape.get('sections', 20)}-section documents, {titles}"
    if "/" in str(run["dataset"]):
        label += f", {str(run['dataset']).split('/', 1)[1]} questions"
    return label


def _recall(run: Mapping[str, Any], strategy: str, k: int) -> float | None:
    for row in run["rows"]:
        if row["strategy"] == strategy:
            value = row.get(f"recall@{k}")
            return None if value is None else float(value)
    return None


def robustness_table(runs: Sequence[Mapping[str, Any]], *, k: int = 5) -> str:
    """A markdown table: one row per run (dataset and shape), one column per strategy.

    Each cell is R@k and, for every strategy but dense, its gain over dense in points.
    """
    strategies: list[str] = []
    for run in runs:
        for row in run["rows"]:
            if row["strategy"] not in strategies:
                strategies.append(row["strategy"])
    strategies.sort(key=lambda s: s != _REFERENCE)
    lines = [
        "| dataset | shape | " + " | ".join(strategies) + " |",
        "|---|---|" + "---:|" * len(strategies),
    ]
    for run in runs:
        dense = _recall(run, _REFERENCE, k)
        cells = []
        for s in strategies:
            r = _recall(run, s, k)
            if r is None:
                cells.append("-")
            elif s == _REFERENCE or dense is None:
                cells.append(f"{100 * r:.1f}")
            else:
                cells.append(f"{100 * r:.1f} ({100 * (r - dense):+.1f})")
        dataset = str(run["dataset"]).split("/", 1)[0]
        lines.append(f"| {dataset} | {variant_label(run)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kept_gains(runs: Sequence[Mapping[str, Any]], *, k: int = 5) -> str:
    """How much of its gain over dense on the titles-in-metadata shape each strategy keeps elsewhere.

    For every dataset with a titles-in-metadata run, each other run of that dataset (same
    questions) gets a line per strategy of the family ``ours``: its gain there as a share of
    its gain on the reference shape.
    """
    reference: dict[str, Mapping[str, Any]] = {}
    for run in runs:
        shape = run.get("shape", {"titles": "meta", "documents": "passages"})
        if shape["titles"] == "meta" and shape["documents"] == "passages":
            reference[str(run["dataset"])] = run
    lines = []
    for run in runs:
        base = reference.get(str(run["dataset"]))
        if base is None or base is run:
            continue
        parts = []
        for row in run["rows"]:
            s = row["strategy"]
            if row.get("family", "ours") != "ours":
                continue
            gain, base_gain = _gain(run, s, k), _gain(base, s, k)
            if gain is None or base_gain is None or base_gain <= 0:
                continue
            parts.append(f"{s} {gain:+.1f} of {base_gain:+.1f} ({100 * gain / base_gain:.0f} %)")
        if parts:
            lines.append(f"- {run['dataset']}, {variant_label(run)}: " + "; ".join(parts))
    return "\n".join(lines)


def _gain(run: Mapping[str, Any], strategy: str, k: int) -> float | None:
    r, d = _recall(run, strategy, k), _recall(run, _REFERENCE, k)
    return None if r is None or d is None else 100 * (r - d)
