"""Entity links between a strategy's units, and the hop propagation that walks them.

Multi-hop questions name one entity and ask about another that only the first one's passage
names ("Where was the composer of *By the Beautiful Sea* born?": the song's passage names the
composer, the composer's passage has the birthplace). Dense similarity finds the first passage
and misses the second; the links below find it with no LLM call:

- **about**: an entity -> the units that are *about* it: their document's title, or, where a
  document has none, what its text says it is about (a heading first line, section headings,
  the subject its paragraphs open with; :mod:`core.strategies.subjects`), each name also
  without a trailing qualifier (``"Brother (band)"`` -> ``"brother"``).
- **mentions**: an entity -> the units whose extracted entities (spaCy NER) include it, and,
  at query time, the entities whose names occur in a unit's text (the longest known name at
  each place of the text: how a passage "names" another passage's subject).

:meth:`EntityLinks.propagate` runs the hops over those links (what LinearRAG calls semantic
bridging, with HippoRAG's node specificity as the weight of a mention):

1. The query's entities (its n-grams that are entity names, longest match first, and its NER
   entities) give hop 1: the units about them get ``link_bonus``; the units mentioning them
   get ``mention_bonus`` times the entity's specificity (``log(N / df) / log(N)``); where
   nothing is about a query's name, its ``mention_follow`` best mentioning units (by cosine)
   get ``link_bonus`` times its specificity.
2. Each further hop takes the ``hop_seeds`` best units so far (cosine plus bonus: the dense prior
   decides which passage's names are followed, so the walk follows the passages that match
   the question) and follows the entities they name: the units about those get ``hop_bonus``
   (the mentioning units ``mention_bonus`` x specificity again). Evidence accumulates like
   the mass of an iterated propagation: a unit reached on several hops collects each hop's
   bonus, so the names of a unit that stays among the best count once per hop (a passage the
   best passage names rises with every hop), and a unit that rises into the seeds lends its
   own names on the next hop (the third passage of a three-hop chain).

How many units are about an entity is counted in *documents*: a long document is about its
title in every unit, and its name is still followed; of one document's units about a name,
the ``about_per_document`` best (those naming it, then by cosine: the dense prior ranks within
the document) get the bonus. Entities that more than ``link_max_df`` documents are about (or
more than ``mention_max_df`` units mention) are too common to say anything and are not
followed. The walk touches only the units it reaches (a few dozen), so its cost does not grow
with the corpus; the cosine of each reached unit comes from the strategy (an exact scan of
those rows).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from core.persist import FileData, array_to_bytes, array_view, json_from_bytes, json_to_bytes
from core.strategies.base import check_same_lengths
from core.strategies.workers import map_texts
from core.text import is_value_phrase, longest_names, normalize_entity, query_ngrams, title_entities

__all__ = [
    "CONFIDENT_Z",
    "EntityLinks",
    "HopConfig",
    "Reached",
    "confident_units",
    "cover_named",
    "hop_provenance",
    "is_nameable",
    "keep_confident",
    "links_files",
    "links_from_files",
]

IntArray = npt.NDArray[np.int64]

#: Words that never make an entity on their own (an n-gram made only of them is not linked).
_FUNCTION_WORDS = frozenset(
    {
        "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or", "is", "was",
        "were", "are", "be", "been", "who", "what", "which", "when", "where", "whose", "how", "why",
        "did", "does", "do", "that", "this", "from", "as", "it", "its", "his", "her", "their", "than",
        "then", "he", "she", "they",
    }
)  # fmt: skip


@dataclass(frozen=True)
class HopConfig:
    """How far and how strongly :meth:`EntityLinks.propagate` walks.

    The strategies' configs derive from it (``BridgeConfig``, ``UMGConfig``, ``BubbleConfig``
    all have these fields, with these names).

    Attributes:
        link_hops: Rounds of the walk: 0 = none, 1 = the query's own entities, 2 and more = also
            the entities the best units name.
        hop_seeds: Best units whose named entities each further hop follows.
        link_bonus: Added to a unit about a query entity (hop 1).
        hop_bonus: Added to a unit about an entity a seed names (each hop after the first).
        mention_bonus: Added, times the entity's specificity, to a unit that mentions a
            followed entity (0 = about-links only).
        link_max_df: Entities that more documents than this are about are not followed.
        mention_max_df: Entities mentioned by more units than this are not followed by mention.
        link_max_ngram: Longest n-gram, in words, looked up as an entity name (in the query
            and in a seed's text).
        hub_discount: Scale a seed's about-bonus by the name's specificity.
        about_per_document: Of one document's units about a followed name, the best this many
            get the bonus (those naming it first, then by cosine): a long document is about
            its subject in every unit, and its best units are the ones to reach.
        mention_follow: Where no unit is about one of the query's names, the best this many
            of the units that mention it (those naming it, by cosine) get ``link_bonus`` times
            the name's specificity, so a corpus without titles still carries the first hop
            (0 = only ``mention_bonus``).
        common_share: A name that more documents use in their text than this share of the
            units (and more than ``mention_max_df``) is a common word of the corpus, never
            followed however few units are about it ("born" in a corpus of biographies): the
            corpus, not a stop-list, says which words name nothing. Documents are counted, so
            a long report that names its company in every chunk does not make the name common.
    """

    link_hops: int = 4
    hop_seeds: int = 2
    link_bonus: float = 0.3
    hop_bonus: float = 0.15
    mention_bonus: float = 0.05
    link_max_df: int = 5
    mention_max_df: int = 20
    link_max_ngram: int = 8
    hub_discount: bool = True
    about_per_document: int = 1
    mention_follow: int = 1
    common_share: float = 0.01
    leave_home: bool = True

    def hop_checks(self) -> list[tuple[str, bool]]:
        """Range checks of the hop settings, as a strategy config's ``checks()`` lists them."""
        bonuses = (self.link_bonus, self.hop_bonus, self.mention_bonus)
        return [
            ("link_hops must be between 0 and 8", 0 <= self.link_hops <= 8),
            ("hop_seeds must be >= 1", self.hop_seeds >= 1),
            (
                "link_bonus, hop_bonus and mention_bonus must be finite and >= 0",
                all(math.isfinite(b) and b >= 0 for b in bonuses),
            ),
            (
                "link_max_df and mention_max_df must be >= 1",
                self.link_max_df >= 1 and self.mention_max_df >= 1,
            ),
            ("link_max_ngram must be between 1 and 12", 1 <= self.link_max_ngram <= 12),
            ("about_per_document must be >= 1", self.about_per_document >= 1),
            ("mention_follow must be >= 0", self.mention_follow >= 0),
            ("common_share must be in (0, 1]", 0.0 < self.common_share <= 1.0),
        ]


@dataclass
class Reached:
    """What the walk found for one unit.

    Attributes:
        bonus: Summed evidence added to its cosine.
        hop: The first hop that reached it (1 = a query entity).
        via: The entity names it was reached through, in order.
    """

    bonus: float = 0.0
    hop: int = 0
    via: list[str] = field(default_factory=list)


class Ragged:
    """Lists of ints: a saved CSR part (read-only arrays, memory-mapped when loaded) plus additions.

    A loaded index keeps its links as the arrays it saved, so a worker neither rebuilds
    hundreds of thousands of Python lists at load nor holds them privately; what a writer adds
    since (new lists, or ints appended to any list) lives in a small dict beside them.

    Args:
        indptr: ``n + 1`` offsets into ``indices`` (None: no saved part).
        indices: The saved lists' items back to back.
    """

    def __init__(self, indptr: IntArray | None = None, indices: IntArray | None = None) -> None:
        self._indptr = np.zeros(1, dtype=np.int64) if indptr is None else indptr
        self._indices = np.zeros(0, dtype=np.int64) if indices is None else indices
        self._saved = self._indptr.size - 1
        self._count = self._saved
        self._extra: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> list[int]:
        saved = self._indices[self._indptr[i] : self._indptr[i + 1]].tolist() if i < self._saved else []
        extra = self._extra.get(i)
        return saved + extra if extra else saved

    def size(self, i: int) -> int:
        """Length of list ``i`` (without building it)."""
        saved = int(self._indptr[i + 1] - self._indptr[i]) if i < self._saved else 0
        return saved + len(self._extra.get(i, ()))

    def append(self, values: Iterable[int]) -> None:
        """Adds a new list at the end."""
        self._extra[self._count] = list(values)
        self._count += 1

    def add(self, i: int, value: int) -> None:
        """Appends ``value`` to list ``i``."""
        self._extra.setdefault(i, []).append(value)

    def to_arrays(self) -> tuple[IntArray, IntArray]:
        """``(indptr, indices)`` of every list."""
        if not self._extra:
            return np.asarray(self._indptr, dtype=np.int64), np.asarray(self._indices, dtype=np.int64)
        lists = [self[i] for i in range(self._count)]
        indptr = np.zeros(len(lists) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(x) for x in lists])
        return indptr, np.asarray([e for x in lists for e in x], dtype=np.int64)


