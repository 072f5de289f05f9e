"""Query concepts with importance weights: BubbleRAG's semantic anchor grouping, step 1.

Without an LLM: the query's named entities and noun chunks (spaCy), plus the whole query,
each weighted by how rare its words are in the corpus (inverse document frequency), so
"Warsaw" weighs more than "city". With an LLM: the model names the explicit and implicit
concepts a complete answer needs, specialised to the query (a vague "he" becomes the person
meant, a strict schema term is relaxed to plain words), with weights; unusable answers fall
back to the spaCy concepts.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.llm import LLM, LLMOutputError, complete_json
from core.text import normalize_entity

__all__ = ["Concept", "TermStatistics", "llm_concepts", "spacy_concepts"]

ConceptKind = Literal["entity", "noun_chunk", "query", "llm"]

_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "did",
        "does",
        "do",
        "has",
        "have",
        "had",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
        "than",
        "then",
        "there",
        "their",
        "they",
        "he",
        "she",
        "his",
        "her",
        "him",
        "i",
        "you",
        "we",
        "our",
        "your",
        "my",
        "me",
        "not",
        "no",
        "yes",
        "also",
        "into",
        "about",
    ]
)
_QUERY_WEIGHT = 0.5
_NOUN_CHUNK_FACTOR = 0.7


@dataclass(frozen=True)
class Concept:
    """A concept of the query.

    Attributes:
        text: The concept's words.
        weight: Importance in (0, 1]; uncovered concepts cost this much in the CEG ranking.
        kind: ``entity``, ``noun_chunk``, ``query`` (the whole query) or ``llm``.
    """

    text: str
    weight: float
    kind: ConceptKind


class TermStatistics:
    """Document frequencies of words over the indexed chunks, for IDF weights."""

    def __init__(self, counts: Mapping[str, int] | None = None, documents: int = 0) -> None:
        """Starts from saved counts (or empty)."""
        self.df: Counter[str] = Counter(dict(counts or {}))
        self.documents = int(documents)

    def add(self, texts: Iterable[str]) -> None:
        """Counts each text as one document."""
        for text in texts:
            self.df.update(set(words(text)))
            self.documents += 1

    def remove(self, texts: Iterable[str]) -> None:
        """Uncounts texts counted by :meth:`add` (a word no text holds any more is dropped)."""
        for text in texts:
            self.df.subtract(set(words(text)))
            self.documents = max(0, self.documents - 1)
        for word in [w for w, c in self.df.items() if c <= 0]:
            del self.df[word]

    def idf(self, word: str) -> float:
        """Smoothed IDF, ``log(1 + N / (1 + df))``."""
        return math.log1p(self.documents / (1 + self.df.get(word, 0)))

    def salience(self, text: str) -> float:
        """The largest IDF of the text's content words relative to an unseen word's, in [0, 1]."""
        content = [w for w in words(text) if w not in _STOP]
        top = math.log1p(max(self.documents, 1))
        if not content or top <= 0:
            return 0.0
        return min(1.0, max(self.idf(w) for w in content) / top)


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.casefold())


def spacy_concepts(
    query: str, nlp: Any, stats: TermStatistics, *, max_concepts: int = 6, min_weight: float = 0.1
) -> list[Concept]:
    """Entities and noun chunks of the query, IDF-weighted, plus the whole query.

    Args:
        query: The question.
        nlp: A spaCy pipeline with NER and a parser.
        stats: Corpus word statistics.
        max_concepts: Most concepts kept besides the whole query (highest weights first).
        min_weight: Concepts below this weight are dropped.

    Returns:
        Concepts, the whole query first.
    """
    doc = nlp(query, disable=[p for p in ("lemmatizer",) if p in nlp.pipe_names])
    found: list[Concept] = []
    seen: set[str] = set()
    entity_spans = [(e.start_char, e.end_char) for e in doc.ents]
    for ent in doc.ents:
        _append(found, seen, ent.text, stats.salience(ent.text), "entity")
    for chunk in doc.noun_chunks:
        inside = any(s <= chunk.start_char and chunk.end_char <= e for s, e in entity_spans)
        tokens = [t for t in chunk if t.pos_ not in ("DET", "PRON") and t.lower_ not in _STOP]
        if inside or not tokens:
            continue
        text = " ".join(t.text for t in tokens)
        _append(found, seen, text, _NOUN_CHUNK_FACTOR * stats.salience(text), "noun_chunk")
    found = [c for c in found if c.weight >= min_weight]
    found.sort(key=lambda c: -c.weight)
    return [Concept(query, _QUERY_WEIGHT, "query"), *found[:max_concepts]]


def _append(found: list[Concept], seen: set[str], text: str, weight: float, kind: ConceptKind) -> None:
    key = normalize_entity(text)
    if key and key not in seen and any(ch.isalnum() for ch in key):
        seen.add(key)
        found.append(Concept(" ".join(text.split()), float(weight), kind))


_LLM_PROMPT = """You prepare a search over a knowledge graph. List the concepts that evidence for a
complete answer to the question must mention: the explicit ones, and the implicit ones a reader
would infer (the intermediate entity of a multi-hop question, the relation asked about).
Specialise vague concepts to this question and relax strict schema terms to plain words.
Give each an importance weight between 0 and 1.
Answer with a JSON object: {{"concepts": [{{"text": "...", "weight": 0.9}}, ...]}}

Question: {query}
"""


def llm_concepts(query: str, llm: LLM, *, max_concepts: int = 6) -> list[Concept] | None:
    """Concepts named by an LLM (the whole query first), or None when its answer is unusable."""
    try:
        answer = complete_json(llm, _LLM_PROMPT.format(query=query), expect=dict)
    except LLMOutputError:
        return None
    items = answer.get("concepts") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        return None
    found: list[Concept] = []
    seen: set[str] = set()
    for item in items:
        text, weight = (item.get("text"), item.get("weight", 1.0)) if isinstance(item, dict) else (item, 1.0)
        if not isinstance(text, str) or not text.strip():
            continue
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
            weight = 1.0
        _append(found, seen, text, min(1.0, max(0.05, float(weight))), "llm")
    if not found:
        return None
    found.sort(key=lambda c: -c.weight)
    return [Concept(query, _QUERY_WEIGHT, "query"), *found[:max_concepts]]


def dedupe(concepts: Sequence[Concept]) -> list[Concept]:
    """Concepts without repeats (by normalised text), first kept."""
    seen: set[str] = set()
    out = []
    for c in concepts:
        key = normalize_entity(c.text)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
