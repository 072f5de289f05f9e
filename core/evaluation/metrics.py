"""Benchmark datasets, retrieval metrics and the benchmark runner.

Datasets use the plain format of ``shared/data`` (see its README): ``corpus.jsonl`` with
``{"id", "title", "text"}`` per line and ``questions.jsonl`` with ``{"id", "question",
"answer", "answer_aliases", "supporting_ids"}`` (and optionally ``type`` and ``documents``).
Each passage is indexed as its own document (``title``, a newline, then ``text``; the title
is also kept as metadata), in a shuffled order with a fixed seed: the files list passages in
question order, which would otherwise leak answers to any structure that uses order.

A corpus of long documents (``{"id", "document", "position", "text"}`` per line, no title:
the paragraphs of reports) is read as those documents, each one's paragraphs in
``position`` order (:func:`core.evaluation.shapes.shaped_documents`).
"""

from __future__ import annotations

import json
import random
import re
import string
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.types import Document, Retrieved

__all__ = [
    "MULTI_DOCUMENT",
    "Dataset",
    "Question",
    "RunResult",
    "answer_found",
    "demo_dataset",
    "doc_ids_of",
    "latency_summary",
    "load_dataset",
    "load_passages",
    "markdown_table",
    "normalize_answer",
    "passage_recall",
    "question_groups",
    "recall_by_group",
    "run_strategy",
    "summarize_runs",
]


@dataclass(frozen=True)
class Question:
    """A benchmark question with its gold passages."""

    id: str
    question: str
    answer: str
    aliases: tuple[str, ...]
    supporting_ids: tuple[str, ...]
    type: str | None = None
    documents: tuple[str, ...] = ()


@dataclass
class Dataset:
    """A corpus and its questions.

    Attributes:
        name: The dataset's name (its folder, plus the questions file when not the default).
        passages: ``{"id", "title", "text"}`` rows; a corpus of long documents has
            ``{"id", "title": "", "text", "document"}`` rows instead, each document's in
            paragraph order.
        questions: The questions.
    """

    name: str
    passages: list[dict[str, str]]
    questions: list[Question]

    @property
    def has_documents(self) -> bool:
        """True when the passages are the paragraphs of long documents (they name their ``document``)."""
        return bool(self.passages) and "document" in self.passages[0]

    def sample_questions(self, sample: int | None, seed: int = 0) -> list[Question]:
        """All questions, or a seeded sample of ``sample`` of them.

        Raises:
            ValueError: ``sample`` is below 1.
        """
        if sample is None:
            return list(self.questions)
        if sample < 1:
            raise ValueError(f"sample must be >= 1, got {sample}")
        return random.Random(seed).sample(self.questions, min(sample, len(self.questions)))

    def passage_texts(self) -> dict[str, str]:
        """Passage id -> the text indexed for it (``title``, a newline, ``text``)."""
        return {p["id"]: f"{p['title']}\n{p['text']}" for p in self.passages}

    def documents(self, seed: int = 0) -> list[Document]:
        """The passages as documents, shuffled with ``seed`` (one document per passage).

        Other shapes (titles only in the text, or none; passages grouped into long
        documents): :func:`core.evaluation.shapes.shaped_documents`.
        """
        from core.evaluation.shapes import CorpusShape, shaped_documents

        return shaped_documents(self.passages, CorpusShape(), seed)[0]


def _read_jsonl(path: Path, required: dict[str, type | tuple[type, ...]]) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; a dataset directory needs corpus.jsonl and questions.jsonl"
        )
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object")
            for key, typ in required.items():
                if key not in row:
                    raise ValueError(f"{path}:{lineno}: missing field {key!r}")
                if not isinstance(row[key], typ):
                    raise ValueError(
                        f"{path}:{lineno}: field {key!r} has the wrong type ({type(row[key]).__name__})"
                    )
            row["_line"] = lineno
            rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no rows")
    return rows


