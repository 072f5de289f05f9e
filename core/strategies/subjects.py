"""What a unit is *about*, read from its document's text when no title says it.

The entity-hop walk (:mod:`core.strategies.entity_links`) goes from a name to the units
about it. A ``metadata["title"]`` says that directly, but most documents have none: a
markdown file or a web page carries its title as its first line, a PDF or a ticket often not
at all, and a long report says what each part is about in its section headings. This module
reads those signals from the text, with rules of general English and of how documents are
laid out (never a benchmark's vocabulary):

- **headings**: a markdown ``#`` line, or a short line without closing punctuation that is
  followed by more text (``Ned Kelly (1970 film)``, ``Installation``);
- **lead subjects**: the name a paragraph's first sentence is about, i.e. its subject when
  it opens with a name: the words before the first verb of being or having when they are
  all capitalised words and connectors (``By the Beautiful Sea is a song ...``,
  ``The Beatles were ...``), else the run of capitalised words that opens the sentence
  (``Harry Carroll (1892-1962) was ...``, ``Acme builds Falcon ...``); a sentence opened by
  a pronoun or a function word (``In 1990, he ...``) has none;
- **the document's subject** (:attr:`UnitSubjects.title`): its ``metadata["title"]``;
  else its first line when that is a heading that heads the whole document (its only
  heading, or one directly followed by another); else, in a document without headings, the
  lead subject of its first sentence.

A unit is about its document's subject, the heading of the section it lies in and the
headings inside it. Where no title or heading covers it, it is also about the lead subjects of
the paragraphs that start in it, with the names they are also known as (``known as X``,
``(born X``) and the short forms of a full name that the corpus's extracted entities use
(``Harry Jack Revier`` -> ``Harry Revier``). A lead of one capitalised word counts only
when it is a name, not a capitalised common noun (:func:`_stands_alone`). How much a long
document's many units share its subject is for the walk to weigh: it counts an entity's
frequency in documents and ranks a document's units by the dense prior
(:class:`~core.strategies.entity_links.EntityLinks`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.entities import SENTENCE_OPENERS
from core.strategies.base import check_same_lengths
from core.text import heading_text, normalize_entity, split_sentences
from core.types import TITLE_FROM_FILE_NAME

__all__ = ["UnitSubjects", "aliases", "lead_subject", "name_variants", "unit_subjects"]

#: Verbs of being and having and the modal auxiliaries: the end of a subject that opens a
#: sentence ("X is", "X was", "X has been", "X will").
_COPULAS = frozenset(
    {
        "is", "was", "are", "were", "be", "been", "being", "has", "had", "have", "will", "would",
        "can", "could", "may", "might", "shall", "should", "must", "became", "becomes", "remains",
        "remained", "serves", "served",
    }
)  # fmt: skip
#: Lowercase words that stand inside names: "University of Paris", "Ludwig van Beethoven",
#: "Conall mac Comgaill", "Harun ibn Yusuf" (name particles of several languages).
_NAME_CONNECTORS = frozenset(
    {
        "of", "the", "and", "&", "de", "del", "della", "dei", "der", "den", "des", "di", "du", "da", "dos",
        "das", "la", "le", "les", "lo", "van", "von", "zu", "y", "e", "mac", "ibn", "bin", "bint", "al",
        "el", "ap", "ben", "af", "av", "ter", "ten",
    }
)  # fmt: skip
#: Lowercase words that may also stand inside a name that is a whole subject before a verb:
#: "Comedians in Cars Getting Coffee is", "By the Beautiful Sea is", "A Tale of Two Cities was".
_SUBJECT_CONNECTORS = _NAME_CONNECTORS | {"a", "an", "in", "on", "at", "to", "for", "from", "with", "by"}
_ARTICLES = frozenset({"the", "a", "an"})
#: Capitalised words that open a sentence without naming anything: pronouns, determiners,
#: prepositions, conjunctions, adverbs of time and discourse (general English).
_OPENERS = SENTENCE_OPENERS | frozenset(
    {
        "according", "following", "despite", "under", "over", "between", "among", "against",
        "without", "within", "through", "into", "upon", "other", "another", "such", "several",
        "few", "any", "more", "less", "first", "last", "next", "new", "see", "note", "unlike",
        "like", "based", "born", "similarly", "additionally", "moreover", "furthermore",
        "meanwhile", "nevertheless", "instead", "otherwise", "likewise", "consequently", "hence",
        "still", "indeed", "overall", "currently", "recently", "originally", "initially",
        "eventually", "subsequently", "whereas",
    }
)  # fmt: skip
#: Openers that start an adverbial of time ("After Charles II was restored ...").
_TIME_WORDS = frozenset(
    {"after", "before", "during", "since", "until", "while", "when", "although", "because", "if", "though",
     "once", "as", "whereas", "upon", "following"}
)  # fmt: skip
_TOKEN = re.compile(r"[^\W_](?:[\w'\u2019&.-]*[\w])?|[(),;:\u2013\u2014\[\]]|\s[-\u2013]\s")
_QUOTES = re.compile(r"[\"\u201c\u201d\u2018\u2019\u00ab\u00bb]")
MAX_SUBJECT_WORDS = 10


def _is_name_word(token: str) -> bool:
    """A capitalised word, a short number, or a word with a capital inside (``al-Rashid``)."""
    return (
        token[0].isupper()
        or (token[0].isdigit() and len(token) <= 6)
        or (token[0].isalpha() and any(c.isupper() for c in token[1:]))
    )


def _skip_brackets(tokens: Sequence[str], i: int) -> int:
    """The index after the bracketed asides and commas that start at ``i``."""
    while i < len(tokens):
        if tokens[i] == ",":
            i += 1
        elif tokens[i] in ("(", "["):
            depth = 0
            while i < len(tokens):
                depth += 1 if tokens[i] in ("(", "[") else -1 if tokens[i] in (")", "]") else 0
                i += 1
                if depth == 0:
                    break
        else:
            break
    return i


def _name_run(tokens: Sequence[str], connectors: frozenset[str]) -> tuple[list[str], int]:
    """The opening run of name words and ``connectors`` (at most 11 words), and the index after it."""
    words: list[str] = []
    for i, tok in enumerate(tokens):
        if not tok[:1].isalnum() or tok in _COPULAS or not (_is_name_word(tok) or tok in connectors):
            return words, i
        words.append(tok)
        if len(words) > MAX_SUBJECT_WORDS:
            return words, i + 1
    return words, len(tokens)


def _tokens(sentence: str) -> list[str]:
    return [t.strip() for t in _TOKEN.findall(_QUOTES.sub("", sentence[:300]))]


def _of_name(tokens: Sequence[str]) -> list[str]:
    """The name after ``of`` in a subject ending at a verb (``The climate of New Delhi is`` -> New Delhi)."""
    verb = next((i for i, t in enumerate(tokens[: MAX_SUBJECT_WORDS + 2]) if t in _COPULAS), None)
    if verb is None or any(not t[:1].isalnum() for t in tokens[:verb]):
        return []
    prefix = tokens[:verb]
    if "of" not in prefix or prefix[0].lower() not in _ARTICLES:
        return []
    of = prefix.index("of")
    if of < 2 or not all(t.islower() for t in prefix[1:of]):  # "The climate of", "The early history of"
        return []
    words, end = _name_run(prefix[of + 1 :], _NAME_CONNECTORS)
    return words if end == len(prefix) - of - 1 else []  # the name runs up to the verb


def lead_subject(sentence: str) -> str | None:
    """The name a sentence opens with as its subject, or None.

    Three rules, tried in order:

    1. The words before the sentence's first verb of being or having (or modal), past any
       bracketed aside, when there are at most 10 of them, all capitalised words, numbers
       and connectors (``of``, ``the``, ``in``, ``de``, ...): ``By the Beautiful Sea is ...``
       -> ``By the Beautiful Sea``; ``A Maori Maid's Love (originally ...) is`` ->
       ``A Maori Maid's Love``; not when they open with a preposition of time or hold a
       number (``On 6 April the Committee ... was``).
    2. Else the run of capitalised words (with name connectors such as ``of``, ``van`` or
       ``mac`` inside, and a leading article) that opens the sentence, when its first word
       is not a pronoun, preposition or other common opener: ``Harry Carroll (1892-1962)
       was`` -> ``Harry Carroll``; ``Acme builds Falcon`` -> ``Acme``; ``In 1990, he ...``
       -> None.
    3. Else the name after ``of`` in a subject that ends at such a verb: ``The climate of
       New Delhi is ...`` -> ``New Delhi``.

    The name must hold a capitalised word that is not such an opener, and not end in a
    possessive (``Harker's fiancée ...``).
    """
    found = _lead(sentence)
    return found[0] if found else None


def _lead(sentence: str) -> tuple[str, bool] | None:
    """:func:`lead_subject`, and whether the name ends at a verb (rules 1 and 3)."""
    tokens = _tokens(sentence)
    if not tokens or not _is_name_word(tokens[0]) or tokens[0][0].isdigit():
        return None
    opener = tokens[0].lower()
    article = opener in _ARTICLES and len(tokens) > 1 and _is_name_word(tokens[1])
    words, after = _name_run(tokens, _SUBJECT_CONNECTORS)
    after = _skip_brackets(tokens, after)
    by_verb = after < len(tokens) and tokens[after] in _COPULAS and len(words) <= MAX_SUBJECT_WORDS
    if by_verb and opener in _OPENERS and opener not in _ARTICLES:
        by_verb = opener not in _TIME_WORDS and not any(w[0].isdigit() for w in words)
    if not by_verb:
        words = [] if opener in _OPENERS and not article else _name_run(tokens[article:], _NAME_CONNECTORS)[0]
        if not words:
            words = _of_name(tokens)
            by_verb = bool(words)
    while words and words[-1].lower() in _SUBJECT_CONNECTORS:
        words.pop()
    if not words or len(words) > MAX_SUBJECT_WORDS or words[-1].endswith(("'s", "\u2019s")):
        return None
    if not any(_is_name_word(w) and w.lower() not in _OPENERS for w in words):
        return None
    return " ".join(words), by_verb


_ALIAS = re.compile(r"\b(?:known|credited|alias)(?: \w+)? as\s+|\(\s*born\s+")
_MONTHS = frozenset(
    [
        "january", "february", "march", "april", "may", "june", "july", "august", "september",
        "october", "november", "december",
    ]
)  # fmt: skip


def aliases(sentence: str) -> list[str]:
    """Other names a sentence gives its subject (``known as X``, ``(born X``).

    A run of capitalised words after those words counts; dates and numbers do not.
    """
    out = []
    for m in _ALIAS.finditer(sentence[:300]):
        words, _ = _name_run(_tokens(sentence[m.end() : m.end() + 120]), _NAME_CONNECTORS)
        while words and words[-1].lower() in _NAME_CONNECTORS:
            words.pop()
        if not words or words[0].lower() in _MONTHS or any(w[0].isdigit() for w in words):
            continue
        if any(w[0].isupper() and w.lower() not in _OPENERS for w in words):
            out.append(" ".join(words))
    return out


def name_variants(name: str) -> list[str]:
    """Shorter forms a full personal name is also called by.

    For a name of three or more capitalised words without connectors: without its one-letter
    initials (``Stephen T. Kay`` -> ``Stephen Kay``), its first and last word (``Harry Jack
    Revier`` -> ``Harry Revier``) and its last two (``Wendell Phillips Smalley`` ->
    ``Phillips Smalley``).
    """
    words = name.replace(".", " ").split()
    if words and words[0].lower() in _ARTICLES:
        words = words[1:]
    if len(words) < 3 or not all(w[0].isupper() for w in words):
        return []
    full = [w for w in words if len(w) > 1]
    out = [" ".join(full)] if len(full) != len(words) and len(full) >= 2 else []
    if len(full) >= 3:
        out += [f"{full[0]} {full[-1]}", f"{full[-2]} {full[-1]}"]
    return out


def _capitalised(lead: str) -> list[str]:
    return [w for w in lead.split() if _is_name_word(w) and w.lower() not in _OPENERS]


def _stands_alone(lead: str, by_verb: bool, known: set[str], lowercase: set[str]) -> bool:
    """Whether a lead subject is a name, not a capitalised common noun ("Sales rose ...").

    A lead of two or more capitalised words, an acronym or one with a number is a name; a
    single capitalised word is one when the entity extractor found it in the unit, or, when
    a verb of being follows it, when the word never occurs in lowercase in the texts at hand
    ("Garbo is ..." but not "Revenue was ..." nor "Plain text that ...").
    """
    words = _capitalised(lead)
    if len(words) != 1 or any(c.isdigit() for c in lead):
        return True
    word = words[0]
    if word.isupper() and len(word) > 1:
        return True
    return normalize_entity(lead) in known or (by_verb and word.lower() not in lowercase)


@dataclass(frozen=True)
class UnitSubjects:
    """What one unit is about.

    Attributes:
        title: Its document's subject (``metadata["title"]``, or read from the text; None:
            unknown).
        about: Every name the unit is about, the document's subject first (raw text, not
            normalised).
    """

    title: str | None
    about: tuple[str, ...]


def _title_of(meta: Mapping[str, Any]) -> str | None:
    if meta.get(TITLE_FROM_FILE_NAME) is True:
        return None  # a file's name is a label, not what the document is about
    title = meta.get("title")
    return title.strip() if isinstance(title, str) and title.strip() else None


@dataclass(frozen=True)
class _Corpus:
    """What the texts at hand say about words: which occur in lowercase, which are extracted names."""

    lowercase: set[str]
    names: set[str]


@dataclass
class _Marks:
    """The headings and lead subjects of one unit's text, in order."""

    headings: list[str]
    leads: list[str]  # with their short forms and aliases
    first_heading: str | None  # the unit's first line, when it is a heading
    first_lead: str | None  # the lead subject of the unit's first sentence
    heading_pair: bool  # its first two lines are both headings


_SENTENCE_END = tuple(".!?:\"')\u201d")
_LOWER_WORD = re.compile(r"(?<![.!?]\s)(?<!^)\b[a-z][a-z'-]+\b", re.MULTILINE)


def _marks(text: str, known: set[str], corpus: _Corpus, *, continues: bool) -> _Marks:
    """Headings (lines followed by text) and the lead subjects of the paragraphs that start in ``text``.

    A line starts a paragraph when it is the first, follows a blank line or a heading, or
    follows a line that ends a sentence (so hard-wrapped lines are not paragraphs). A unit
    that ``continues`` its document may begin mid-paragraph: its first line's lead counts
    only when it has two capitalised words or more. A lead of one capitalised word must
    stand alone as a name (:func:`_stands_alone`).
    """
    lines = text.splitlines()
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    headings: list[str] = []
    leads: list[str] = []
    first_heading = first_lead = None
    heading_pair = False
    prev: int | None = None
    prev_heading = False
    for n, i in enumerate(nonblank):
        line = lines[i]
        h = heading_text(line) if n + 1 < len(nonblank) else None
        if h is not None:
            headings.append(h)
            if n == 0:
                first_heading = h
            elif n == 1 and first_heading is not None:
                heading_pair = True
            prev, prev_heading = i, True
            continue
        starts = prev is None or prev_heading or i - prev > 1 or lines[prev].rstrip().endswith(_SENTENCE_END)
        mid_paragraph = prev is None and continues
        prev, prev_heading = i, False
        if not starts:
            continue
        spans = split_sentences(line)
        if not spans:
            continue
        sentence = line[spans[0][0] : spans[0][1]]
        found = _lead(sentence)
        if found is None or not _stands_alone(*found, known, corpus.lowercase):
            continue
        lead = found[0]
        if mid_paragraph and len(_capitalised(lead)) < 2:
            continue
        short = [v for v in name_variants(lead) if normalize_entity(v) in corpus.names]
        leads += [lead, *short, *aliases(sentence)]
        if n == 0:
            first_lead = lead
    return _Marks(headings, leads, first_heading, first_lead, heading_pair)


