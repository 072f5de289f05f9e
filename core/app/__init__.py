"""The ``bridge-rag`` command-line application.

Everything only the command line uses lives here: argument parsing (:mod:`core.app.cli`),
reading a folder of files (:mod:`core.app.files`), the index directory's source record
(:mod:`core.app.sources`), building and updating an index (:mod:`core.app.indexing`),
answering questions (:mod:`core.app.querying`), the demo (:mod:`core.app.demo`) and
terminal-safe output (:mod:`core.app.terminal`). The library (strategies, stores, adapters)
never imports from this package.
"""
