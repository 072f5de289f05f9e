"""Per-query confidence of a ranked list, from the entropy of its score distribution (UMG-RAG)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["check_temperature", "entropy_confidence", "minmax_normalize", "standardize"]


def check_temperature(temperature: object) -> float:
    """``temperature`` if it is a positive finite number.

    Raises:
        ValueError: Any other value.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    return float(temperature)


def entropy_confidence(scores: npt.ArrayLike, temperature: float = 0.1) -> float:
    """Confidence of one expert's list: how peaked its score distribution is.

    With the list's top-N scores ``s_1..s_N``::

        p_i = exp(s_i / T) / sum_j exp(s_j / T)          (softmax, temperature T)
        H   = -sum_i p_i * log(p_i)                       (entropy, natural log)
        c   = 1 - H / log(N)                              (N >= 2; c = 1 when N == 1)

    A flat list (the expert cannot tell its candidates apart) has ``H = log N`` and
    ``c = 0``; a list dominated by one candidate has ``H -> 0`` and ``c -> 1``. The softmax is
    computed stably (max subtracted); non-finite scores are ignored.

    Args:
        scores: The list's scores (any order).
        temperature: Softmax temperature T > 0; smaller values sharpen the distribution.
            Scores on different scales (cosine vs BM25) call for different temperatures, so
            callers usually standardise scores first (see :func:`standardize`).

    Returns:
        The confidence, in [0, 1]; 0.0 for an empty list.

    Raises:
        ValueError: ``temperature`` is not a positive finite number.
    """
    check_temperature(temperature)
    s = np.asarray(scores, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    n = s.size
    if n == 0:
        return 0.0
    if n == 1:
        return 1.0
    z = (s - s.max()) / temperature
    p = np.exp(z)
    p /= p.sum()
    nz = p[p > 0]
    h = float(-(nz * np.log(nz)).sum())
    return float(min(1.0, max(0.0, 1.0 - h / math.log(n))))


def minmax_normalize(scores: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Scales scores to [0, 1] (best = 1); a constant list maps to all ones."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0:
        return s
    lo, hi = float(s.min()), float(s.max())
    if hi - lo <= 1e-12:
        return np.ones_like(s)
    out: npt.NDArray[np.float64] = (s - lo) / (hi - lo)
    return out


def standardize(scores: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """z-scores of a list, ``(s - mean) / std``; a constant (or one-element) list maps to zeros.

    Standardised scores put experts with different score scales on one footing before
    :func:`entropy_confidence`: a cosine list (scores packed near 0.6) and a BM25 list
    (scores spread from 2 to 20) are then judged by the shape of their distribution only,
    not by their units.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size < 2:
        return np.zeros_like(s)
    sd = float(s.std())
    if sd <= 1e-12:
        return np.zeros_like(s)
    out: npt.NDArray[np.float64] = (s - float(s.mean())) / sd
    return out
