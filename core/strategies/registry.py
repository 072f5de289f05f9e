"""Strategy names -> strategy classes, for code that picks a strategy by name.

(The benchmarks' own registry, :mod:`core.evaluation.registry`, says how each strategy and
peer is built and queried in a run; this one only names the strategy classes.)

The built-in strategies are imported on first use (each pulls in its own dependencies);
a fourth strategy registers itself with :func:`register_strategy`.
"""

from __future__ import annotations

import importlib

from core.strategies.base import Strategy

__all__ = ["available_strategies", "get_strategy", "register_strategy"]

#: Built-in strategies: name -> (module, class name).
_BUILTIN = {
    "bridge": ("core.strategies.bridge", "BridgeRAG"),
    "umg": ("core.strategies.umg", "UMGRAG"),
    "bubble": ("core.strategies.bubble", "BubbleRAG"),
}
_REGISTERED: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Registers a strategy class under its ``name`` (usable as a class decorator).

    Raises:
        TypeError: ``cls`` does not meet the :class:`Strategy` contract.
        ValueError: The name is taken by another class.
    """
    missing = [
        m for m in ("name", "provenance_keys", "from_documents", "from_store", "load") if not hasattr(cls, m)
    ]
    if missing:
        raise TypeError(f"{cls.__name__} does not meet the Strategy contract: no {', '.join(missing)}")
    name = str(cls.name)
    taken = _REGISTERED.get(name)
    if (taken is not None and taken is not cls) or (taken is None and name in _BUILTIN):
        raise ValueError(f"a strategy named {name!r} is already registered; choose another name")
    _REGISTERED[name] = cls
    return cls


def available_strategies() -> list[str]:
    """The names of every strategy, built-in and registered, sorted."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def get_strategy(name: str) -> type[Strategy]:
    """The strategy class registered under ``name``.

    Raises:
        ValueError: No strategy has that name (the message lists those that exist).
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _BUILTIN:
        raise ValueError(f"no strategy named {name!r}; choose one of: {', '.join(available_strategies())}")
    module, attr = _BUILTIN[name]
    cls: type[Strategy] = getattr(importlib.import_module(module), attr)
    return cls