def load_passages(path: str | Path) -> list[dict[str, str]]:
    """Reads a ``corpus.jsonl``: one ``{"id", "title", "text"}`` passage per line.

    A corpus of long documents has ``{"id", "document", "position", "text"}`` lines instead
    (no title): each passage is a paragraph of ``document`` at ``position``.

    Args:
        path: The file.

    Returns:
        The passages (``id``, ``title``, ``text``; plus ``document`` for a corpus of
        documents, whose ``title`` is empty), in file order, or, for a corpus of documents,
        document by document (in the order each first appears) in ``position`` order.

    Raises:
        FileNotFoundError: The file is missing.
        ValueError: A malformed line (the message names the file, line and field), a
            duplicate passage id, a corpus mixing both kinds of lines, or two paragraphs of
            one document at one position.
    """
    rows = _read_jsonl(Path(path), {"id": str, "text": str})
    documents = "document" in rows[0]
    fields: dict[str, type | tuple[type, ...]] = (
        {"document": str, "position": int} if documents else {"title": str}
    )
    for row in rows:
        for key, typ in fields.items():
            if key not in row:
                kind = "a document's paragraph" if documents else "a titled passage"
                raise ValueError(
                    f"{path}:{row['_line']}: missing field {key!r} (the first line is {kind}; "
                    "a corpus holds one kind of line)"
                )
            if not isinstance(row[key], typ) or isinstance(row[key], bool):
                raise ValueError(
                    f"{path}:{row['_line']}: field {key!r} has the wrong type ({type(row[key]).__name__})"
                )
    ids = [p["id"] for p in rows]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"{path}: duplicate passage id {dup!r}")
    if not documents:
        return [{"id": p["id"], "title": p["title"], "text": p["text"]} for p in rows]
    by_doc: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_doc.setdefault(row["document"], []).append(row)
    out = []
    for doc, paragraphs in by_doc.items():
        positions = [p["position"] for p in paragraphs]
        if len(set(positions)) != len(positions):
            raise ValueError(f"{path}: document {doc!r} has two paragraphs at one position")
        for p in sorted(paragraphs, key=lambda p: p["position"]):
            out.append({"id": p["id"], "title": "", "text": p["text"], "document": doc})
    return out


def load_dataset(directory: str | Path, questions_file: str | Path = "questions.jsonl") -> Dataset:
    """Reads a dataset directory (``corpus.jsonl`` and ``questions.jsonl``).

    Args:
        directory: The dataset folder.
        questions_file: The questions file: a path, or a file name inside ``directory`` (e.g.
            ``singlehop.jsonl``: other questions over the same corpus).

    Returns:
        The dataset.

    Raises:
        FileNotFoundError: A file is missing.
        ValueError: A malformed line (the message names the file, line and field), a
            duplicate passage id, or a question whose supporting id is not in the corpus.
    """
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset directory {str(root)!r} does not exist")
    passages = load_passages(root / "corpus.jsonl")
    known = {p["id"] for p in passages}
    qpath = Path(questions_file)
    if not qpath.is_absolute() and not qpath.is_file():
        qpath = root / qpath
    raw = _read_jsonl(
        qpath,
        {"id": str, "question": str, "answer": (str, int, float), "supporting_ids": list},
    )
    questions = []
    for q in raw:
        where = f"{qpath}:{q['_line']}"
        missing = [s for s in q["supporting_ids"] if s not in known]
        if missing:
            raise ValueError(f"{where}: question {q['id']!r} cites unknown passage {missing[0]!r}")
        aliases = q.get("answer_aliases") or []
        if not isinstance(aliases, list):
            raise ValueError(f"{where}: field 'answer_aliases' must be a list")
        qtype, docs = q.get("type"), q.get("documents") or []
        if qtype is not None and not isinstance(qtype, str):
            raise ValueError(f"{where}: field 'type' must be a string")
        if not isinstance(docs, list):
            raise ValueError(f"{where}: field 'documents' must be a list")
        questions.append(
            Question(
                id=q["id"],
                question=q["question"],
                answer=str(q["answer"]),
                aliases=tuple(str(a) for a in aliases),
                supporting_ids=tuple(q["supporting_ids"]),
                type=qtype,
                documents=tuple(str(d) for d in docs),
            )
        )
    name = root.name if qpath.name == "questions.jsonl" else f"{root.name}/{qpath.stem}"
    return Dataset(name=name, passages=passages, questions=questions)


