"""Parse the files a campaign imports into plain records: pure functions, no ORM, no database.

Every parser takes the file's bytes and its name and raises ``FormatError(file, line, field)`` on the
first bad value; nothing here writes. The modules: ``text`` (decoding and the checks of one field),
``jsonl`` (JSON Lines), ``records`` (topics, documents, query tags), ``trec`` (runs, qrels), ``online``.
"""

from judging.imports.errors import FormatError, ImportRefused
from judging.imports.parse.online import ONLINE_COLUMNS, OnlineFigure, parse_online
from judging.imports.parse.records import (
    Doc,
    Topic,
    iter_docs,
    iter_topics,
    parse_docs,
    parse_query_tags,
    parse_topics,
    tag_list,
)
from judging.imports.parse.text import decode_lines, numbered_lines, read_whole
from judging.imports.parse.trec import Qrel, parse_qrels, parse_qrels_columns, parse_run

__all__ = [
    "ONLINE_COLUMNS",
    "Doc",
    "FormatError",
    "ImportRefused",
    "OnlineFigure",
    "Qrel",
    "Topic",
    "decode_lines",
    "iter_docs",
    "iter_topics",
    "numbered_lines",
    "parse_docs",
    "parse_online",
    "parse_qrels",
    "parse_qrels_columns",
    "parse_query_tags",
    "parse_run",
    "parse_topics",
    "read_whole",
    "tag_list",
]
