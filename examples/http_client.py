"""Ask a running ``bridge-rag serve`` over HTTP with httpx, and print what it found.

    bridge-rag index my-notes --index my-index
    bridge-rag serve my-index                      # in another shell: http://127.0.0.1:8000
    python examples/http_client.py "Who founded the Halden Institute?"
    python examples/http_client.py "Who founded it?" -k 3 --filter '{"source": "halden.md"}'
    python examples/http_client.py "Who founded it?" --url http://127.0.0.1:8080

``POST /retrieve`` takes ``{"query": str, "k": int, "filter": object | null}`` and answers
``{"query", "strategy", "k", "results": [{"id", "score", "text", "metadata"}]}``, the document
``bridge-rag query --json`` prints; a bad request gets a 4xx answer whose ``detail`` says what
to send instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

import httpx


def retrieve(
    url: str, query: str, *, k: int = 5, where: dict[str, Any] | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """The server's answer to one question.

    Raises:
        httpx.HTTPStatusError: The server refused the request (its ``detail`` says why).
        httpx.TransportError: No server answers at ``url``.
    """
    with httpx.Client(base_url=url, timeout=timeout) as client:
        response = client.post("/retrieve", json={"query": query, "k": k, "filter": where})
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("question")
    parser.add_argument("-k", type=int, default=5, help="results (default 5)")
    parser.add_argument("--filter", help='a Chroma where-filter as JSON, e.g. \'{"source": "halden.md"}\'')
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)")
    args = parser.parse_args()
    where = json.loads(args.filter) if args.filter else None
    try:
        answer = retrieve(args.url, args.question, k=args.k, where=where)
    except httpx.HTTPStatusError as exc:
        detail = exc.response.json().get("detail", exc.response.text)
        print(f"the server refused the request ({exc.response.status_code}): {detail}", file=sys.stderr)
        return 1
    except httpx.TransportError as exc:
        print(
            f"no server answers at {args.url} ({exc}); start one with `bridge-rag serve DIR`", file=sys.stderr
        )
        return 1
    results = answer["results"]
    print(f"{len(results)} results from {answer['strategy']} for {answer['query']!r}")
    for rank, result in enumerate(results, start=1):
        meta = result["metadata"]
        print(f"\n{rank}. [{result['score']:.3f}] {meta.get('source', result['id'])}")
        if meta.get("found_by"):
            print(f"   found by: {meta['found_by']}")
        text = " ".join(result["text"].split())
        print(textwrap.indent(textwrap.fill(textwrap.shorten(text, 300), 96), "   "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