def demo_dataset() -> Dataset:
    """The bundled demo corpus (46 documents) and its 12 questions as a :class:`Dataset`.

    The demo questions have no answer aliases; passage texts are the documents' bodies
    (:meth:`Dataset.documents` puts the title in front again, as the demo corpus does).
    """
    from core.data import load_demo_corpus, load_demo_questions

    passages = []
    for doc in load_demo_corpus():
        title = str(doc.metadata.get("title", ""))
        body = doc.text[len(title) + 1 :] if doc.text.startswith(f"{title}\n") else doc.text
        passages.append({"id": str(doc.id), "title": title, "text": body})
    questions = [
        Question(
            id=str(q["id"]),
            question=str(q["question"]),
            answer=str(q["answer"]),
            aliases=tuple(str(a) for a in q.get("answer_aliases", [])),
            supporting_ids=tuple(str(s) for s in q["supporting_ids"]),
        )
        for q in load_demo_questions()
    ]
    return Dataset(name="demo", passages=passages, questions=questions)


_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, no punctuation, no articles, single spaces (the SQuAD normalisation)."""
    text = _ARTICLES.sub(" ", _PUNCT.sub(" ", text.lower()))
    return " ".join(text.split())


def answer_found(question: Question, texts: Sequence[str]) -> bool:
    """True when the normalised answer or an alias occurs in the normalised texts."""
    haystack = " " + normalize_answer(" ".join(texts)) + " "
    for ans in (question.answer, *question.aliases):
        norm = normalize_answer(ans)
        if norm and f" {norm} " in haystack:
            return True
    return False


def passage_recall(question: Question, doc_ids: Sequence[str]) -> float:
    """Share of the question's gold passages among ``doc_ids``."""
    gold = set(question.supporting_ids)
    return len(gold & set(doc_ids)) / len(gold) if gold else 0.0


def doc_ids_of(results: Sequence[Retrieved]) -> list[str]:
    """Document id of each result (``metadata["doc_id"]``, else the id before ``::``)."""
    return [str(r.metadata.get("doc_id") or r.id.split("::")[0]) for r in results]