def _inverted(units: Ragged, n_entities: int, *, dedupe_with: Ragged | None = None) -> Ragged:
    """Entity -> units (ascending) of unit -> entity lists, computed with numpy.

    With ``dedupe_with``, a unit's entities are the union of both lists, each counted once.
    """
    parts = [units] if dedupe_with is None else [units, dedupe_with]
    n_units = len(units)
    keys = []
    for part in parts:
        indptr, indices = part.to_arrays()
        owner = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        keys.append(indices * max(n_units, 1) + owner)  # sorted keys: by entity, then by unit
    key = np.concatenate(keys)
    key = np.unique(key) if dedupe_with is not None else np.sort(key, kind="stable")
    ent_of, unit_of = np.divmod(key, max(n_units, 1))
    indptr = np.zeros(n_entities + 1, dtype=np.int64)
    np.cumsum(np.bincount(ent_of, minlength=n_entities), out=indptr[1:])
    return Ragged(indptr, unit_of)


def _groups_per_entity(
    lists: Ragged, group: IntArray, n_entities: int, *, by_unit: bool = False
) -> list[int]:
    """Distinct groups (documents) among each entity's units, computed with numpy.

    ``lists`` are entity -> units lists, or, ``by_unit``, unit -> entities lists.
    """
    indptr, indices = lists.to_arrays()
    if not indices.size:
        return [0] * n_entities
    owner = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    entity, unit = (indices, owner) if by_unit else (owner, indices)
    n_groups = int(group.max()) + 1 if group.size else 1
    pairs = np.unique(entity * n_groups + group[unit])
    counts: list[int] = np.bincount(pairs // n_groups, minlength=n_entities).tolist()
    return counts


class EntityLinks:
    """The about / mentions links of a set of units (chunks, windows, graph chunks).

    Units are the strategy's row numbers; a deleted unit stays linked and is skipped through
    the ``alive`` mask the strategy passes. Updates are incremental (:meth:`add_units`).
    """

    #: The scan of a text for known names is pure Python over this object's vocabulary, so
    #: :meth:`add_units` may run it in forked worker processes (:func:`core.strategies.workers.map_texts`).
    fork_safe = True

    def __init__(self) -> None:
        self.names: list[str] = []
        self.vocab: dict[str, int] = {}
        self._about = Ragged()  # entity -> units about it
        self._mentions = Ragged()  # entity -> units whose NER names it
        self._unit_about = Ragged()  # unit -> the entities it is about
        self._unit_entities = Ragged()  # unit -> its NER entities
        self._named = Ragged()  # unit -> every entity it names (NER + names in its text)
        self._named_count: list[int] = []  # entity -> units naming it
        self._named_docs: list[int] = []  # entity -> documents (groups) naming it
        self._unit_group = np.zeros(0, dtype=np.int64)  # unit -> its document (a group number)
        self._about_groups: list[int] = []  # entity -> documents about it
        self._dead = 0  # units deleted (their lists emptied): not counted in how common a name is

    # ------------------------------------------------------------------ building
    @property
    def num_units(self) -> int:
        """Units linked so far (dead ones included)."""
        return len(self._unit_about)

    @property
    def num_live_units(self) -> int:
        """Units linked so far and not deleted (:meth:`without_units`)."""
        return len(self._unit_about) - self._dead

    def _entity(self, name: str) -> int:
        e = self.vocab.get(name)
        if e is None:
            e = self.vocab[name] = len(self.names)
            self.names.append(name)
            self._about.append([])
            self._mentions.append([])
            self._about_groups.append(0)
            self._named_count.append(0)
            self._named_docs.append(0)
        return e

    def _register(self, about: list[int], ents: list[int], group: int, seen: set[tuple[int, int]]) -> None:
        """Appends one unit with its about-entities and extracted entities to every list.

        ``seen`` holds the (entity, group) pairs of this batch already counted (a batch's
        groups are new, so pairs of earlier batches never repeat).
        """
        unit = len(self._unit_about)
        for e in about:
            self._about.add(e, unit)
            if (e, group) not in seen:
                seen.add((e, group))
                self._about_groups[e] += 1
        for e in dict.fromkeys([*about, *ents]):
            self._mentions.add(e, unit)
        self._unit_about.append(about)
        self._unit_entities.append(ents)

    def add_units(
        self,
        about: Sequence[Sequence[str]],
        entities: Sequence[Sequence[str]],
        texts: Sequence[str],
        *,
        groups: Sequence[str] | None = None,
        max_ngram: int = 8,
        workers: int = 1,
        show_progress: bool = False,
    ) -> None:
        """Links the next units (rows ``num_units ..``): what they are about, their entities and names.

        A unit's named entities (what a walk follows from it) are its extracted ones and every
        known entity name among its text's n-grams, found once here, against the names known
        after this batch (so the query path never scans a text). Units added earlier are not
        rescanned for names that first appear in this batch: their extracted entities still
        link them, and a rebuild finds the rest.

        Args:
            about: The names each unit is about (a title, headings, lead subjects:
                :func:`core.strategies.subjects.unit_subjects`); each also stands without a
                trailing parenthetical qualifier (``"Brother (band)"`` -> ``"brother"``).
            entities: Each unit's extracted entity names (normalised here).
            texts: Each unit's text.
            groups: Each unit's document, so that how many units are about a name counts
                documents, not units; None: each unit its own.
            max_ngram: Longest n-gram, in words, looked up as a name.
            workers: Processes that scan the texts for names (forked; the links are the
                same for any count).
            show_progress: Show a bar counting the texts scanned.

        Raises:
            ValueError: The sequences differ in length.
        """
        check_same_lengths(
            ("about lists", about), ("entity lists", entities), ("texts", texts), ("groups", groups)
        )
        first = len(self._unit_about)
        base = int(self._unit_group.max()) + 1 if self._unit_group.size else 0
        number: dict[str, int] = {}
        new_groups = np.zeros(len(texts), dtype=np.int64)
        seen: set[tuple[int, int]] = set()
        for i, (names_about, names) in enumerate(zip(about, entities, strict=True)):
            group = base + (i if groups is None else number.setdefault(groups[i], len(number)))
            new_groups[i] = group
            about_ids = [
                self._entity(n)
                for n in dict.fromkeys(x for name in names_about for x in title_entities(name))
                if is_nameable(n)
            ]
            ents = [
                self._entity(n) for n in dict.fromkeys(normalize_entity(x) for x in names) if is_nameable(n)
            ]
            self._register(about_ids, ents, group, seen)
        self._unit_group = np.concatenate([self._unit_group, new_groups])
        named_in: set[tuple[int, int]] = set()

        def scan(batch: Sequence[str]) -> list[list[str]]:
            return [longest_names(text, self._known, max_ngram) for text in batch]

        found = map_texts(
            scan, list(texts), workers=workers, owner=self, desc="linking names", show_progress=show_progress
        )
        for unit, names_found in enumerate(found, start=first):
            grams = [self.vocab[g] for g in names_found]
            named = list(dict.fromkeys([*self._unit_entities[unit], *grams]))
            self._named.append(named)
            group = int(new_groups[unit - first])
            for e in named:
                self._named_count[e] += 1
                if (e, group) not in named_in:
                    named_in.add((e, group))
                    self._named_docs[e] += 1

    # ------------------------------------------------------------------ persistence
    def to_arrays(self) -> tuple[list[str], dict[str, IntArray]]:
        """The names and the two unit -> entity lists as CSR arrays (what is saved)."""
        arrays: dict[str, IntArray] = {}
        for key, lists in (
            ("about", self._unit_about),
            ("entities", self._unit_entities),
            ("named", self._named),
        ):
            arrays[f"{key}_indptr"], arrays[f"{key}_indices"] = lists.to_arrays()
        for key, lists in (("about_units", self._about), ("mentions_units", self._mentions)):
            arrays[f"{key}_indptr"], arrays[f"{key}_indices"] = lists.to_arrays()
        arrays["unit_group"] = np.asarray(self._unit_group, dtype=np.int64)
        arrays["dead_units"] = np.asarray([self._dead], dtype=np.int64)
        return list(self.names), arrays

    def without_units(self, dead: npt.NDArray[np.bool_]) -> EntityLinks:
        """The links with the ``dead`` units' lists emptied and every name only they used dropped.

        Unit numbers stay; entities are renumbered. A delete calls it, so no deleted unit's
        entity names stay in the links (or in a save of them).

        Args:
            dead: One bool per unit (shorter: the units past its end are alive).
        """
        names, arrays = self.to_arrays()
        n_units = self.num_units
        gone = np.zeros(n_units, dtype=bool)
        gone[: min(n_units, dead.shape[0])] = dead[:n_units]
        used = np.zeros(len(names), dtype=bool)
        kept: dict[str, tuple[IntArray, IntArray]] = {}
        for key in ("about", "entities", "named"):
            indptr, indices = arrays[f"{key}_indptr"], arrays[f"{key}_indices"]
            owner = np.repeat(np.arange(n_units, dtype=np.int64), np.diff(indptr))
            live = ~gone[owner]
            used[indices[live]] = True
            counts = np.bincount(owner[live], minlength=n_units)
            kept[key] = (np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), indices[live])
        renumber = np.cumsum(used) - 1
        out: dict[str, IntArray] = {
            "unit_group": arrays["unit_group"],
            "dead_units": np.asarray([int(gone.sum())], dtype=np.int64),
        }
        for key, (indptr, indices) in kept.items():
            out[f"{key}_indptr"], out[f"{key}_indices"] = indptr, renumber[indices].astype(np.int64)
        return EntityLinks.from_arrays([n for n, u in zip(names, used.tolist(), strict=True) if u], out)

    @classmethod
    def from_arrays(cls, names: Sequence[str], arrays: Mapping[str, npt.NDArray[Any]]) -> EntityLinks:
        """Rebuilds the links saved by :meth:`to_arrays`, over the arrays themselves (no copy).

        The entity -> unit lists are computed from the unit -> entity lists with numpy.

        Raises:
            ValueError: Inconsistent arrays (a bad index, lists of different lengths).
        """
        links = cls()
        if not all(isinstance(n, str) for n in names):
            raise ValueError("entity names must be distinct strings")
        links.names = list(names)
        links.vocab = {n: i for i, n in enumerate(links.names)}
        if len(links.vocab) != len(links.names):
            raise ValueError("entity names must be distinct strings")
        per_key: dict[str, Ragged] = {}
        for key in ("about", "entities", "named"):
            indptr = np.asarray(arrays[f"{key}_indptr"], dtype=np.int64)
            indices = np.asarray(arrays[f"{key}_indices"], dtype=np.int64)
            if indptr.ndim != 1 or indptr.size == 0 or indptr[0] != 0 or indptr[-1] != indices.size:
                raise ValueError(f"entity links: bad {key} offsets")
            if np.any(np.diff(indptr) < 0) or (
                indices.size and (indices.min() < 0 or indices.max() >= len(names))
            ):
                raise ValueError(f"entity links: {key} lists out of range")
            per_key[key] = Ragged(indptr, indices)
        if not len(per_key["about"]) == len(per_key["entities"]) == len(per_key["named"]):
            raise ValueError("entity links: the about, entity and named lists cover different units")
        links._unit_about, links._unit_entities = per_key["about"], per_key["entities"]
        links._named = per_key["named"]
        if "about_units_indptr" in arrays and "mentions_units_indptr" in arrays:
            n_units = len(links._unit_about)
            for key in ("about_units", "mentions_units"):
                indptr = np.asarray(arrays[f"{key}_indptr"], dtype=np.int64)
                indices = np.asarray(arrays[f"{key}_indices"], dtype=np.int64)
                if (
                    indptr.shape != (len(names) + 1,)
                    or indptr[0] != 0
                    or indptr[-1] != indices.size
                    or np.any(np.diff(indptr) < 0)
                    or (indices.size and (indices.min() < 0 or indices.max() >= n_units))
                ):
                    raise ValueError(f"entity links: bad {key} lists")
                per_key[key] = Ragged(indptr, indices)
            links._about, links._mentions = per_key["about_units"], per_key["mentions_units"]
        else:  # saved before the entity -> unit lists were
            links._about = _inverted(links._unit_about, len(names))
            links._mentions = _inverted(links._unit_about, len(names), dedupe_with=links._unit_entities)
        n_units = len(links._unit_about)
        if "unit_group" in arrays:
            group = np.asarray(arrays["unit_group"], dtype=np.int64)
            if group.shape != (n_units,) or (n_units and group.min() < 0):
                raise ValueError("entity links: bad unit groups")
        else:  # saved before documents were counted: each unit its own document
            group = np.arange(n_units, dtype=np.int64)
        links._unit_group = group
        dead = np.asarray(arrays.get("dead_units", [0]), dtype=np.int64)  # absent: saved before counted
        if dead.shape != (1,) or not 0 <= int(dead[0]) <= n_units:
            raise ValueError("entity links: bad count of deleted units")
        links._dead = int(dead[0])
        links._about_groups = _groups_per_entity(links._about, group, len(names))
        links._named_count = np.bincount(links._named.to_arrays()[1], minlength=len(names)).tolist()
        links._named_docs = _groups_per_entity(links._named, group, len(names), by_unit=True)
        return links

    # ------------------------------------------------------------------ querying
    def _known(self, gram: str) -> bool:
        return gram in self.vocab and is_nameable(gram)

    def link(self, text: str, extracted: Iterable[str] = (), *, max_ngram: int = 8) -> list[int]:
        """The entities a text names: its longest n-grams that are entity names, and ``extracted``.

        An n-gram inside a longer linked n-gram is dropped ("west virginia" inside "johnnycake
        west virginia"); extracted names are kept as they are.
        """
        found = [g for g in query_ngrams(text, max_ngram) if g in self.vocab and is_nameable(g)]
        kept: list[str] = []
        for g in found:  # longest first
            if not any(f" {g} " in f" {h} " for h in kept):
                kept.append(g)
        for name in extracted:
            n = normalize_entity(name)
            if n in self.vocab and is_nameable(n):
                kept.append(n)
        return list(dict.fromkeys(self.vocab[g] for g in kept))

    def live(self, entities: Iterable[int], alive: npt.NDArray[np.bool_]) -> list[int]:
        """The entities that still link a live unit (about it or mentioned by it)."""
        return [e for e in entities if any(alive[u] for u in (*self._about[e], *self._mentions[e]))]

    def subject_units(
        self, linked: Sequence[int], alive: npt.NDArray[np.bool_], config: HopConfig
    ) -> dict[str, list[int]]:
        """The live units about each of the query's names that is a subject (for :func:`cover_named`).

        A name counts when no more than ``link_max_df`` documents are about it (a subject,
        not a word every document shares) and it is no common word of the corpus (as
        :meth:`propagate` judges it); names whose units are another's (a name and its short
        form) count once.

        Args:
            linked: The query's entities (:meth:`link`).
            alive: Live mask over the units.
            config: The walk's frequency limits.

        Returns:
            Name -> its live units (ascending), in the order of ``linked``.
        """
        common_use = max(config.mention_max_df, config.common_share * max(2, self.num_live_units))
        out: dict[str, list[int]] = {}
        seen: set[tuple[int, ...]] = set()
        for e in linked:
            if not 0 < self._about_groups[e] <= config.link_max_df or self._named_docs[e] > common_use:
                continue
            units = tuple(u for u in self._about[e] if u < alive.shape[0] and alive[u])
            if units and units not in seen:
                seen.add(units)
                out[self.names[e]] = list(units)
        return out

    def named_by(self, unit: int) -> list[int]:
        """The entities a unit names: its extracted ones and the entity names in its text."""
        return self._named[unit]

    def propagate(
        self,
        linked: Sequence[int],
        candidates: Mapping[int, float],
        *,
        config: HopConfig,
        alive: npt.NDArray[np.bool_],
        cosine: Callable[[IntArray], npt.NDArray[np.float64]],
    ) -> tuple[dict[int, float], dict[int, Reached]]:
        """Walks the links from the query's entities for ``config.link_hops`` hops.

        Args:
            linked: The query's entities (:meth:`link`).
            candidates: Units already scored (row -> cosine), e.g. the dense pool; the best of
                them (with their bonus) seed the later hops too.
            config: Hops, seeds, bonuses and the frequency limits.
            alive: Live mask over the units (dead units are never reached).
            cosine: Cosine of the query with the given rows.

        Returns:
            ``(cos, reached)``: the cosine of every unit scored (the candidates and the units
            reached), and what the walk found for each unit it reached.
        """
        cos = dict(candidates)
        reached: dict[int, Reached] = {}
        if config.link_hops <= 0 or not linked:
            return cos, reached
        n_units = max(2, self.num_live_units)  # a deleted unit makes no name look commoner
        log_n = math.log(n_units)

        common_use = max(config.mention_max_df, config.common_share * n_units)

        specific: dict[int, float] = {}

        def specificity(e: int) -> float:
            value = specific.get(e)
            if value is None:
                df = max(1, self._mentions.size(e), self._named_count[e])
                value = specific[e] = max(0.0, math.log(n_units / df) / log_n)
            return value

        def score(units: Sequence[int]) -> None:
            new = np.asarray(sorted({u for u in units if u not in cos}), dtype=np.int64)
            if new.size:
                cos.update(zip(new.tolist(), cosine(new).astype(np.float64).tolist(), strict=True))

        def best(units: list[int], n: int, e: int) -> list[int]:
            """The ``n`` best of ``units``: those naming ``e`` first, then by cosine."""
            score(units)
            return sorted(units, key=lambda u: (e not in self._named[u], -cos[u], u))[:n]

        def about_units(e: int, skip: int) -> list[int]:
            """The live units about ``e``, the best ``about_per_document`` of each document."""
            units = [u for u in self._about[e] if u != skip and alive[u]]
            per_doc = config.about_per_document
            if len(units) <= per_doc:
                return units
            by_doc: dict[int, list[int]] = {}
            for u, g in zip(units, self._unit_group[units].tolist(), strict=True):
                by_doc.setdefault(g, []).append(u)
            if all(len(us) <= per_doc for us in by_doc.values()):
                return units
            return [u for us in by_doc.values() for u in (us if len(us) <= per_doc else best(us, per_doc, e))]

        def follow(
            entities: Iterable[int], about_bonus: float, gained: dict[int, tuple[float, str]], skip: int
        ) -> None:
            for e in entities:
                if self._named_docs[e] > common_use:  # a word most documents use names nothing
                    continue
                about: list[int] = []
                if 0 < self._about_groups[e] <= config.link_max_df:
                    # a name the seed shares with many units (a hub) says little about the seed
                    w = about_bonus if skip < 0 or not config.hub_discount else about_bonus * specificity(e)
                    about = about_units(e, skip)
                    for u in about:
                        if w > gained.get(u, (0.0, ""))[0]:
                            gained[u] = (w, self.names[e])
                mentions = self._mentions[e]
                if not 0 < len(mentions) <= config.mention_max_df:
                    continue
                live = [u for u in mentions if u != skip and alive[u]]
                if config.mention_bonus > 0:
                    w = config.mention_bonus * specificity(e)
                    for u in live:
                        if w > gained.get(u, (0.0, ""))[0]:
                            gained[u] = (w, self.names[e])
                common = self._about_groups[e] > config.link_max_df
                if skip < 0 and not about and not common and config.mention_follow > 0 and live:
                    # nothing is about a query's name: the units that mention it and match the query best
                    w = about_bonus * specificity(e)
                    for u in best(live, config.mention_follow, e):
                        if w > gained.get(u, (0.0, ""))[0]:
                            gained[u] = (w, self.names[e])

        for hop in range(1, config.link_hops + 1):
            gained: dict[int, tuple[float, str]] = {}
            if hop == 1:
                follow(linked, config.link_bonus, gained, -1)
            else:
                ranked = heapq.nsmallest(
                    config.hop_seeds,
                    cos,
                    key=lambda u: (-(cos[u] + (reached[u].bonus if u in reached else 0.0)), u),
                )
                for s in ranked:
                    if config.leave_home:  # a seed's own subject leads back to where the walk is
                        own = set(self._unit_about[s])
                        follow([e for e in self.named_by(s) if e not in own], config.hop_bonus, gained, s)
                    else:
                        follow(self.named_by(s), config.hop_bonus, gained, s)
            for u, (w, name) in gained.items():  # one bonus per hop, however many seeds reach a unit
                r = reached.get(u)
                if r is None:
                    r = reached[u] = Reached(hop=hop)
                r.bonus += w
                if name not in r.via:
                    r.via.append(name)
            score(list(reached))
        return cos, reached


