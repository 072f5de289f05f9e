"""The half of both frameworks' ``StrategyRetriever`` that does not depend on the framework.

A framework adapter subclasses its framework's ``BaseRetriever`` and :class:`StrategyAdapter`.
It keeps its framework's spelling of every public method (names, signatures, docstrings) and
hands the work here: building or loading the strategy, splitting the constructor's keyword
arguments, collecting the option fields of a query, refreshing, adding and deleting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from core.adapters import check_option, check_strategy_type, lift_option, split_fields
from core.filters import parse_filter
from core.strategies.base import Strategy, check_k
from core.strategies.lifecycle import DEFAULT_SYNC_WAIT, IndexLifecycle, Synced, retrieve_options_of
from core.types import Document

__all__ = ["StrategyAdapter", "narrowed_filter", "with_store_embedder"]


def with_store_embedder(settings: Mapping[str, Any], embedder: Any, hint: str) -> dict[str, Any]:
    """A build's settings over a store, with the embedder of the store's own vectors.

    Raises:
        TypeError: The settings name another embedder (``hint`` says how to give it).
    """
    given = sorted({"embedder", "embedding", "embed_model"} & set(settings))
    if given:
        raise TypeError(f"{given[0]}= is not a setting of a retriever over a store: {hint}")
    return {**settings, "embedder": embedder}


def narrowed_filter(own: Mapping[str, Any] | None, call: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The rows that pass both a retriever's ``own`` filter and a call's, as one ``where`` filter.

    A call's filter narrows the retriever's; it never widens it (``{}`` adds nothing). None
    when neither filters anything.

    Raises:
        core.filters.FilterError: A malformed filter.
    """
    where = [parsed.where for parsed in map(parse_filter, (own, call)) if parsed is not None and parsed.where]
    return None if not where else where[0] if len(where) == 1 else {"$and": where}


