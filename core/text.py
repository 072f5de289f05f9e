"""Deterministic, dependency-free text utilities: sentences, chunks, windows and name normalisation."""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata
from collections.abc import Callable

from core.types import Chunk, Document

__all__ = [
    "chunk_document",
    "heading_text",
    "is_heading_line",
    "is_value_phrase",
    "longest_names",
    "make_doc_id",
    "normalize_entity",
    "query_ngrams",
    "sentence_windows",
    "split_sentences",
    "title_entities",
]

# ---------------------------------------------------------------------------------------------
# Sentence splitting
# ---------------------------------------------------------------------------------------------

# A line: every line break is a sentence boundary.
_LINE = re.compile(r"[^\n\r\f\v\x85\u2028\u2029]+")
# A candidate sentence end: a run of terminators, optional closing quotes/brackets, then a space
# or the end of the line. "3.14" and "example.com" are never candidates (no space after the dot).
_TERMINATOR = re.compile(r"[.!?\u2026]+[\"'\u2019\u201d\u00bb)\]}]*(?=\s|$)")
_OPENERS = "\"'\u2018\u201c\u00ab([{"
# Abbreviations that introduce a name: never the end of a sentence.
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "e.g", "i.e", "cf", "vs", "viz"})
# Abbreviations that precede a number ("No. 5", "Fig. 3").
_NUMBERED = frozenset({"no", "nos", "fig", "figs", "vol", "p", "pp", "art", "sec", "ch", "eq", "op"})
# Other abbreviations: they end a sentence only when a typical sentence opener follows.
_ABBREVIATIONS = frozenset(
    {
        "st", "jr", "sr", "mt", "ft", "gen", "col", "lt", "sgt", "capt", "cmdr", "gov", "sen", "rep",
        "rev", "hon", "etc", "al", "approx", "inc", "ltd", "co", "corp", "dept", "univ", "ave", "blvd",
        "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    }
)  # fmt: skip
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # "U.S", "e.g", "Ph.D" (final dot excluded)
# Capitalised words that typically open a sentence (used after an ambiguous abbreviation).
_OPENER_WORDS = frozenset(
    {
        "the", "a", "an", "he", "she", "it", "they", "we", "i", "you", "this", "that", "these", "those",
        "there", "his", "her", "its", "their", "our", "in", "on", "at", "after", "before", "when", "while",
        "but", "and", "however", "then", "so", "if", "as", "for", "from", "to", "with",
    }
)  # fmt: skip


def _next_word(text: str, pos: int, end: int) -> str:
    """Return the word that starts after ``pos`` (skipping spaces and opening quotes)."""
    while pos < end and (text[pos].isspace() or text[pos] in _OPENERS):
        pos += 1
    stop = pos
    while stop < end and (text[stop].isalnum() or text[stop] in "'\u2019-"):
        stop += 1
    return text[pos:stop]


def _is_boundary(text: str, match: re.Match[str], line_start: int, line_end: int) -> bool:
    """Decide whether a terminator match ends a sentence."""
    nxt = _next_word(text, match.end(), line_end)
    if not nxt:
        return True
    if nxt[0].islower():
        return False
    terminators = match.group().rstrip(_OPENERS + "\u2019\u201d\u00bb)]}")
    if terminators != ".":
        return True  # "!", "?", "?!", ellipses
    pos = match.start()
    start = pos
    while start > line_start and not text[start - 1].isspace():
        start -= 1
    token = text[start:pos].lstrip(_OPENERS)
    low = token.lower()
    if low in _TITLES:
        return False
    if low in _NUMBERED and nxt[0].isdigit():
        return False
    soft = low in _ABBREVIATIONS or _DOTTED.fullmatch(token) is not None
    soft = soft or (len(token) == 1 and token.isupper())  # an initial: "J. R. R. Tolkien"
    return not soft or nxt.lower() in _OPENER_WORDS


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Shrink ``[start, end)`` to exclude surrounding whitespace; None when nothing remains."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split text into sentences, returning character spans.

    The splitter is regex based and deterministic. A sentence ends at a line break, or at ``.``,
    ``!``, ``?`` or an ellipsis (optionally followed by closing quotes or brackets) that is
    followed by whitespace and a word that does not start with a lowercase letter. A single period
    after a title (``Mr.``, ``Dr.``, ``e.g.``), before a number (``No. 5``), or after another
    abbreviation (``St.``, ``etc.``), an initial (``J.``) or a dotted acronym (``U.S.``) ends a
    sentence only when a typical sentence opener (``The``, ``He``, ...) follows. Decimals such as
    ``3.14`` never split.

    Args:
        text: Any text.

    Returns:
        Sorted, non-overlapping ``(start, end)`` spans such that ``text[start:end]`` is a sentence
        without surrounding whitespace. Every non-whitespace character lies in some span. Empty or
        whitespace-only text gives ``[]``.
    """
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        line_start, line_end = line.span()
        begin = line_start
        for match in _TERMINATOR.finditer(text, line_start, line_end):
            if match.end() > begin and _is_boundary(text, match, line_start, line_end):
                span = _strip_span(text, begin, match.end())
                if span is not None:
                    spans.append(span)
                begin = match.end()
        span = _strip_span(text, begin, line_end)
        if span is not None:
            spans.append(span)
    return spans


_MARKDOWN_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022>|]|\d+[.)])\s")
_QUOTE_MARKS = re.compile(r"[\"\u201c\u201d\u2018\u2019\u00ab\u00bb]")
MAX_HEADING_WORDS = 12


def heading_text(line: str) -> str | None:
    """The heading a line is, or None.

    A markdown heading (``## Installation``), or a short line (at most 12 words and 100
    characters) that starts with a capital letter or a digit, holds a letter, is not a list
    item or a table row, and does not end with sentence punctuation. Whether it is followed
    by text (a heading is) is for the caller to check.
    """
    m = _MARKDOWN_HEADING.match(line)
    if m:
        return m.group(2).strip() or None
    text = line.strip()
    if not text or len(text) > 100 or _LIST_ITEM.match(line) or text[-1] in ".!?:;,":
        return None
    first = _QUOTE_MARKS.sub("", text)[:1]
    if not (first.isupper() or first.isdigit()) or not any(c.isalpha() for c in text):
        return None
    return text if len(text.split()) <= MAX_HEADING_WORDS else None


def is_heading_line(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a sentence) is a whole line of its own that is a heading.

    Whether more text follows it (a heading needs some) is for the caller to check.
    """
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    rest = text[end : len(text) if line_end < 0 else line_end]
    return (
        not text[line_start:start].strip() and not rest.strip() and heading_text(text[start:end]) is not None
    )


# ---------------------------------------------------------------------------------------------
# Chunking
# ---------------------------------------------------------------------------------------------


_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def _split_long(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into pieces of at most ``size`` characters at word boundaries."""
    pieces: list[tuple[int, int]] = []
    while end - start > size:
        limit = start + size
        cut = limit
        while cut > start and not text[cut].isspace():
            cut -= 1
        if cut == start:  # a single word longer than size: hard split
            pieces.append((start, limit))
            start = limit
            continue
        piece = _strip_span(text, start, cut)
        if piece is not None:
            pieces.append(piece)
        start = cut
        while text[start].isspace():
            start += 1
    pieces.append((start, end))
    return pieces


def chunk_document(
    doc: Document, *, doc_id: str, chunk_size: int = 512, chunk_overlap: int = 64
) -> list[Chunk]:
    """Split a document into sentence-aware chunks that follow its sections and paragraphs.

    Whole sentences (see :func:`split_sentences`) are packed greedily into chunks of at most
    ``chunk_size`` characters, with two rules of layout:

    - a heading line (:func:`heading_text`: a markdown ``#`` line, or a short line without
      closing punctuation followed by more text) always starts a new chunk, so two sections
      never share one (a report's sections, or the pages of a crawl joined into one file);
    - a paragraph (text between blank lines) that fits in a chunk is never split: when it
      does not fit in what is left of the current chunk, the chunk ends before it.

    A paragraph longer than ``chunk_size`` is split between sentences, and each chunk that
    continues it starts with its previous chunk's trailing sentences that together span at
    most ``chunk_overlap`` characters (fewer when they would not leave room for a new
    sentence). A sentence longer than ``chunk_size`` is split at word boundaries, and a
    single word longer than ``chunk_size`` is split hard.

    Args:
        doc: The document to split.
        doc_id: The id recorded on every chunk (chunk ids are ``f"{doc_id}::{order}"``).
        chunk_size: Maximum chunk length in characters (>= 1).
        chunk_overlap: Maximum characters shared by consecutive chunks of one paragraph
            (``0 <= overlap < size``).

    Returns:
        The chunks in document order; ``chunk.text == doc.text[chunk.start:chunk.end]``, and every
        non-whitespace character of the document lies in at least one chunk.

    Raises:
        ValueError: If ``chunk_size`` or ``chunk_overlap`` is out of range.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}; pass a positive number of characters")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            f"chunk_overlap must satisfy 0 <= chunk_overlap < chunk_size, got chunk_overlap={chunk_overlap} "
            f"with chunk_size={chunk_size}; lower chunk_overlap or raise chunk_size"
        )
    text = doc.text
    units: list[tuple[int, int]] = []
    paragraph: list[int] = []  # the paragraph of each unit
    heading: list[bool] = []  # whether a unit is a heading line (a chunk starts there)
    breaks = [m.end() for m in _BLANK_LINE.finditer(text)]
    spans = split_sentences(text)
    for n, (start, end) in enumerate(spans):
        para = bisect.bisect_right(breaks, start)
        is_heading = n + 1 < len(spans) and is_heading_line(text, start, end)

        for piece in _split_long(text, start, end, chunk_size):
            units.append(piece)
            paragraph.append(para)
            heading.append(is_heading and piece[0] == start)
    para_end: dict[int, int] = {}
    for (_, end), para in zip(units, paragraph, strict=True):
        para_end[para] = end

    def fits_alone(i: int) -> bool:  # the paragraph starting at unit i fits in one chunk
        return para_end[paragraph[i]] - units[i][0] <= chunk_size

    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        last = first
        while last + 1 < len(units):
            nxt = last + 1
            if heading[nxt] or units[nxt][1] - units[first][0] > chunk_size:
                break
            new_paragraph = paragraph[nxt] != paragraph[last]
            if new_paragraph and para_end[paragraph[nxt]] - units[first][0] > chunk_size and fits_alone(nxt):
                break
            last = nxt
        start, end = units[first][0], units[last][1]
        order = len(chunks)
        chunks.append(
            Chunk(
                id=f"{doc_id}::{order}",
                doc_id=doc_id,
                order=order,
                text=text[start:end],
                start=start,
                end=end,
                metadata=dict(doc.metadata),
            )
        )
        if last + 1 == len(units):
            break
        nxt = first_new = last + 1
        if paragraph[nxt] == paragraph[last] and not heading[nxt]:
            # The next chunk continues this paragraph: it repeats the longest run of trailing
            # units that fits the overlap budget and still leaves room for the next new unit.
            while (
                first_new - 1 > first
                and end - units[first_new - 1][0] <= chunk_overlap
                and units[nxt][1] - units[first_new - 1][0] <= chunk_size
            ):
                first_new -= 1
        first = first_new
    return chunks


# ---------------------------------------------------------------------------------------------
# Sentence windows
# ---------------------------------------------------------------------------------------------


def sentence_windows(n_sentences: int, size: int, stride: int | None = None) -> list[tuple[int, int]]:
    """Overlapping windows of consecutive sentences.

    Args:
        n_sentences: Number of sentences (>= 0).
        size: Sentences per window (>= 1).
        stride: Step between window starts (``1 <= stride <= size``); defaults to ``max(1, size // 2)``.

    Returns:
        ``(first, last_exclusive)`` sentence ranges. Windows start at ``0, stride, 2 * stride, ...``
        and the last window ends exactly at ``n_sentences``, so every sentence is covered. Fewer
        than ``size`` sentences give the single window ``(0, n_sentences)``; zero sentences give ``[]``.

    Raises:
        ValueError: If an argument is out of range.
    """
    if n_sentences < 0:
        raise ValueError(f"n_sentences must be >= 0, got {n_sentences}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}; pass the number of sentences per window")
    step = max(1, size // 2) if stride is None else stride
    if not 1 <= step <= size:
        raise ValueError(
            f"stride must be >= 1 and <= size ({size}) so that every sentence is covered, got {stride}; "
            "pass None for the default max(1, size // 2)"
        )
    if n_sentences == 0:
        return []
    if n_sentences <= size:
        return [(0, n_sentences)]
    windows = [(s, s + size) for s in range(0, n_sentences - size + 1, step)]
    if windows[-1][1] < n_sentences:
        windows.append((n_sentences - size, n_sentences))
    return windows


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})
_ACRONYM = re.compile(r"(?<![\w.])[^\W\d_](?:\.[^\W\d_])+\.?(?!\w)")
_POSSESSIVE = re.compile(r"(?<=\w)'s(?!\w)")
_PUNCT = re.compile(r"[^\w\s-]|_")
_LOOSE_HYPHEN = re.compile(r"(?<![^\W_])-|-(?![^\W_])")
_ARTICLE = re.compile(r"^(?:the|a|an) (?=\S)")