def hop_provenance(walk: Reached | None) -> dict[str, Any]:
    """A result's walk keys: ``hop`` (0: not reached), ``hop_score`` and ``hop_entities``."""
    if walk is None:
        return {"hop": 0, "hop_score": 0.0, "hop_entities": []}
    return {"hop": walk.hop, "hop_score": walk.bonus, "hop_entities": list(walk.via)}


#: How far above the mean of a direct ranking (in standard deviations) a unit must stand for
#: the walk to keep it in the results (:func:`confident_units`, :func:`keep_confident`).
CONFIDENT_Z = 2.0


def confident_units(direct: Sequence[tuple[int, float]], *, z: float = CONFIDENT_Z) -> list[int]:
    """The units a direct list is confident about: those standing out of it, best first.

    Confident: a unit's score stands ``z`` standard deviations above the mean of the list
    (of at least 5 hits, best first). The list is a strategy's direct ranking (cosine plus
    lexical evidence, :class:`core.strategies.direct.DirectEvidence`) or a dense list.
    """
    if len(direct) < 5 or not math.isfinite(z):
        return []
    scores = np.asarray([s for _, s in direct], dtype=np.float64)
    spread = float(scores.std())
    if spread <= 0:
        return []
    mean = float(scores.mean())
    return [u for u, s in direct if (s - mean) / spread >= z]


