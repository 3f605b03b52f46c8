"""Imports of topics, documents, runs, qrels and online figures, as a pipeline of three parts.

- ``parse``: the files into plain records (pure functions, ``FormatError(file, line, field)``, no ORM);
- ``write``: rows into the database, one module per engine (``write_postgres`` streams COPY,
  ``write_sqlite`` stages rows in a temporary table), both behind ``write``;
- ``service``: the public importers (``run_import``, ``qrels_import``, ...), one transaction each, which
  judging.services re-exports for views, the API, jobs and commands.

``errors`` holds what every interface catches (``ImportRefused`` and its kinds).
"""
