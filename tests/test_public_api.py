"""The public API of each package: an explicit ``__all__`` whose every name resolves."""

from __future__ import annotations

import importlib

import pytest

EXPECTED = {
    "core": [
        "UMGRAG",
        "AbstractForest",
        "BridgeConfig",
        "BridgeRAG",
        "BubbleConfig",
        "BubbleRAG",
        "CallableEmbedder",
        "ChunkStore",
        "CuckooFilter",
        "Document",
        "Embedder",
        "Graph",
        "LangChainEmbedder",
        "LlamaIndexEmbedder",
        "Retrieved",
        "SentenceTransformerEmbedder",
        "Strategy",
        "UMGConfig",
        "VectorIndex",
        "__version__",
        "as_embedder",
        "fuse_weighted",
        "merge_intervals",
        "rrf_fuse",
        "top_k_cosine",
    ],
    "langchain_bridge": [
        "BridgeRetriever",
        "BubbleRetriever",
        "EntityHopCompressor",
        "ParentPromotionCompressor",
        "StrategyRetriever",
        "UMGRetriever",
        "UncertaintyFusionRetriever",
        "from_langchain_document",
        "to_langchain_document",
    ],
    "llama_index_bridge": [
        "BridgeRetriever",
        "BubbleRetriever",
        "EntityHopPostprocessor",
        "ParentPromotionPostprocessor",
        "StrategyRetriever",
        "UMGRetriever",
        "UncertaintyFusionRetriever",
        "from_llama_document",
        "to_node_with_score",
    ],
}


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_all_imports(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(EXPECTED[package])
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_core_names_are_the_strategies_themselves() -> None:
    import core
    from core.store import ChunkStore
    from core.strategies.bridge import BridgeRAG
    from core.strategies.umg import UMGRAG

    assert core.BridgeRAG is BridgeRAG
    assert core.UMGRAG is UMGRAG
    assert core.ChunkStore is ChunkStore
    assert "BridgeRAG" in dir(core)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = core.NoSuchThing  # type: ignore[attr-defined]


def test_importing_core_stays_light() -> None:
    import subprocess
    import sys

    heavy = "{'chromadb', 'torch', 'spacy', 'faiss'}"
    code = f"import sys, core; print(any(m.split('.')[0] in {heavy} for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