def keep_confident(order: Sequence[int], confident: Sequence[int], k: int) -> list[int]:
    """The first ``k`` of ``order``, with every confident direct match kept.

    A hop may displace a directly matching unit only on evidence that outweighs the match:
    the units the direct list is confident about (:func:`confident_units`) may move down but
    not out of the top ``k``. One that fell below takes the place of the lowest-ranked unit
    that is not confident, at the end (none is dropped for it when all ``k`` are confident).

    Args:
        order: The strategy's ranking (unit ids, best first).
        confident: The confident direct matches, best first.
        k: Results kept.

    Returns:
        The kept unit ids, best first.
    """
    top = list(order[:k])
    sure = set(confident)
    for unit in confident:
        if unit in top:
            continue
        if len(top) < k:
            top.append(unit)
            continue
        spare = next((j for j in range(len(top) - 1, -1, -1) if top[j] not in sure), None)
        if spare is None:
            break
        del top[spare]
        top.append(unit)
    return top


def cover_named(order: Sequence[int], groups: Iterable[Iterable[int]], k: int) -> list[int]:
    """The first ``k`` of ``order`` reordered so that each named group is covered before any is twice.

    A question that names several things (two companies, two films) needs evidence for each.
    Going down ``order``, a unit whose every group already has a unit in the results (a
    second unit of a covered thing) waits while a group with a unit further down has none:
    that group's best unit comes first. Units of no group keep their places, and with fewer
    than two groups nothing changes. The reordering holds for every prefix, so the top 5 of
    a 10-result list are what a 5-result query returns.

    Args:
        order: The strategy's ranking (unit ids, best first): every candidate, not only k.
        groups: The units of each thing the question names (:meth:`EntityLinks.subject_units`).
        k: Results kept.

    Returns:
        The kept unit ids, best first.
    """
    sets = [set(g) for g in groups]
    if len(sets) < 2 or k <= 0:
        return list(order[:k])
    member: dict[int, list[int]] = {}
    for i, units in enumerate(sets):
        for u in units:
            member.setdefault(u, []).append(i)
    remaining = list(dict.fromkeys(order))
    open_groups = {i for i in range(len(sets)) if any(u in sets[i] for u in remaining)}
    out: list[int] = []
    while remaining and len(out) < k:
        u = remaining[0]
        mine = member.get(u)
        if mine and open_groups and not (set(mine) & open_groups):
            # a second unit of covered things: the best unit of an uncovered one goes first
            u = next(v for v in remaining if set(member.get(v, ())) & open_groups)
        remaining.remove(u)
        out.append(u)
        open_groups -= set(member.get(u, ()))
    return out


