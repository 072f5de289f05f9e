"""A writer process that keeps adding and deleting documents in a saved index, for the churn test.

``python -m tests.reliability.churn_writer STRATEGY DIR ROUNDS`` loads the index saved in DIR
(fake embedder), prints ``ready``, then ROUNDS times adds two documents and deletes one of
them (each change saves a new generation), printing the round number after each.
"""

from __future__ import annotations

import sys

from tests.reliability.cases import case_named, synthetic_documents, wiring_embedder


def main(argv: list[str]) -> int:
    """Runs the writer."""
    name, directory, rounds = argv[0], argv[1], int(argv[2])
    case = case_named(name)
    rag = case.load(directory, embedder=wiring_embedder(), refresh_interval=None, **case.wiring_kwargs())
    print("ready", flush=True)
    for i in range(rounds):
        ids = rag.add_documents(synthetic_documents(2, prefix=f"churn{i}", seed=i))
        rag.delete_documents(ids[:1])
        print(i + 1, flush=True)
    rag.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
