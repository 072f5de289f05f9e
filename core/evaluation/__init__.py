"""Evaluation and benchmarks: datasets, metrics, the comparison runner and its suites.

Kept apart from the library: the strategies never import this package. It is the only part
of ``core`` that touches LangChain or LlamaIndex (the peer retrievers in :mod:`.peers`), and
only lazily, inside the functions that build them. :mod:`.metrics` holds the datasets and
metrics re-exported here; :mod:`.registry` names every strategy and peer the runner knows;
:mod:`.runner` is the one runner and :mod:`.suite` what it is configured with:
:mod:`.comparison` (every strategy and the peers) and the ``*_suite`` modules (one strategy
each) are such configurations; :mod:`.scale`, :mod:`.reliability` and
:mod:`.filter_benchmark` measure the rest.
"""

from core.evaluation.metrics import *  # noqa: F403
from core.evaluation.metrics import __all__ as _metrics_all

__all__ = list(_metrics_all)
