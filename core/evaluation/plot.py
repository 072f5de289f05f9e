"""The comparison plot: passage recall@k against median query latency, one labelled point per strategy.

Drawn on a bare :class:`matplotlib.figure.Figure` with the Agg canvas, so it neither needs a
display nor changes pyplot's backend (a notebook keeps its inline backend).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["plot_recall_latency"]

_COLORS = {"ours": "tab:red", "baseline": "tab:blue", "peer": "tab:green"}
_FAMILY_LABELS = {"ours": "bridge-rag", "baseline": "baseline", "peer": "framework peer"}


def plot_recall_latency(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str] | None = None,
    *,
    k: int = 5,
    title: str = "",
) -> Any:
    """Draws recall@k (y) against p50 latency (x) and optionally saves it as a PNG.

    Args:
        rows: Table rows with ``strategy``, ``recall@{k}``, ``p50_ms`` and optionally
            ``family`` (``ours``, ``baseline`` or ``peer``: the point's colour).
        path: Where to save the PNG; None = do not save.
        k: The k of the recall column.
        title: Plot title.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: No rows, or a row without the needed columns.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib ships with the eval extra
        raise ImportError(f"the plot needs matplotlib: pip install 'bridge-rag[eval]' ({exc})") from exc
    key = f"recall@{k}"
    if not rows:
        raise ValueError("nothing to plot: no rows")
    for row in rows:
        missing = [c for c in ("strategy", key, "p50_ms") if row.get(c) is None]
        if missing:
            raise ValueError(
                f"row {row.get('strategy')!r} lacks {missing[0]!r}; plot rows from one run at k={k}"
            )
    fig = Figure(figsize=(8.0, 5.5), dpi=120, layout="constrained")
    canvas: Any = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = [float(r["p50_ms"]) for r in rows]
    ys = [float(r[key]) for r in rows]
    seen: set[str] = set()
    for row, x, y in zip(rows, xs, ys, strict=True):
        family = str(row.get("family", "ours"))
        label = _FAMILY_LABELS.get(family, family) if family not in seen else None
        seen.add(family)
        ax.scatter([x], [y], s=60, color=_COLORS.get(family, "tab:gray"), label=label, zorder=3)
    positive = [x for x in xs if x > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("p50 query latency, ms (query embedding included)")
    ax.set_ylabel(f"passage recall@{k}")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, zorder=0)
    ax.margins(x=0.2, y=0.12)
    fig.legend(loc="outside lower center", ncols=len(seen), fontsize=8)
    _place_labels(ax, canvas.get_renderer(), [str(r["strategy"]) for r in rows], xs, ys)
    if path is not None:
        fig.savefig(os.fspath(path), format="png")
    return fig


#: Label offsets tried in turn (points), with their horizontal and vertical alignment.
_OFFSETS = (
    (6, 4, "left", "bottom"),
    (6, -4, "left", "top"),
    (-6, 4, "right", "bottom"),
    (-6, -4, "right", "top"),
    (6, 14, "left", "bottom"),
    (6, -14, "left", "top"),
    (-6, 14, "right", "bottom"),
    (-6, -14, "right", "top"),
)


def _place_labels(ax: Any, renderer: Any, labels: list[str], xs: list[float], ys: list[float]) -> None:
    """Labels every point at the first offset where it overlaps no label placed before it."""
    fig = ax.get_figure()
    fig.draw_without_rendering()  # fix the layout, so label positions are final
    placed: list[Any] = []
    for text, x, y in zip(labels, xs, ys, strict=True):
        best = None
        for dx, dy, ha, va in _OFFSETS:
            ann = ax.annotate(
                text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=9, zorder=4
            )
            box = ann.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                best = (ann, box)
                break
            ann.remove()
        if best is None:  # crowded everywhere: keep the first position
            dx, dy, ha, va = _OFFSETS[0]
            ann = ax.annotate(
                text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=9, zorder=4
            )
            best = (ann, ann.get_window_extent(renderer))
        placed.append(best[1])