@dataclass
class RunResult:
    """Per-question outputs of one strategy."""

    name: str
    results: list[list[Retrieved]] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    latency_no_embed_ms: list[float] = field(default_factory=list)
    build_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def run_strategy(
    name: str,
    questions: Sequence[Question | str],
    retrieve: Callable[[str], list[Retrieved]],
    retrieve_by_vector: Callable[[str, np.ndarray], list[Retrieved]] | None,
    embed_query: Callable[[str], np.ndarray],
    *,
    build_seconds: float = 0.0,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Runs every question through one strategy, timing it with and without the query embedding.

    Args:
        name: The run's name (its row in the tables).
        questions: The questions (or bare question texts), in order.
        retrieve: Answers a question; timed as the latency with the query embedding.
        retrieve_by_vector: Answers a question whose embedding is given; timed as the
            latency without it (None: not timed).
        embed_query: Embeds a question for ``retrieve_by_vector`` (untimed).
        build_seconds: Recorded on the result.
        progress: Called with 1 after each question.

    Returns:
        The results and latencies, one per question.
    """
    run = RunResult(name=name, build_seconds=build_seconds)
    for q in questions:
        text = q if isinstance(q, str) else q.question
        t0 = time.perf_counter()
        res = retrieve(text)
        run.latency_ms.append((time.perf_counter() - t0) * 1000)
        run.results.append(res)
        if retrieve_by_vector is not None:
            vec = embed_query(text)
            t0 = time.perf_counter()
            retrieve_by_vector(text, vec)
            run.latency_no_embed_ms.append((time.perf_counter() - t0) * 1000)
        if progress is not None:
            progress(1)
    return run


def latency_summary(run: RunResult) -> dict[str, float]:
    """p50 / p95 latency of a run, in ms.

    Returns:
        ``p50_ms``, ``p95_ms`` and, when the run timed it, ``p50_no_embed_ms`` and
        ``p95_no_embed_ms`` (without the query embedding).
    """
    out: dict[str, float] = {}
    for suffix, values in (("ms", run.latency_ms), ("no_embed_ms", run.latency_no_embed_ms)):
        if values:
            out[f"p50_{suffix}"] = float(np.percentile(values, 50))
            out[f"p95_{suffix}"] = float(np.percentile(values, 95))
    return out


def summarize_runs(
    questions: Sequence[Question],
    runs: Sequence[RunResult],
    ks: Sequence[int],
    *,
    answer_k: int = 5,
    ids_of: Callable[[Sequence[Retrieved]], list[str]] = doc_ids_of,
) -> list[dict[str, Any]]:
    """Metrics per strategy: passage recall@k, answer recall, context words, latency, build time.

    Args:
        questions: The questions, in the order the runs answered them.
        runs: One run per strategy.
        ks: The k of each passage recall column (``recall@{k}``).
        answer_k: The k of ``answer_recall@{answer_k}`` and ``context_words@{answer_k}``.
        ids_of: The passage ids a list of results stands for (default: their document ids;
            :class:`core.evaluation.shapes.PassageAttribution` for grouped documents).

    Returns:
        One row (dict) per run.
    """
    rows = []
    for run in runs:
        row: dict[str, Any] = {"strategy": run.name}
        for k in ks:
            row[f"recall@{k}"] = float(
                np.mean(
                    [passage_recall(q, ids_of(r[:k])) for q, r in zip(questions, run.results, strict=True)]
                )
            )
        row[f"answer_recall@{answer_k}"] = float(
            np.mean(
                [
                    answer_found(q, [x.text for x in r[:answer_k]])
                    for q, r in zip(questions, run.results, strict=True)
                ]
            )
        )
        row[f"context_words@{answer_k}"] = float(
            np.mean([sum(len(x.text.split()) for x in r[:answer_k]) for r in run.results])
        )
        by_group = recall_by_group(questions, run.results, answer_k, ids_of=ids_of)
        if by_group:
            row[f"recall@{answer_k}_by_type"] = by_group
        row.update(latency_summary(run))
        row["build_s"] = run.build_seconds
        row.update(run.extra)
        rows.append(row)
    return rows


MULTI_DOCUMENT = "all multi-document"
"""The group of :func:`recall_by_group` that holds every question whose gold lies in two
documents or more (beside each question type)."""


def question_groups(questions: Sequence[Question]) -> dict[str, list[int]]:
    """The questions of each type, and of :data:`MULTI_DOCUMENT`, by index (empty: no types).

    Groups are listed in order of first appearance; :data:`MULTI_DOCUMENT` (the questions
    naming two or more gold ``documents``) comes last, when there are such questions.
    """
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        if q.type is not None:
            groups.setdefault(q.type, []).append(i)
    multi = [i for i, q in enumerate(questions) if len(set(q.documents)) >= 2]
    if multi:
        groups[MULTI_DOCUMENT] = multi
    return groups


def recall_by_group(
    questions: Sequence[Question],
    results: Sequence[Sequence[Retrieved]],
    k: int,
    *,
    ids_of: Callable[[Sequence[Retrieved]], list[str]] = doc_ids_of,
) -> dict[str, dict[str, float]]:
    """Passage recall@k of each question group (:func:`question_groups`).

    Returns:
        Group -> ``{"questions": n, "recall": mean passage recall@k}`` (empty when the
        questions carry no type).
    """
    out: dict[str, dict[str, float]] = {}
    for name, members in question_groups(questions).items():
        recalls = [passage_recall(questions[i], ids_of(results[i][:k])) for i in members]
        out[name] = {"questions": float(len(members)), "recall": float(np.mean(recalls))}
    return out


def markdown_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Mapping[str, str] | None = None
) -> str:
    """A markdown table of ``rows`` restricted to ``columns`` (missing values shown as -).

    Args:
        rows: The rows.
        columns: The keys to show, in order.
        headers: Optional header text per key (default: the key itself).

    Returns:
        The table.
    """
    names = headers or {}

    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            if v != v:  # NaN: no score
                return "-"
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    out = [
        "| " + " | ".join(names.get(c, c) for c in columns) + " |",
        "|" + "|".join("---" if c == "strategy" else "---:" for c in columns) + "|",
    ]
    out += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(out)