def _fold_accents(text: str) -> str:
    """Drops combining marks (``"Brödel"`` -> ``"Brodel"``), keeping other scripts intact."""
    decomposed = unicodedata.normalize("NFKD", text)
    if decomposed.isascii():
        return decomposed
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _normalize(text: str) -> str:
    """Apply :func:`normalize_entity`'s rules except the leading-article rule."""
    text = _fold_accents(unicodedata.normalize("NFKC", text)).casefold().translate(_APOSTROPHES)
    text = _ACRONYM.sub(lambda m: m.group().replace(".", ""), text)
    text = _POSSESSIVE.sub("", text)
    text = _PUNCT.sub(" ", text)
    text = _LOOSE_HYPHEN.sub(" ", text)
    return " ".join(text.split())


def normalize_entity(name: str) -> str:
    """Normalise an entity name so that different mentions of one entity compare equal.

    Rules, in order:

    1. Unicode NFKC, accents folded (``"Aschenbrödel"`` -> ``"aschenbrodel"``), then casefold;
       typographic apostrophes become ``'``.
    2. Dotted acronyms lose their dots: ``"U.S."`` -> ``"us"``, ``"e.g."`` -> ``"eg"``.
    3. The possessive ``'s`` is removed: ``"Marie Curie's"`` -> ``"marie curie"``.
    4. Every other punctuation character (and ``_``) becomes a space, except a hyphen between two
       letters or digits (``"Jean-Paul"`` -> ``"jean-paul"``). So ``"O'Brien"`` -> ``"o brien"``
       and ``"The Beatles'"`` -> ``"the beatles"``.
    5. Whitespace is collapsed and stripped.
    6. A leading article (``the``, ``a``, ``an``) is dropped when something remains.

    Args:
        name: A raw entity mention.

    Returns:
        The normalised name (possibly empty).
    """
    return _ARTICLE.sub("", _normalize(name))


