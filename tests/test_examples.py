"""The scripts in examples/ run offline, end to end, as a user would run them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from core.data import load_demo_questions

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 240


def run_example(name: str, *args: str) -> str:
    """Runs ``examples/<name>`` offline, as a user would; returns its stdout once it succeeded."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        # One torch thread: faster on a small, busy machine, and the output is the same.
        "OMP_NUM_THREADS": "1",
    }
    env.pop("BRIDGE_RAG_CHAT_MODEL", None)  # the offline stand-in model, whatever the caller's shell says
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def ranked_lines(out: str) -> list[str]:
    return re.findall(r"^ {2}[ *]? ?(\d+)\. (\S+)", out, flags=re.MULTILINE)


def test_langchain_chain() -> None:
    question = load_demo_questions()[0]["question"]
    out = run_example("langchain_chain.py", "--k", "3")

    assert "Indexing 46 demo documents with Bridge-RAG" in out
    assert "Chat model: FakeListChatModel" in out
    assert f"Question: {question}" in out
    context = out.split("Retrieved context (with provenance):\n", 1)[1].split("Answer:", 1)[0]
    assert [rank for rank, _ in ranked_lines(context)] == ["1", "2", "3"]
    assert "matched entities: marrowick" in context
    assert re.search(r"abstract \d+ at level \d+, depth \d+", context)
    assert "Answer: [offline placeholder from FakeListChatModel]" in out


def test_llama_index_query_engine() -> None:
    question = load_demo_questions()[4]["question"]
    out = run_example("llama_index_query_engine.py")

    assert f"Question: {question}" in out
    sources = out.split("Source nodes (with provenance):\n", 1)[1].split("Response", 1)[0]
    ranked = ranked_lines(sources)
    assert [rank for rank, _ in ranked] == ["1", "2", "3", "4"]
    assert "clara-penhallow" in {doc for _, doc in ranked}
    assert "matched entities: clara penhallow" in sources
    response = out.split("Response (MockLLM repeats the prompt it was given):\n", 1)[1]
    assert response.strip().startswith("Context information is below.")
    assert "Clara Penhallow" in response


def test_one_line_swap() -> None:
    out = run_example("one_line_swap.py")

    assert "Documents it needs (marked *): ilse-varga, marrowick-observatory, tomas-brel" in out
    dense = re.search(r"^vectorstore\.as_retriever\(\): (\d) of the 3 documents", out, flags=re.MULTILINE)
    bridge = re.search(
        r"^BridgeRetriever\.from_vectorstore\(vectorstore\): (\d) of the 3 documents", out, flags=re.MULTILINE
    )
    assert dense is not None
    assert bridge is not None
    assert int(bridge.group(1)) >= 2
    after = out.split("BridgeRetriever.from_vectorstore(vectorstore):", 1)[1]
    assert len(ranked_lines(after)) == 4
    assert "[entities: " in after


def test_composable_pieces() -> None:
    out = run_example("composable_pieces.py")

    assert "Documents it needs (marked *): ilse-varga, marrowick-observatory, tomas-brel" in out
    for title in (
        "EnsembleRetriever([bm25, dense])",
        "UncertaintyFusionRetriever([bm25, dense])",
        "ContextualCompressionRetriever(dense, EntityHopCompressor)",
    ):
        found = re.search(rf"^{re.escape(title)}: (\d) of the 3 documents", out, flags=re.MULTILINE)
        assert found is not None, title
    hop = out.split("ContextualCompressionRetriever(dense, EntityHopCompressor):", 1)[1]
    assert hop.startswith(" 3 of the 3 documents")
    assert len(ranked_lines(hop)) == 4