def unit_subjects(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any]],
    entities: Sequence[Sequence[str]] | None = None,
) -> list[UnitSubjects]:
    """What each unit is about, from its document's title or, without one, from the text.

    Args:
        doc_ids: Each unit's document; a document's units are read in the order given, which
            should be the document's (chunks, or sentence windows by start).
        texts: Each unit's text.
        metadatas: Each unit's metadata (``title`` is read).
        entities: Each unit's extracted entity names (normalised or not): a lead subject of a
            single capitalised word that also occurs in lowercase in ``texts`` ("Sales rose
            ...") counts only when the extractor found it too.

    Returns:
        One :class:`UnitSubjects` per unit.

    Raises:
        ValueError: The sequences differ in length.
    """
    check_same_lengths(
        ("document ids", doc_ids), ("texts", texts), ("metadatas", metadatas), ("entity lists", entities)
    )
    corpus = _Corpus(
        lowercase={w for t in texts for w in _LOWER_WORD.findall(t)},
        names={normalize_entity(e) for ents in entities or () for e in ents},
    )
    by_doc: dict[str, list[int]] = {}
    for i, doc_id in enumerate(doc_ids):
        by_doc.setdefault(doc_id, []).append(i)
    out: list[UnitSubjects | None] = [None] * len(texts)
    for units in by_doc.values():
        names: Sequence[Sequence[str]] = (
            [entities[i] for i in units] if entities is not None else [[]] * len(units)
        )
        found = _document_subjects([texts[i] for i in units], [metadatas[i] for i in units], names, corpus)
        for i, subject in zip(units, found, strict=True):
            out[i] = subject
    return [s for s in out if s is not None]


def _document_subjects(
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any]],
    entities: Sequence[Sequence[str]],
    corpus: _Corpus,
) -> list[UnitSubjects]:
    marks = [
        _marks(t, {normalize_entity(e) for e in ents}, corpus, continues=i > 0)
        for i, (t, ents) in enumerate(zip(texts, entities, strict=True))
    ]
    headings = {h for m in marks for h in m.headings}
    title = next((t for t in (_title_of(m) for m in metadatas) if t), None)
    first = marks[0]
    heads_document = False
    if title is None and first.first_heading is not None and (len(headings) == 1 or first.heading_pair):
        title, heads_document = first.first_heading, True
    out: list[UnitSubjects] = []
    section: str | None = None
    explicit = title is not None  # a title or a heading says what the document is about
    if title is None and not headings:
        title = first.first_lead
    for m in marks:
        own = [h for h in m.headings if not (heads_document and h == title)]
        about = [title] if title else []
        if section is not None and m.first_heading is None:  # the section it continues
            about.append(section)
        about += own
        if not (explicit or own or section is not None):
            about += m.leads  # no title or heading covers this part: its paragraphs' subjects
        if own:
            section = own[-1]
        out.append(UnitSubjects(title, tuple(dict.fromkeys(about))))
    return out
