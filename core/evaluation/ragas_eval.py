"""RAGAS metrics for retrieval results, through ``ragas.evaluate``.

Without an LLM, four metrics that need no model and no network:

- ``id_based_context_recall`` / ``id_based_context_precision``: retrieved document ids
  against the question's gold passage ids (``supporting_ids``);
- ``non_llm_context_recall`` / ``non_llm_context_precision_with_reference``: retrieved
  texts against the gold passages' texts by string similarity (Levenshtein, threshold 0.5).

With an LLM (a LangChain or LlamaIndex model, or a ragas ``BaseRagasLLM``), also context
precision (``llm_context_precision_with_reference``), context recall, faithfulness and
answer relevancy. The last two judge an answer, so one is generated per question from the
retrieved contexts with the same LLM; answer relevancy also embeds, with the run's embedder.

ragas 0.4 marks ``evaluate``, its metric classes in ``ragas.metrics`` and its LLM wrappers
as deprecated in favour of an experiment API that has no ``evaluate`` equivalent for these
metrics yet; those deprecation warnings, and only those, are silenced around the calls.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from core.embed import Embedder
from core.evaluation.metrics import Question, doc_ids_of
from core.types import Retrieved

__all__ = [
    "LLM_METRICS",
    "METRIC_LABELS",
    "NON_LLM_METRICS",
    "RagasScores",
    "answer_prompt",
    "evaluate_retrieval",
    "ragas_embeddings",
]

#: Metric names (the columns ragas reports) without an LLM.
NON_LLM_METRICS = (
    "id_based_context_recall",
    "id_based_context_precision",
    "non_llm_context_recall",
    "non_llm_context_precision_with_reference",
)
#: Metric names added when an LLM is given.
LLM_METRICS = (
    "llm_context_precision_with_reference",
    "context_recall",
    "faithfulness",
    "answer_relevancy",
)

_RAGAS_HINT = "RAGAS metrics need ragas: pip install 'bridge-rag[eval]'"
_DEPRECATIONS = (
    r"evaluate\(\) is deprecated",
    r"aevaluate\(\) is deprecated",
    r"Importing \w+ from 'ragas\.metrics' is deprecated",
    r"LangchainLLMWrapper is deprecated",
    r"LlamaIndexLLMWrapper is deprecated",
)


@dataclass
class RagasScores:
    """RAGAS scores of one strategy.

    Attributes:
        means: Mean of each metric over the questions (NaN scores left out).
        per_question: One dict of metric scores per question, in question order.
        failed: How many scores of each metric came back NaN (a metric that could not score).
    """

    means: dict[str, float] = field(default_factory=dict)
    per_question: list[dict[str, float]] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)


@contextmanager
def _quiet_ragas_deprecations() -> Iterator[None]:
    with warnings.catch_warnings():
        for message in _DEPRECATIONS:
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
        yield


def _ragas() -> Any:
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    try:
        import ragas
    except ImportError as exc:
        raise ImportError(f"{_RAGAS_HINT} ({exc})") from exc
    # ragas 0.4.3 builds an analytics event on every evaluate() even when tracking is off, and
    # reads its user id with json.load(open(...)), leaving the file to the garbage collector (a
    # ResourceWarning, an error under pytest). The id is cached after the first read, so read it
    # once here, where the unclosed file is collected at once and its warning ignored.
    try:
        from ragas._analytics import get_userid
    except ImportError:  # pragma: no cover - another ragas version
        return ragas
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        get_userid()
    return ragas


def _metric(name: str) -> Any:
    with _quiet_ragas_deprecations():
        import ragas.metrics

        return getattr(ragas.metrics, name)()


def answer_prompt(question: str, contexts: Sequence[str]) -> str:
    """The prompt that asks the LLM to answer from the retrieved contexts only."""
    numbered = "\n\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, start=1))
    return (
        "Answer the question using only the numbered context passages. Answer in a few words; "
        "if the passages do not contain the answer, say that you do not know.\n\n"
        f"Context:\n{numbered}\n\nQuestion: {question}\nAnswer:"
    )


def ragas_embeddings(embedder: Embedder) -> Any:
    """A ragas ``BaseRagasEmbeddings`` over a bridge-rag embedder (for answer relevancy)."""
    _ragas()
    from ragas.embeddings import BaseRagasEmbeddings

    class CoreRagasEmbeddings(BaseRagasEmbeddings):
        def __init__(self, inner: Embedder) -> None:
            super().__init__()
            self.inner = inner

        def embed_query(self, text: str) -> list[float]:
            vector: list[float] = self.inner.embed_query(text).tolist()
            return vector

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            rows: list[list[float]] = self.inner.embed_documents(texts).tolist()
            return rows

        async def aembed_query(self, text: str) -> list[float]:
            return self.embed_query(text)

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.embed_documents(texts)

    return CoreRagasEmbeddings(embedder)


def _ragas_llm(llm: Any) -> Any:
    """A ragas LLM for ``llm`` (LangChain models are wrapped by ``ragas.evaluate`` itself)."""
    from ragas.llms import BaseRagasLLM

    if isinstance(llm, BaseRagasLLM):
        return llm
    module = (type(llm).__module__ or "").split(".")[0]
    if module == "llama_index" or any(
        (c.__module__ or "").startswith("llama_index") for c in type(llm).__mro__
    ):
        from ragas.llms.base import LlamaIndexLLMWrapper

        with _quiet_ragas_deprecations():
            return LlamaIndexLLMWrapper(llm)
    return llm


def _complete(llm: Any, prompt: str) -> str:
    from ragas.llms import BaseRagasLLM

    if isinstance(llm, BaseRagasLLM):
        raise TypeError(
            "answers for faithfulness and answer relevancy are generated with the LLM; pass a LangChain "
            "or LlamaIndex model (ragas LLMs cannot be called directly), or pass responses="
        )
    from core.llm import as_llm

    model = as_llm(llm)
    assert model is not None
    return model.complete(prompt).strip()


def evaluate_retrieval(
    questions: Sequence[Question],
    results: Sequence[Sequence[Retrieved]],
    passages: Mapping[str, str],
    *,
    k: int,
    llm: Any = None,
    embedder: Embedder | None = None,
    responses: Sequence[str] | None = None,
    show_progress: bool = False,
    ids_of: Callable[[Sequence[Retrieved]], list[str]] = doc_ids_of,
) -> RagasScores:
    """Scores one strategy's results with ``ragas.evaluate``.

    Args:
        questions: The questions, in order.
        results: Each question's retrieved results, best first (the top ``k`` are scored).
        passages: Passage id -> text, for the gold passages (``reference_contexts``).
        k: How many results per question count as the retrieved contexts.
        llm: Optional LLM (LangChain, LlamaIndex or ragas) for the LLM metrics.
        embedder: Embedder for answer relevancy (needed with ``llm``).
        responses: Answers to judge for faithfulness and answer relevancy; generated with
            ``llm`` from the retrieved contexts when None.
        show_progress: Show ragas' progress bar.
        ids_of: The passage ids of a list of results (``retrieved_context_ids``); default
            their document ids.

    Returns:
        The scores.

    Raises:
        ImportError: ragas is not installed.
        ValueError: ``results`` and ``questions`` differ in length, a gold passage is not in
            ``passages``, or ``llm`` is given without ``embedder``.
    """
    if len(results) != len(questions):
        raise ValueError(f"{len(results)} result lists for {len(questions)} questions; pass one per question")
    if llm is not None and embedder is None:
        raise ValueError("the LLM metrics include answer relevancy, which embeds; pass embedder= with llm=")
    if responses is not None and len(responses) != len(questions):
        raise ValueError(f"{len(responses)} responses for {len(questions)} questions; pass one per question")
    ragas = _ragas()
    from ragas import EvaluationDataset, SingleTurnSample

    samples: list[Any] = []
    for i, (q, res) in enumerate(zip(questions, results, strict=True)):
        missing = [s for s in q.supporting_ids if s not in passages]
        if missing:
            raise ValueError(f"question {q.id!r}: gold passage {missing[0]!r} is not in passages")
        top = list(res[:k])
        contexts = [r.text for r in top]
        fields: dict[str, Any] = {
            "user_input": q.question,
            "retrieved_contexts": contexts,
            "reference_contexts": [passages[s] for s in q.supporting_ids],
            "retrieved_context_ids": ids_of(top),
            "reference_context_ids": list(q.supporting_ids),
            "reference": q.answer,
        }
        if llm is not None:
            fields["response"] = (
                responses[i] if responses is not None else _complete(llm, answer_prompt(q.question, contexts))
            )
        samples.append(SingleTurnSample(**fields))
    names = list(NON_LLM_METRICS)
    metrics = [
        _metric("IDBasedContextRecall"),
        _metric("IDBasedContextPrecision"),
        _metric("NonLLMContextRecall"),
        _metric("NonLLMContextPrecisionWithReference"),
    ]
    kwargs: dict[str, Any] = {}
    if llm is not None:
        names += list(LLM_METRICS)
        metrics += [
            _metric("LLMContextPrecisionWithReference"),
            _metric("LLMContextRecall"),
            _metric("Faithfulness"),
            _metric("ResponseRelevancy"),
        ]
        kwargs = {"llm": _ragas_llm(llm), "embeddings": ragas_embeddings(embedder)}  # type: ignore[arg-type]
    with _quiet_ragas_deprecations():
        result = ragas.evaluate(
            EvaluationDataset(samples=samples),
            metrics=metrics,
            show_progress=show_progress,
            raise_exceptions=llm is None,
            **kwargs,
        )
    scores = RagasScores()
    for row in result.scores:
        scores.per_question.append({n: _as_float(row.get(n)) for n in names})
    for n in names:
        values = [s[n] for s in scores.per_question]
        good = [v for v in values if not math.isnan(v)]
        scores.means[n] = sum(good) / len(good) if good else math.nan
        scores.failed[n] = len(values) - len(good)
    return scores


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


#: Short column labels for the metrics.
METRIC_LABELS = {
    "id_based_context_recall": "ragas ID recall",
    "id_based_context_precision": "ragas ID precision",
    "non_llm_context_recall": "ragas text recall",
    "non_llm_context_precision_with_reference": "ragas text precision",
    "llm_context_precision_with_reference": "ragas LLM context precision",
    "context_recall": "ragas LLM context recall",
    "faithfulness": "ragas faithfulness",
    "answer_relevancy": "ragas answer relevancy",
}
