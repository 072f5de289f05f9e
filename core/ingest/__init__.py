"""Ingestion outside the build: per-chunk results handed over in metadata, and a Ray Data pipeline.

- :mod:`core.ingest.precomputed`: the documented, versioned metadata key under which a chunk
  carries its entities, so a build runs no NER for it.
- :mod:`core.ingest.ray_data`: reads, chunks, embeds and extracts across a Ray cluster, writes
  to a Chroma server, and builds the index over it (the ``distributed`` extra).
"""
