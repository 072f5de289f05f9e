"""LlamaIndex ``MetadataFilters`` as the Chroma ``where`` filter every strategy honours.

The mapping is the one LlamaIndex's own Chroma vector store uses (``==`` -> ``$eq``, ``>`` ->
``$gt``, ..., ``in`` -> ``$in``, ``nin`` -> ``$nin``; ``and`` / ``or`` -> ``$and`` / ``$or``;
nested ``MetadataFilters`` nest), so a filter an app gives ``VectorStoreIndex.as_retriever``
selects the same chunks here. Operators with no Chroma ``where`` equivalent (``any``,
``all``, ``contains``, ``text_match``, ``is_empty``) and the ``not`` condition are refused
with an error that names them, never dropped.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from core.filters import FilterError, parse_filter

__all__ = ["to_chroma_where"]

_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_CONDITIONS = {FilterCondition.AND: "$and", FilterCondition.OR: "$or"}


def to_chroma_where(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """Translates LlamaIndex metadata filters into a validated Chroma ``where`` dict.

    Args:
        filters: The filters (None or an empty ``MetadataFilters``: no filter).

    Returns:
        The ``where`` dict, or None for no filter.

    Raises:
        TypeError: ``filters`` is not a ``MetadataFilters``.
        core.filters.FilterError: An operator or condition Chroma's ``where`` cannot express.
    """
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            f"filters must be a llama_index MetadataFilters, got {type(filters).__name__}: e.g. "
            "MetadataFilters(filters=[MetadataFilter(key='tenant', value='acme')]) (a retriever also "
            "takes a Chroma where dict as search_kwargs={'filter': ...})"
        )
    where = _convert(filters)
    if where is None:
        return None
    parse_filter(where)  # the same checks (and messages) as a where dict given directly
    return where


def _convert(filters: MetadataFilters) -> dict[str, Any] | None:
    condition = filters.condition or FilterCondition.AND
    if condition not in _CONDITIONS:
        raise FilterError(
            f"unsupported filter condition {getattr(condition, 'value', condition)!r}; bridge-rag honours "
            "'and' and 'or' (write a 'not' as != or nin on each field)"
        )
    clauses: list[dict[str, Any]] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            nested = _convert(item)
            if nested is not None:
                clauses.append(nested)
        elif isinstance(item, MetadataFilter):
            clauses.append(_clause(item))
        else:
            raise TypeError(f"MetadataFilters holds a {type(item).__name__}; expected MetadataFilter(s)")
    if not clauses:
        return None
    if len(clauses) == 1:
        return clauses[0]
    return {_CONDITIONS[condition]: clauses}


def _clause(item: MetadataFilter) -> dict[str, Any]:
    operator = item.operator or FilterOperator.EQ
    op = _OPERATORS.get(operator)
    if op is None:
        raise FilterError(
            f"unsupported filter operator {operator.value!r} on field {item.key!r}; bridge-rag honours "
            f"{', '.join(repr(o.value) for o in _OPERATORS)} (Chroma's where operators)"
        )
    value = list(item.value) if isinstance(item.value, list | tuple) else item.value
    return {item.key: {op: value}}
