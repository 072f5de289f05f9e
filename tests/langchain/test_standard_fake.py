"""LangChain's standard retriever suite, run offline against the in-memory fake strategy."""

from __future__ import annotations

from typing import Any

from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_bridge import StrategyRetriever
from tests.fake_strategy import FakeStrategy


class TestStrategyRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[StrategyRetriever]:
        return StrategyRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"strategy": FakeStrategy(), "k": 2}

    @property
    def retriever_query_example(self) -> str:
        # Matches four of the six fake documents, so k=1 and k=3 both return exactly k.
        return "Which iron tower is in Paris?"