class StrategyAdapter:
    """Mixin of a framework retriever over a bridge-rag strategy (``self.strategy``).

    A named retriever declares :attr:`strategy_cls`, :attr:`option_fields` and
    :attr:`build_fields`; the framework's base declares :attr:`own_keywords` and
    :attr:`no_strategy_hint`. Its constructor takes ``strategy``, ``k``, ``search_kwargs``
    and the option fields as keyword arguments, and checks them with :meth:`_checked`.
    """

    #: The strategy the ``from_*`` constructors build (None: wrap a built one only).
    strategy_cls: ClassVar[type[Strategy] | None] = None
    #: Fields of a named retriever that are ``retrieve`` options (forwarded when not None),
    #: with their types.
    option_fields: ClassVar[Mapping[str, type]] = {}
    #: Option fields also given to the strategy's constructors, which save them as its default.
    build_fields: ClassVar[tuple[str, ...]] = ()
    #: Constructor keywords that are the retriever's own (besides the option fields), never
    #: the strategy's settings.
    own_keywords: ClassVar[tuple[str, ...]] = ()
    #: What the error of a retriever that declares no strategy tells its user to do instead.
    no_strategy_hint: ClassVar[str] = "build one yourself and wrap it"
    #: The framework's name of the number of results in the ``from_*`` constructors.
    top_k_keyword: ClassVar[str] = "k"
    #: Whether ``search_kwargs`` may spell the number of results ``{"k": n}`` (LangChain's way).
    k_in_search_kwargs: ClassVar[bool] = True
    #: Options the framework itself reads from a query's keyword arguments (never the strategy's).
    ignored_options: ClassVar[frozenset[str]] = frozenset()

    if TYPE_CHECKING:
        strategy: Any

        def __init__(self, **kwargs: Any) -> None: ...

    @classmethod
    def _built(
        cls,
        make: Callable[..., Any],
        *args: Any,
        top_k: int | None,
        search_kwargs: Mapping[str, Any] | None,
        collection_name: str | None = None,
        build: bool = True,
        **settings: Any,
    ) -> Self:
        """A retriever over the strategy that ``make`` builds or loads.

        Args:
            make: The strategy constructor (``from_documents``, ``from_store``, ``load``, ...).
            *args: Its positional arguments.
            top_k: The retriever's number of results (None: ``search_kwargs["k"]``, else the
                retriever's default).
            search_kwargs: The retriever's default query options; ``k`` and option fields
                given here are taken out first, so a build field spelt this way is saved as
                the index's default as it is when given as a keyword.
            collection_name: The Chroma collection name given to ``make`` (None: not given).
            build: ``make`` builds a new index, which saves the build fields as its defaults
                (False for a load: a given field then overrides the saved default per query).
            **settings: ``make``'s keyword arguments mixed with the retriever's own fields
                and keywords, which are taken out for the retriever.

        Returns:
            The retriever.

        Raises:
            TypeError: ``k`` is among the settings of a framework that spells it otherwise.
            ValueError: A field is given both as a keyword and in ``search_kwargs``, with
                different values.
        """
        if "k" in settings:
            raise TypeError(
                f"{cls.__name__} takes the number of results as {cls.top_k_keyword}=..., not k=..."
            )
        settings, options = dict(settings), dict(search_kwargs or {})
        top: dict[str, Any] = {} if top_k is None else {"k": top_k}
        lift_option(top, options, "k")
        for name in cls.option_fields:
            lift_option(settings, options, name)
        own, rest = split_fields(
            settings, (*cls.option_fields, *cls.own_keywords), cls.build_fields if build else ()
        )
        # What the retriever would refuse is refused before the index is built (and written).
        cls._checked({**top, **own, "search_kwargs": options}, cls._strategy_type())
        if collection_name is not None:
            rest["collection_name"] = collection_name
        return cls(strategy=make(*args, **rest), search_kwargs=options, **top, **own)

    @classmethod
    def _checked(cls, arguments: Mapping[str, Any], strategy_type: type | None = None) -> dict[str, Any]:
        """The constructor's ``strategy``, ``k``, ``search_kwargs`` and option fields, checked.

        ``k`` and option fields given in ``search_kwargs`` move to their fields; an option
        field left None takes the strategy's saved default; a ``search_kwargs`` key the
        strategy's ``retrieve`` does not take is refused now, not at the first query.

        Args:
            arguments: The constructor's arguments (the caller's dicts are not modified).
            strategy_type: The class of the strategy about to be built, checked against
                before there is one (``arguments`` then holds no ``strategy``).

        Returns:
            The arguments, with ``k`` set and ``search_kwargs`` a new dict.

        Raises:
            TypeError: Not a strategy (or not the declared one), ``k`` not an int, or an
                option field of the wrong type.
            ValueError: ``k`` below 1, a reserved or unknown ``search_kwargs`` key, or a field
                given twice with different values.
        """
        out = dict(arguments)
        strategy = None
        if strategy_type is None:
            strategy = check_strategy_type(cls.strategy_cls, out.get("strategy"), TypeError)
        options = dict(out.get("search_kwargs") or {})
        reserved = sorted({"query", *(() if cls.k_in_search_kwargs else ("k",))}.intersection(options))
        if reserved:
            raise ValueError(
                f"search_kwargs may not contain {reserved}; pass k=... to the constructor and the "
                "query to the retriever"
            )
        lift_option(out, options, "k")
        defaults = getattr(strategy, "default_options", None) or {}
        for name, kind in cls.option_fields.items():
            lift_option(out, options, name)
            out[name] = check_option(name, defaults.get(name) if out.get(name) is None else out[name], kind)
        owner = strategy_type or type(strategy)
        accepted = retrieve_options_of(owner) if issubclass(owner, IndexLifecycle) else None
        unknown = sorted(set(options) - {*accepted, *cls.ignored_options}) if accepted is not None else []
        if unknown:
            raise ValueError(
                f"search_kwargs has option(s) {owner.__name__}.retrieve does not take: "
                f"{', '.join(unknown)}; it takes {', '.join(accepted or ())}"
            )
        if out.setdefault("k", 4) is None:
            raise TypeError("k must be an int, got None")
        out["k"] = check_k(out["k"], default=4)
        out["search_kwargs"] = options
        return out

    @classmethod
    def _strategy_type(cls) -> type[Strategy]:
        """The declared strategy class.

        Raises:
            TypeError: The retriever declares none.
        """
        if cls.strategy_cls is None:
            raise TypeError(f"{cls.__name__} declares no strategy; {cls.no_strategy_hint}")
        return cls.strategy_cls

    def _field_options(self) -> dict[str, Any]:
        """The option fields that are set (not None), as ``retrieve`` options."""
        return {name: getattr(self, name) for name in self.option_fields if getattr(self, name) is not None}

    def refresh(self) -> bool:
        """Switches a loaded index to the newest generation its writer saved, if any.

        A retriever opened from an index directory also does this by itself, checking at most
        every ``refresh_interval`` seconds (a load option; default 1 s, None: off).

        Returns:
            True when the strategy now serves a newer generation; False otherwise, and for
            strategies without ``refresh`` (test doubles, baselines).
        """
        refresh = getattr(self.strategy, "refresh", None)
        return bool(refresh()) if callable(refresh) else False

    def sync(self, *, wait: float = DEFAULT_SYNC_WAIT) -> Synced:
        """Takes in the chunks the app added to or deleted from its Chroma store itself, since the swap.

        Call it after the app writes through its own store (``vectorstore.add_documents``,
        ``vectorstore.delete``): what was deleted there leaves the index, what was added is
        indexed (see :meth:`core.strategies.lifecycle.IndexLifecycle.sync`).

        Args:
            wait: Seconds to wait while another worker holds the index directory's writer lock.

        Returns:
            ``Synced(added, removed, changed)``: chunk counts (UMG-RAG: documents).

        Raises:
            core.writer_lock.IndexLockedError: Another writer still holds the index directory
                after ``wait`` seconds.
            NotImplementedError: A strategy with no collection of the app's to follow (UMG-RAG
                built from documents) or without ``sync``.
        """
        sync = getattr(self.strategy, "sync", None)
        if not callable(sync):
            raise NotImplementedError(
                f"{type(self.strategy).__name__} has no sync(); add and delete through the retriever"
            )
        return Synced(*sync(wait=wait))

    def _add(self, documents: Sequence[Document]) -> list[str]:
        """Indexes converted documents without a rebuild; returns their document ids."""
        ids: list[str] = self.strategy.add_documents(documents)
        return ids

    def _delete(
        self, ids: Sequence[str], filter: Mapping[str, Any] | None, own: Mapping[str, Any] | None
    ) -> int:
        """Removes documents by id from the rows that pass both the retriever's ``own`` filter and ``filter``.

        A caller's filter narrows a tenant's retriever; it never widens it (``filter={}`` too).
        """
        removed: int = self.strategy.delete_documents(ids, filter=narrowed_filter(own, filter))
        return removed
