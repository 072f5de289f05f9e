"""Keeping numpy's BLAS on one thread where a query mixes small matrix products with a model.

OpenBLAS threads spin for a while after each product; on a small machine they then compete
with the embedding model's own threads, and a query that alternates between the two can
take several times longer than either part alone (measured on BubbleRAG: p50 52 -> 35 ms,
worst of 100 queries 148 -> 51 ms on 2 cores). The products in a query are small and
memory-bound, so one thread loses nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["single_threaded_blas"]

_controller: Any = None
_lock = threading.Lock()


def _get_controller() -> Any:
    global _controller
    with _lock:
        if _controller is None:
            try:
                from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
            except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
                _controller = False
            else:
                _controller = ThreadpoolController()
        return _controller


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limits numpy's BLAS to one thread inside the block (a no-op without threadpoolctl).

    The limit is process-wide while the block runs, which only affects the speed of other
    threads' products, never their results.
    """
    controller = _get_controller()
    if not controller:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield
