"""The composable pieces' benchmark commands on a tiny dataset, real model.

``python -m core.evaluation.fusion_sweep`` and ``python -m core.evaluation.composable_latency``
print the composable pieces' quality and latency figures; these tests run them end to end on the
ten-passage dataset of ``test_comparison`` so a change that breaks them fails here, not in a
benchmark run. No figure is asserted beyond what the tiny corpus makes certain.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import core.evaluation.composable_latency as latency
import core.evaluation.fusion_sweep as sweep
from core.embed import SentenceTransformerEmbedder
from tests.core.test_comparison import QUESTIONS, write_dataset


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("composable")
    write_dataset(root / "tiny")
    return root


@pytest.fixture(autouse=True)
def session_model(monkeypatch: pytest.MonkeyPatch, st_embedder: SentenceTransformerEmbedder) -> None:
    """The commands load the default model; hand them the session's instance (the same model)."""
    for module in (sweep, latency):
        monkeypatch.setattr(module, "as_embedder", lambda obj: st_embedder)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_sweep_dataset_gives_every_setting_a_recall(data_root: Path) -> None:
    recall = sweep.sweep_dataset(
        data_root / "tiny",
        temperatures=(0.25, 2.0),
        k=2,
        scalings=("rank", "minmax"),
        list_lengths=(2, 4),
        rank_constants=(1.0, 60.0),
    )
    ranks = {f"rank c={c} T={t}" for c in ("1", "60") for t in ("0.25", "2")}
    settings = {"ensemble", "rank c=1, equal confidences", "minmax T=0.25", "minmax T=2", *ranks}
    assert set(recall) == {(n, s) for n in (2, 4) for s in settings}
    assert all(0.0 <= value <= 1.0 for value in recall.values())
    # Two of the four questions are one-hop and answered by both retrievers' first result.
    assert recall[2, "ensemble"] >= 0.5
    assert recall[2, "rank c=1 T=0.25"] >= 0.5


def test_fusion_sweep_prints_one_row_per_setting_with_its_gain(data_root: Path, capsys: Any) -> None:
    assert sweep.main(["--data", str(data_root), "--datasets", "tiny", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "| n | setting | tiny | mean | mean - ensemble | worst dataset - ensemble |" in out
    rows = [_cells(line) for line in out.splitlines() if re.match(r"\| (5|10) \|", line)]
    # ensemble, equal confidences, then rank at every c and minmax, each at every temperature
    expected = 2 + (len(sweep._RANK_CONSTANTS) + 1) * len(sweep._TEMPERATURES)
    assert len(rows) == expected * len(sweep._LIST_LENGTHS)
    for n, _setting, value, mean, gain, worst in rows:
        ensemble = next(r for r in rows if r[0] == n and r[1] == "ensemble")
        assert float(mean) == float(value)  # one dataset: its mean is itself
        assert float(gain) == pytest.approx(float(value) - float(ensemble[2]), abs=1e-3)
        assert gain == worst
    assert "mean - ensemble, averaged over n = 5, 10" in out


def test_measure_dataset_times_every_row_on_every_question(data_root: Path) -> None:
    times = latency.measure_dataset(data_root / "tiny", k=2, rounds=2)
    keys = {key for c, b in latency.PAIRS for key in (c, latency.base_key(c, b))}
    assert set(times) == keys | {"query embedding"}  # each base timed beside each of its pairs
    for name, values in times.items():
        assert len(values) == 2 * len(QUESTIONS), name
        assert all(v > 0 for v in values), name


def test_composable_latency_prints_each_pair_and_the_embedding_column(data_root: Path, capsys: Any) -> None:
    assert latency.main(["--data", str(data_root), "--datasets", "tiny", "--k", "2", "--rounds", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny |")]
    assert len(lines) == len(latency.PAIRS)
    for line, (composed, base) in zip(lines, latency.PAIRS, strict=True):
        _, step, base_p50, composed_p50, _added, embed, beyond, ratio = _cells(line)
        assert step == f"{composed} over {base}"
        b, c = float(base_p50), float(composed_p50)  # printed to 0.1 ms, the ratio to 0.01
        assert (c - 0.05) / (b + 0.05) - 0.005 <= float(ratio) <= (c + 0.05) / (b - 0.05) + 0.005
        assert float(embed) > 0
        assert (beyond != "") == (composed in latency.EMBEDDING_STEPS)


def test_the_own_embedding_row_shares_the_walk_and_embeds_afresh(data_root: Path) -> None:
    from core.evaluation.corpus import BenchContext
    from core.evaluation.embedding_cache import EmbeddingCache
    from core.evaluation.metrics import load_dataset
    from core.evaluation.registry import STRATEGIES

    data = load_dataset(data_root / "tiny")
    ctx = BenchContext.create(
        data.documents(seed=0),
        EmbeddingCache(latency.as_embedder(None)),
        data_root / "own-embedding",
        k=2,
        show_progress=False,
    )
    row = STRATEGIES["llamaindex-entity-hop"].build(ctx)
    own = latency._without_embedding_reuse(row)
    (step,), (own_step,) = row.postprocessors, own.postprocessors
    assert step.reuse_query_embedding
    assert not own_step.reuse_query_embedding
    assert own_step._walk is step._walk
    assert own.retriever is row.retriever
    question = QUESTIONS[0][1]
    assert [r.id for r in own.retrieve(question, 2)] == [r.id for r in row.retrieve(question, 2)]


def test_strategy_pairs_are_timed_against_dense_as_the_bench_queries_them(data_root: Path) -> None:
    times = latency.measure_dataset(data_root / "tiny", k=2, rounds=1, pairs=latency.STRATEGY_PAIRS)
    keys = {key for c, b in latency.STRATEGY_PAIRS for key in (c, latency.base_key(c, b))}
    assert set(times) == keys | {"query embedding"}
    assert all(len(v) == len(QUESTIONS) and all(x > 0 for x in v) for v in times.values())


def test_pairs_argument_names_what_is_wrong(capsys: Any) -> None:
    assert latency.parse_pairs("umg:dense, bubble:dense") == (("umg", "dense"), ("bubble", "dense"))
    with pytest.raises(ValueError, match="composed:base"):
        latency.parse_pairs("umg")
    with pytest.raises(ValueError, match="unknown row 'nope'"):
        latency.parse_pairs("nope:dense")
    with pytest.raises(SystemExit):
        latency.main(["--pairs", "umg:nope"])
    assert "unknown row 'nope'" in capsys.readouterr().err