_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")

#: Words that carry a value (spaCy's DATE, TIME, MONEY, PERCENT, QUANTITY, ORDINAL and
#: CARDINAL kinds): calendar words, units of time and amount, spelled numbers and ordinals.
_VALUE_WORDS = frozenset(
    {
        "january", "february", "march", "april", "may", "june", "july", "august", "september",
        "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
        "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
        "sunday", "year", "years", "yearly", "quarter", "quarters", "quarterly", "month", "months",
        "monthly", "week", "weeks", "weekly", "day", "days", "daily", "decade", "decades", "century",
        "centuries", "annual", "annually", "fiscal", "fy", "q1", "q2", "q3", "q4", "h1", "h2", "am",
        "pm", "today", "yesterday", "tomorrow", "morning", "afternoon", "evening", "night", "noon",
        "midnight", "hour", "hours", "minute", "minutes", "second", "seconds", "percent", "percentage",
        "per", "cent", "pct", "million", "millions", "billion", "billions", "trillion", "trillions",
        "thousand", "thousands", "hundred", "hundreds", "dozen", "dozens", "dollar", "dollars", "usd",
        "eur", "euro", "euros", "pound", "pounds", "gbp", "yen", "cents", "bn", "mn", "kg", "km",
        "mile", "miles", "meter", "meters", "metre", "metres", "ton", "tons", "tonne", "tonnes", "one",
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "first",
        "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "last", "half"
    }
)  # fmt: skip
#: Words that may stand beside values in a value phrase ("throughout July 2017", "end of 2019").
_VALUE_LINKS = frozenset(
    {
        "a", "an", "the", "of", "in", "on", "at", "by", "to", "from", "and", "or", "for", "throughout",
        "during", "since", "until", "till", "between", "early", "late", "mid", "end", "beginning",
        "start", "around", "about", "approximately", "over", "under", "nearly", "almost", "next",
        "this", "that", "each", "every", "fy"
    }
)  # fmt: skip
_NUMBER = re.compile(r"[$\u20ac\u00a3]?\d[\d.,]*(?:st|nd|rd|th|s|m|k|bn|mn)?%?")


def is_value_phrase(name: str) -> bool:
    """True for a name that only states a value: a date, a time, an amount, a number or an ordinal.

    Such names (``"March 2017"``, ``"throughout 2018"``, ``"$50 million"``, ``"Q3"``, ``"the
    first"``) are what many documents share: they constrain a passage (its words still count as
    words) but never name a thing to walk to. The test is on the words: every one is a number,
    a calendar or unit word, a spelled number or ordinal, or a connector such as ``in`` or
    ``throughout``, and at least one is not a connector.

    Args:
        name: A name (raw or normalised).
    """
    words = _normalize(name).split()
    valued = False
    for w in words:
        if _NUMBER.fullmatch(w) or w in _VALUE_WORDS:
            valued = True
        elif w not in _VALUE_LINKS:
            return False
    return valued


def title_entities(title: str) -> list[str]:
    """Entity names for a document title, normalised with :func:`normalize_entity`.

    The title itself, and the title without a trailing parenthetical qualifier:
    ``"Brother (Australian band)"`` -> ``["brother australian band", "brother"]``.

    Args:
        title: A document title.

    Returns:
        Distinct non-empty names, the full title first.
    """
    names = [normalize_entity(title), normalize_entity(_PARENTHETICAL.sub("", title))]
    return [n for n in dict.fromkeys(names) if n]


