"""Shared test configuration."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from core.data import load_demo_corpus, load_demo_questions
from core.embed import SentenceTransformerEmbedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def st_embedder() -> Iterator[SentenceTransformerEmbedder]:
    """The default all-MiniLM-L6-v2 model, loaded once for the whole test session.

    Torch runs on one intra-op thread meanwhile: MiniLM on short texts gains little from more, and
    on a busy two-core machine OpenMP's spin-waiting makes every query many times slower. Results
    are the same; the setting is restored afterwards.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield SentenceTransformerEmbedder()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def demo_texts() -> dict[str, str]:
    """Demo document id -> full text."""
    return {d.id: d.text for d in load_demo_corpus() if d.id is not None}


@pytest.fixture(scope="session")
def demo_questions() -> list[dict[str, Any]]:
    """The 12 demo questions with their supporting document ids."""
    return load_demo_questions()


@pytest.fixture
def collection_name() -> str:
    """A fresh Chroma collection name (in-memory Chroma clients share data within a process)."""
    return f"t-{uuid.uuid4().hex[:12]}"
