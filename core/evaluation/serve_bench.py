"""What ``bridge-rag serve`` adds to a query, and whether it fails while the index is updated.

    python -m core.evaluation.serve_bench --docs /tmp/q42/docs --work /tmp/serve-bench

The script copies the folder ``--docs`` into ``--work``, indexes the copy with ``bridge-rag
index``, and starts ``bridge-rag serve`` on it (a subprocess on a free loopback port). Then:

1. **latency**: the same questions (the opening words of the files' paragraphs) are asked of
   the library in this process (:meth:`core.app.querying.OpenIndex.retrieve`) and of the
   server over HTTP (``POST /retrieve``, one keep-alive httpx client, one request at a time),
   in alternating rounds so that a busy machine slows both alike; the p50 of each and their
   difference and ratio are printed;
2. **load under an update**: one file of the copy is edited and another deleted, ``bridge-rag
   index --update`` starts, and ``--requests`` requests are sent ``--concurrency`` at a time
   while it runs; every answer that is not a 200 with results is a failure. Afterwards the
   server must answer from the new generation: the edited text is found, the deleted file's
   chunks are gone.

The figures are wall-clock times on whatever else the machine runs: upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["ServeBench", "paragraph_questions", "run_serve_benchmark"]

_LISTENING = re.compile(r"on (http://\S+) \(POST /retrieve")
_EDIT = "In 2024 the company opened the Quillmere Research Campus, led by the engineer Anselm Vrba."
_EDIT_QUESTION = "Who leads the Quillmere Research Campus?"
_STARTUP_TIMEOUT_S = 180.0
_SWITCH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ServeBench:
    """The figures of one run (milliseconds unless named otherwise).

    Attributes:
        chunks: Chunks in the index before the update.
        questions: Distinct questions asked.
        timed: Requests timed for each p50 (library and HTTP alike).
        library_p50_ms: p50 of ``OpenIndex.retrieve`` in this process.
        http_p50_ms: p50 of ``POST /retrieve`` over loopback, answer parsed.
        load_requests: Requests sent during the update.
        concurrency: Requests in flight at a time.
        threads: The server's ``--threads``.
        load_failures: Requests that did not get a 200 with results.
        load_p50_ms: p50 latency under load.
        load_p95_ms: p95 latency under load.
        load_seconds: How long the load took.
        sent_during_update: Requests sent while ``--update`` ran.
        update_seconds: How long ``bridge-rag index --update`` took.
        generation_before: The generation served before the update.
        generation_after: The generation served after it.
        edit_found: The edited file's new text is found after the update.
        deleted_gone: The deleted file's chunks are no longer returned.
    """

    chunks: int | None
    questions: int
    timed: int
    library_p50_ms: float
    http_p50_ms: float
    load_requests: int
    concurrency: int
    threads: int
    load_failures: int
    load_p50_ms: float
    load_p95_ms: float
    load_seconds: float
    sent_during_update: int
    update_seconds: float
    generation_before: str | None
    generation_after: str | None
    edit_found: bool
    deleted_gone: bool

    def report(self) -> str:
        """The figures as a few lines of text."""
        overhead = self.http_p50_ms - self.library_p50_ms
        return "\n".join(
            [
                f"index: {self.chunks} chunks; {self.questions} questions, {self.timed} timed each way",
                f"library p50 (OpenIndex.retrieve): {self.library_p50_ms:.2f} ms",
                f"HTTP p50 (POST /retrieve, loopback): {self.http_p50_ms:.2f} ms "
                f"({overhead:+.2f} ms, x{self.http_p50_ms / self.library_p50_ms:.2f})",
                f"load: {self.load_requests} requests, {self.concurrency} at a time (--threads "
                f"{self.threads}), in {self.load_seconds:.1f} s: {self.load_failures} failed; "
                f"p50 {self.load_p50_ms:.1f} ms, p95 {self.load_p95_ms:.1f} ms",
                f"update: {self.update_seconds:.1f} s, {self.sent_during_update} requests sent while it ran; "
                f"served {self.generation_before} -> {self.generation_after}; edited text found: "
                f"{self.edit_found}; deleted file gone: {self.deleted_gone}",
                "(wall-clock on a shared machine: upper bounds)",
            ]
        )


def paragraph_questions(docs: Path, limit: int = 60) -> list[str]:
    """Questions from the files under ``docs``: the first 12 words of each paragraph, in file order."""
    found: list[str] = []
    for path in sorted(p for p in docs.rglob("*") if p.is_file() and p.suffix in (".txt", ".md")):
        for paragraph in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            words = paragraph.split()
            if len(words) >= 6:
                found.append(" ".join(words[:12]))
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "core.app.cli", *args]


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def _start_server(
    index: Path, log: Path, env: dict[str, str], threads: int
) -> tuple[subprocess.Popen[bytes], str]:
    """Starts ``bridge-rag serve INDEX --port 0``; returns it and its URL once it answers."""
    import httpx

    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            _cli("serve", str(index), "--port", "0", "--threads", str(threads)), stderr=sink, env=env
        )
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        match = _LISTENING.search(log.read_text(errors="replace"))
        if match:
            try:
                if httpx.get(f"{match.group(1)}/health", timeout=5).status_code == 200:
                    return proc, match.group(1)
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"bridge-rag serve did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _timed_rounds(
    index_dir: Path, url: str, questions: Sequence[str], k: int, rounds: int
) -> tuple[float, float]:
    """p50 (ms) of the library and of HTTP over the same questions, in alternating rounds."""
    import httpx

    from core.app.querying import OpenIndex

    library: list[float] = []
    http: list[float] = []
    with OpenIndex(index_dir, follow=True) as index, httpx.Client(base_url=url, timeout=60) as client:
        for q in questions[:5]:  # warm both up
            index.retrieve(q, k=k)
            client.post("/retrieve", json={"query": q, "k": k}).raise_for_status()
        for _ in range(rounds):
            for q in questions:
                start = time.perf_counter()
                index.retrieve(q, k=k)
                library.append(time.perf_counter() - start)
            for q in questions:
                start = time.perf_counter()
                response = client.post("/retrieve", json={"query": q, "k": k})
                response.raise_for_status()
                response.json()
                http.append(time.perf_counter() - start)
    return statistics.median(library) * 1000.0, statistics.median(http) * 1000.0


def _load(
    url: str,
    questions: Sequence[str],
    k: int,
    requests: int,
    concurrency: int,
    update: subprocess.Popen[bytes],
) -> tuple[list[float], list[str], int, float]:
    """Sends ``requests`` requests ``concurrency`` at a time: latencies, failures, sent during the update."""
    import httpx

    lock = threading.Lock()
    latencies: list[float] = []
    failures: list[str] = []
    counters = {"next": 0, "during": 0}

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while True:
                with lock:
                    i = counters["next"]
                    if i >= requests:
                        return
                    counters["next"] = i + 1
                    if update.poll() is None:
                        counters["during"] += 1
                start = time.perf_counter()
                try:
                    response = client.post("/retrieve", json={"query": questions[i % len(questions)], "k": k})
                    ok = response.status_code == 200 and bool(response.json()["results"])
                    problem = "" if ok else f"{response.status_code}: {response.text[:200]}"
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)
                    if problem:
                        failures.append(problem)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, failures, counters["during"], time.perf_counter() - start


def _note_end(proc: subprocess.Popen[bytes], ended: list[float]) -> None:
    """Waits for ``proc`` and notes when it ended (``time.perf_counter``)."""
    proc.wait()
    ended.append(time.perf_counter())


def _served(url: str) -> dict[str, Any]:
    import httpx

    health: dict[str, Any] = httpx.get(f"{url}/health", timeout=30).json()
    return health


def run_serve_benchmark(
    docs: Path,
    work: Path,
    *,
    rounds: int = 3,
    questions: int = 60,
    requests: int = 2000,
    concurrency: int = 8,
    threads: int = 1,
    k: int = 5,
) -> ServeBench:
    """Runs the benchmark (see the module); ``work`` is emptied first.

    Raises:
        RuntimeError: A command failed or the server did not start.
    """
    import httpx

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus, index = work / "docs", work / "idx"
    shutil.copytree(docs, corpus)
    built = subprocess.run(
        _cli("index", str(corpus), "--index", str(index), "--no-progress"),
        env=env,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        raise RuntimeError(f"bridge-rag index failed:\n{built.stderr[-3000:]}")
    asked = paragraph_questions(corpus, questions)
    server, url = _start_server(index, work / "serve.log", env, threads)
    try:
        before = _served(url)
        library_p50, http_p50 = _timed_rounds(index, url, asked, k, rounds)
        files = sorted(p for p in corpus.rglob("*") if p.is_file())
        edited, deleted = files[0], files[-1]
        edited.write_text(edited.read_text(encoding="utf-8") + "\n\n" + _EDIT + "\n", encoding="utf-8")
        deleted.unlink()
        started = time.perf_counter()
        update_log = work / "update.log"
        with open(update_log, "wb") as sink:
            update = subprocess.Popen(
                _cli("index", str(corpus), "--index", str(index), "--update", "--no-progress"),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        ended: list[float] = []
        watcher = threading.Thread(target=_note_end, args=(update, ended))
        watcher.start()
        latencies, failures, during, load_s = _load(url, asked, k, requests, concurrency, update)
        watcher.join()
        update_s = ended[0] - started
        if update.returncode != 0:
            raise RuntimeError(
                f"bridge-rag index --update failed:\n{update_log.read_text(errors='replace')[-3000:]}"
            )
        deadline = time.monotonic() + _SWITCH_TIMEOUT_S
        edit_found = deleted_gone = False
        with httpx.Client(base_url=url, timeout=60) as client:
            while time.monotonic() < deadline and not (edit_found and deleted_gone):
                top = client.post("/retrieve", json={"query": _EDIT_QUESTION, "k": 1}).json()["results"]
                edit_found = bool(top) and "Quillmere" in top[0]["text"]
                gone = client.post(
                    "/retrieve", json={"query": asked[-1], "k": 5, "filter": {"source": deleted.name}}
                ).json()["results"]
                deleted_gone = not gone
                time.sleep(0.2)
        after = _served(url)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    for problem in failures[:5]:
        print(f"failed request: {problem}", file=sys.stderr)
    return ServeBench(
        chunks=before.get("chunks"),
        questions=len(asked),
        timed=len(asked) * rounds,
        library_p50_ms=library_p50,
        http_p50_ms=http_p50,
        load_requests=len(latencies),
        concurrency=concurrency,
        threads=threads,
        load_failures=len(failures),
        load_p50_ms=_percentile(latencies, 0.5),
        load_p95_ms=_percentile(latencies, 0.95),
        load_seconds=load_s,
        sent_during_update=during,
        update_seconds=update_s,
        generation_before=before.get("generation"),
        generation_after=after.get("generation"),
        edit_found=edit_found,
        deleted_gone=deleted_gone,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark from the command line; prints the figures (and writes ``--out``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=Path, required=True, help="the folder of files to index (copied)")
    parser.add_argument("--work", type=Path, required=True, help="a scratch directory (emptied first)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds (default 3)")
    parser.add_argument(
        "--requests", type=int, default=2000, help="requests during the update (default 2000)"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="the server's --threads (default 1)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    bench = run_serve_benchmark(
        args.docs,
        args.work,
        rounds=args.rounds,
        requests=args.requests,
        concurrency=args.concurrency,
        threads=args.threads,
    )
    print(bench.report())
    if args.out:
        args.out.write_text(json.dumps(asdict(bench), indent=2) + "\n", encoding="utf-8")
    return 0 if bench.load_failures == 0 and bench.edit_found and bench.deleted_gone else 1


if __name__ == "__main__":
    sys.exit(main())