def _ngram_words(text: str, max_n: int) -> list[str]:
    """The normalised words n-grams of up to ``max_n`` words are cut from (``max_n`` checked)."""
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    return _normalize(text).split()


def query_ngrams(text: str, max_n: int = 4) -> list[str]:
    """All word n-grams of a normalised query, for probing an entity filter.

    The text is normalised with the rules of :func:`normalize_entity` (steps 1-5, applied to the
    whole string), split into words, and every n-gram of 1 to ``max_n`` words is returned.

    Args:
        text: A query or any text.
        max_n: The longest n-gram, in words (>= 1).

    Returns:
        The n-grams, longest first and left to right within one length, without duplicates (the
        first occurrence is kept).

    Raises:
        ValueError: If ``max_n < 1``.
    """
    words = _ngram_words(text, max_n)
    grams: dict[str, None] = {}
    for n in range(min(max_n, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            grams.setdefault(" ".join(words[i : i + n]))
    return list(grams)


def longest_names(text: str, is_name: Callable[[str], bool], max_n: int = 8) -> list[str]:
    """The names in a text, longest first at each position: greedy left-to-right matching.

    The text is normalised like :func:`query_ngrams`; at each word the longest n-gram (up to
    ``max_n`` words) for which ``is_name`` holds is taken and matching resumes after it, so a
    name inside a longer one ("oklahoma" in "oklahoma city") is not returned for that
    occurrence, while a separate occurrence of it is.

    Args:
        text: Any text.
        is_name: Whether an n-gram is a known name.
        max_n: The longest n-gram, in words (>= 1).

    Returns:
        The names found, in text order, without duplicates.

    Raises:
        ValueError: If ``max_n < 1``.
    """
    words = _ngram_words(text, max_n)
    found: dict[str, None] = {}
    i = 0
    while i < len(words):
        for n in range(min(max_n, len(words) - i), 0, -1):
            gram = " ".join(words[i : i + n])
            if is_name(gram):
                found.setdefault(gram)
                i += n
                break
        else:
            i += 1
    return list(found)


def make_doc_id(text: str) -> str:
    """A stable document id: the first 16 hex digits of the SHA-1 of the UTF-8 text.

    Args:
        text: The document's text.

    Returns:
        A 16-character lowercase hex string.
    """
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]
