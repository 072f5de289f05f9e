"""Probes for async tests: how many waits overlapped, and whether the event loop kept running."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Overlap:
    """Counts how many :meth:`wait` calls run at the same time (``peak``)."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def wait(self, seconds: float) -> None:
        """Sleeps without blocking the loop, counted as one concurrent wait."""
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(seconds)
        self.now -= 1


def run_beside_a_ticker(make: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Runs ``make()`` in a new loop beside a coroutine that ticks every 10 ms; (result, ticks).

    Ticks counted while ``make()`` is awaited show that the loop kept running (a call that
    blocked it would leave them at 0 or 1).
    """

    async def main() -> tuple[Any, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        result = await make()
        done.set()
        await task
        return result, ticks

    return asyncio.run(main())
