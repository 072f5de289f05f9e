"""Peak resident memory of a phase of work, sampled by a background thread (psutil).

``resource.getrusage`` only knows the peak of the whole process, which never goes down, so
a phase's own peak is measured by sampling the resident set size (RSS) every few
milliseconds while the phase runs. The figures are process-wide: memory a phase allocated
and kept, and anything other threads did meanwhile, counts too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["PeakMemory", "current_rss_mib", "measure_peak_rss"]

_MIB = 1024.0 * 1024.0


def _process() -> Any:
    """This process, as a ``psutil.Process``.

    Raises:
        ImportError: psutil is not installed.
    """
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - psutil ships with the test and eval extras
        raise ImportError("the memory figures need psutil: pip install 'bridge-rag[eval]'") from exc
    return psutil.Process()


def current_rss_mib() -> float:
    """This process's resident set size in MiB (psutil).

    Raises:
        ImportError: psutil is not installed.
    """
    return float(_process().memory_info().rss) / _MIB


@dataclass
class PeakMemory:
    """RSS figures of one phase, in MiB.

    Attributes:
        start_mib: RSS when the phase began.
        peak_mib: Highest RSS seen during the phase.
        end_mib: RSS when the phase ended.
        samples: How many samples were taken.
    """

    start_mib: float = 0.0
    peak_mib: float = 0.0
    end_mib: float = 0.0
    samples: int = 0

    @property
    def added_mib(self) -> float:
        """Peak above the starting RSS: what the phase needed on top of what was there."""
        return max(0.0, self.peak_mib - self.start_mib)


@contextmanager
def measure_peak_rss(interval_s: float = 0.01) -> Iterator[PeakMemory]:
    """Samples this process's RSS until the ``with`` block ends.

    Args:
        interval_s: Seconds between samples.

    Yields:
        A :class:`PeakMemory` that is filled in when the block ends.

    Raises:
        ImportError: psutil is not installed.
        ValueError: ``interval_s`` is not positive.
    """
    if not interval_s > 0:
        raise ValueError(f"interval_s must be positive, got {interval_s}")
    proc = _process()
    result = PeakMemory()
    peak = start = proc.memory_info().rss
    count = 1
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak, count
        while not stop.wait(interval_s):
            rss = proc.memory_info().rss
            count += 1
            peak = max(peak, rss)

    thread = threading.Thread(target=sample, name="peak-rss", daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        end = proc.memory_info().rss
        result.start_mib = start / _MIB
        result.end_mib = end / _MIB
        result.peak_mib = max(peak, end) / _MIB
        result.samples = count + 1