_ARRAYS = (
    *(
        f"{key}_{part}"
        for key in ("about", "entities", "named", "about_units", "mentions_units")
        for part in ("indptr", "indices")
    ),
    "unit_group",
    "dead_units",
)
#: Absent from older saves.
_OPTIONAL = frozenset(a for a in _ARRAYS if "_units_" in a or a in ("unit_group", "dead_units"))


def links_files(links: EntityLinks) -> dict[str, bytes]:
    """The files that save ``links`` in an index directory (``links.json`` + twelve arrays)."""
    names, arrays = links.to_arrays()
    files = {"links.json": json_to_bytes({"names": names})}
    files.update({f"links_{key}.npy": array_to_bytes(arrays[key]) for key in _ARRAYS})
    return files


def links_from_files(files: Mapping[str, FileData]) -> EntityLinks:
    """Reads the links saved by :func:`links_files`.

    Raises:
        KeyError: A file is missing.
        ValueError: A malformed file.
    """
    meta = json_from_bytes(files["links.json"])
    names = meta.get("names") if isinstance(meta, dict) else None
    if not isinstance(names, list):
        raise ValueError("links.json must hold an object with a list of names")
    arrays = {
        key: array_view(files[f"links_{key}.npy"], dtype=np.int64, ndim=1)
        for key in _ARRAYS
        if key not in _OPTIONAL or f"links_{key}.npy" in files
    }
    return EntityLinks.from_arrays(names, arrays)


def is_nameable(name: str) -> bool:
    """True for a name that is more than function words and more than a value.

    A value (a date, an amount, a number: :func:`core.text.is_value_phrase`) is something many
    passages share, a constraint on a passage rather than a thing it is about, so it is
    never linked and never followed.
    """
    return bool(name) and not all(w in _FUNCTION_WORDS for w in name.split()) and not is_value_phrase(name)
