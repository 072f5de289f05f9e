"""A process that saves a strategy's index over and over, for the SIGKILL crash-safety test.

``python -m tests.reliability.crash_writer STRATEGY DIR DOCS`` builds STRATEGY over DOCS
synthetic documents (fake embedder, in-memory Chroma), saves it to DIR, prints ``ready``,
then deletes the documents one by one in order; every delete saves a new generation
(autosave) and prints how many documents are gone once that save has completed. The test
kills it with SIGKILL at a random moment and checks that DIR still loads, intact.
"""

from __future__ import annotations

import sys

from core.store import ChunkStore
from tests.reliability.cases import case_named, synthetic_documents, wiring_embedder


def main(argv: list[str]) -> int:
    """Runs the writer; returns when every document has been deleted."""
    name, directory, n = argv[0], argv[1], int(argv[2])
    case = case_named(name)
    docs = synthetic_documents(n)
    strategy = case.build(
        docs,
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(f"crash-{name}"),
        **case.wiring_kwargs(),
    )
    strategy.save(directory)
    print("ready", flush=True)
    for i, doc in enumerate(docs):
        strategy.delete_documents([doc.id])
        print(i + 1, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
