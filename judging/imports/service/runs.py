"""Imports of runs: one system per tag, stubs for what the campaign lacks, its top k pooled.

The file is read a piece at a time (parse.stream_run): each block of rankings gets its stubs, is checked, and
goes into temporary tables (binary COPY on PostgreSQL) with the pool pairs it brings. Once the whole file is
read, each system's rankings are merged into the real table by one INSERT ... SELECT, or not at all when the
run is unchanged or refused: memory holds a block, never the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
from django.db import connection, transaction
from django.utils.translation import gettext as _

from judging.formats import SYSTEM_NAME_MAX_LENGTH
from judging.imports.behind import WriteBehind
from judging.imports.errors import FormatError, RunExists
from judging.imports.parse.stream import NotGrouped, ReadAhead, RunBlock, readable_apart, stream_run
from judging.imports.service.pool import pool_merge
from judging.imports.service.stubs import StubIds
from judging.imports.service.summary import ImportSummary, Progress, logged
from judging.imports.write import KeyChecks, Stage, columns_encode, encoded_insert
from judging.models import Campaign, Document, Pair, Query, Ranking, System

_RANKINGS = [("tag", "text"), ("query_id", "bigint"), ("doc_ids", "bytea"), ("scores", "bytea"), ("length", "integer")]
_POOL = [("tag", "text"), ("query_id", "bigint"), ("document_id", "bigint")]
# A new system's pool pairs are merged each time POOL_STEP are staged, the step growing by POOL_GROWTH each time:
# small steps let the parser overlap more of the database's work (the last step waits for it alone), but each
# merge inserts in a savepoint of its own, and past 64 of them in a transaction PostgreSQL looks up pg_subtrans
# to tell whether a row this transaction wrote is visible, slowing every later statement. The steps stay few:
# about 7 for a 2M-line run of depth-10 pools, 16 for 10M lines, 31 for 100M (pairs_insert adds one savepoint
# per PAIR_BATCH pairs within a step, as the single merge at the end did before).
POOL_STEP = 20_000
POOL_GROWTH = 1.15
# Where the database's work runs on a thread of its own (behind.WriteBehind): PostgreSQL works in a process of
# its own, which the thread keeps busy; SQLite works in this process, where the thread would only take turns.
WRITE_BEHIND = frozenset({"postgresql"})


def _fingerprint(digests: list[tuple[str, bytes]]) -> str:
    """A run's fingerprint from its rankings' digests (see _digest), whatever order the file gave them in."""
    h = hashlib.sha256(b"reljudge-run-2\0")
    for qid, digest in sorted(digests):
        h.update(qid.encode())
        h.update(b"\0")
        h.update(digest)
    return h.hexdigest()


def _digest(qid: str, doc_ids: bytes, scores: bytes) -> bytes:
    return hashlib.sha256(qid.encode() + b"\0" + doc_ids + scores).digest()


def _legacy_fingerprint(stage: Stage, tag: str) -> str:
    """The fingerprint as systems stored before runs were streamed (a hash of the rankings in qid order, as they
    were in memory), made from the staged rankings a batch at a time: an identical run imported again is still
    found unchanged."""
    h = hashlib.sha256()
    with connection.cursor() as cursor:
        collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
        cursor.execute(
            f"SELECT q.qid, s.doc_ids, s.scores FROM {stage.name} s JOIN judging_query q ON q.id = s.query_id "
            f"WHERE s.tag = %s ORDER BY q.qid{collate}",
            [tag],
        )
        while rows := cursor.fetchmany(2000):
            for qid, doc_ids, scores in rows:
                h.update(qid.encode())
                h.update(b"\0")
                h.update(bytes(doc_ids))
                h.update(bytes(scores))
    return h.hexdigest()


@logged
@transaction.atomic
def run_import(
    *,
    campaign: Campaign,
    data: bytes | BinaryIO,
    filename: str,
    system_name: str | None = None,
    replace: bool = False,
    progress: Progress = None,
) -> ImportSummary:
    """Import a run (one system, or one per tag), create stubs for unknown qids/docids, and pool its top k.

    Re-importing an identical run changes nothing. A different run for an existing system is refused
    unless ``replace`` is set, because scores and history would silently change.
    """
    if system_name and len(system_name) > SYSTEM_NAME_MAX_LENGTH:
        raise FormatError(
            _("system name too long: %(length)s characters (at most %(limit)s)")
            % {"length": f"{len(system_name):,}", "limit": SYSTEM_NAME_MAX_LENGTH},
            filename=filename,
            field="system",
        )
    try:
        with transaction.atomic():  # a savepoint: a file whose rankings are not together is read again, whole
            blocks = stream_run(data, filename=filename)
            if not readable_apart(data):
                return _run_write(campaign, blocks, filename, system_name, replace, progress)
            with ReadAhead(blocks) as ahead:
                return _run_write(campaign, ahead, filename, system_name, replace, progress)
    except NotGrouped:
        pass
    blocks = stream_run(data, filename=filename, whole=True)
    return _run_write(campaign, blocks, filename, system_name, replace, progress)


def _run_write(
    campaign: Campaign,
    blocks: Iterator[RunBlock],
    filename: str,
    system_name: str | None,
    replace: bool,
    progress: Progress,
) -> ImportSummary:
    """The writes of run_import, a block of rankings at a time (:class:`_RunBlocks`), then each tag's system made,
    kept, refused or replaced as the whole file decides (_system_merge)."""
    summary = ImportSummary(kind="rankings", filename=filename)
    # The database's work goes to a thread of its own: the server works on one block while this thread prepares
    # the next (see WRITE_BEHIND).
    writer = WriteBehind(inline=connection.vendor not in WRITE_BEHIND)
    with (
        Stage("reljudge_run_rankings", _RANKINGS) as rankings,
        Stage("reljudge_run_pool", _POOL) as pool,
        Stage("reljudge_run_pool_block", _POOL) as block_pool,
    ):
        run = _RunBlocks(campaign, writer, system_name, summary, progress, rankings, pool, block_pool)
        with writer:
            for block in blocks:
                run.block(block)
            run.finish()
        # Leaving ``writer`` waited for its work (or raised its error): from here on this thread writes alone.
        summary.stub_queries, summary.stub_documents = run.ids.new_queries, run.ids.new_documents
        if system_name and len(run.digests) > 1:
            raise FormatError(
                _(
                    "the file holds %(n)s runs (tags %(tags)s); import them without --system "
                    "to create one system per tag, or split the file"
                )
                % {"n": len(run.digests), "tags": ", ".join(sorted(run.digests))},
                filename=filename,
                field="tag",
            )
        rankings.prepare("tag")
        pool.prepare("tag")
        for tag in sorted(run.digests):
            _system_merge(
                campaign,
                tag,
                system_name or tag,
                run.digests[tag],
                run.entries[tag],
                rankings,
                None if run.new_system[tag] else pool,
                replace,
                summary,
                run.started.get(tag),
            )
    return summary


class _RunBlocks:
    """A run file's blocks of rankings on their way to the database, queued on ``writer``'s thread.

    Systems new to the campaign get their rankings straight into their table and their pool pairs a block at a
    time, while the file is still being read (the next piece is parsed meanwhile, see ReadAhead): such a run is
    added whatever the rest of the file holds, or the transaction fails whole. The rankings and pairs of a system
    that exists wait in the stages for the decision (unchanged, refused or replaced) the whole file makes."""

    def __init__(
        self,
        campaign: Campaign,
        writer: WriteBehind,
        system_name: str | None,
        summary: ImportSummary,
        progress: Progress,
        rankings: Stage,
        pool: Stage,
        block_pool: Stage,
    ) -> None:
        self.campaign, self.writer, self.system_name = campaign, writer, system_name
        self.summary, self.progress = summary, progress
        self.rankings, self.pool, self.block_pool = rankings, pool, block_pool
        self.ids = StubIds(campaign, writer)
        self.depth = campaign.pool_depth
        self.digests: dict[str, list[tuple[str, bytes]]] = {}
        self.entries: dict[str, int] = {}
        self.new_system: dict[str, bool] = {}
        self.started: dict[str, int] = {}  # tag -> its new system's id, made at the tag's first ranking
        self.checks = KeyChecks([Document, Query, Pair])
        self.step = POOL_STEP
        self.staged = 0  # new systems' pool pairs queued since the last pool step

    def block(self, block: RunBlock) -> None:
        """Queue one block's rankings and pool pairs; merge the new systems' pool pairs every few blocks."""
        writer = self.writer
        codes = self.ids.documents(block.docids)
        block.duplicates_check(codes)
        queries = self.ids.queries(block.qids)
        ordered = codes[block.order]
        lengths = np.diff(block.stops, prepend=0)
        starts = block.stops - lengths
        bounds = list(zip(starts.tolist(), block.stops.tolist(), strict=True))
        doc_bytes = [ordered[a:b].tobytes() for a, b in bounds]
        score_bytes = [block.scores[a:b].tobytes() for a, b in bounds]
        self._systems_of(block, doc_bytes, score_bytes)
        self._rankings_write(block, queries, doc_bytes, score_bytes, lengths)
        # The pool: each ranking's top ``depth`` documents.
        position = np.arange(len(ordered)) - np.repeat(starts, lengths)
        early = np.array([self.new_system[tag] for tag in block.tags], dtype=bool)
        for now, stage in ((True, self.block_pool), (False, self.pool)):
            top = (position < self.depth) & np.repeat(early == now, lengths)
            if not top.any():
                continue
            rows = stage.encode(
                [
                    np.repeat(np.array(block.tags, dtype=object), lengths)[top].tolist(),
                    np.repeat(queries, lengths)[top],
                    ordered[top],
                ],
                int(top.sum()),
            )
            writer.later(stage.write, rows, size=rows.size)
            self.staged += rows.count if now else 0
        if self.staged >= self.step:
            writer.later(_pool_step, self.campaign, self.block_pool, self.checks, self.summary)
            self.staged, self.step = 0, int(self.step * POOL_GROWTH)
        if self.progress:
            writer.later(self.progress, block.lines or len(ordered))  # once the block's rows are written

    def _systems_of(self, block: RunBlock, doc_bytes: list[bytes], score_bytes: list[bytes]) -> None:
        """Each ranking's digest and length under its tag; a tag seen first starts its system if it is new."""
        for tag, qid, d, s in zip(block.tags, block.qids, doc_bytes, score_bytes, strict=True):
            self.digests.setdefault(tag, []).append((qid, _digest(qid, d, s)))
            self.entries[tag] = self.entries.get(tag, 0) + len(d) // 8
            if tag not in self.new_system:
                name = self.system_name or tag
                self.new_system[tag] = not self.writer.now(_system_exists, self.campaign, name)
                if self.new_system[tag]:
                    self.started[tag] = self.writer.now(_system_start, self.campaign, name)

    def _rankings_write(
        self,
        block: RunBlock,
        queries: np.ndarray,
        doc_bytes: list[bytes],
        score_bytes: list[bytes],
        lengths: np.ndarray,
    ) -> None:
        """A new system's rankings go straight into its table; the others' wait in the stage for the decision the
        whole file makes."""
        direct = np.fromiter((tag in self.started for tag in block.tags), dtype=bool, count=len(block))
        for chosen, table in ((np.flatnonzero(direct), True), (np.flatnonzero(~direct), False)):
            if not chosen.size:
                continue
            whole = len(chosen) == len(block)
            tags = [block.tags[i] for i in chosen.tolist()]
            owners: list[Any] = [self.started[t] for t in tags] if table else tags  # system ids, or run tags
            columns = [
                owners,
                queries if whole else queries[chosen],
                doc_bytes if whole else [doc_bytes[i] for i in chosen.tolist()],
                score_bytes if whole else [score_bytes[i] for i in chosen.tolist()],
                lengths if whole else lengths[chosen],
            ]
            if table:
                rows = columns_encode(Ranking, ["system", "query", "doc_ids", "scores", "length"], columns)
                self.writer.later(encoded_insert, rows, size=rows.size)
            else:
                staged = self.rankings.encode(columns, len(chosen))
                self.writer.later(self.rankings.write, staged, size=staged.size)

    def finish(self) -> None:
        """Merge the new systems' pool pairs staged since the last step."""
        if self.staged:
            self.writer.later(_pool_step, self.campaign, self.block_pool, self.checks, self.summary)


def _pool_step(campaign: Campaign, stage: Stage, checks: KeyChecks, summary: ImportSummary) -> None:
    """Merge the pool pairs staged so far (new systems') and run their foreign-key checks (on the writer's
    thread)."""
    summary.pairs_added += pool_merge(campaign=campaign, stage=stage)
    stage.clear()
    checks.run()


def _system_exists(campaign: Campaign, name: str) -> bool:
    return System.objects.filter(campaign=campaign, name=name).exists()


def _system_start(campaign: Campaign, name: str) -> int:
    """A new system's row, made when its first ranking is read (its fingerprint once the file is): its rankings
    go straight into judging_ranking instead of through the stage (the transaction undoes both on any error)."""
    return int(System.objects.create(campaign=campaign, name=name).pk)


def _system_merge(
    campaign: Campaign,
    tag: str,
    name: str,
    digests: list[tuple[str, bytes]],
    entries: int,
    rankings: Stage,
    pool: Stage | None,
    replace: bool,
    summary: ImportSummary,
    started: int | None = None,
) -> None:
    """One tag's staged rankings into its system: unchanged, refused, replaced or new; and its pool pairs
    (``pool`` None: already merged, the system being new). ``started``: the id of the new system made while the
    file was read, its rankings and pool already written."""
    fingerprint = _fingerprint(digests)
    if started is not None:
        System.objects.filter(pk=started).update(
            source=summary.filename[:255], fingerprint=fingerprint, entries=entries
        )
        summary.added += len(digests)
        summary.systems.append(name)
        return
    system = System.objects.filter(campaign=campaign, name=name).first()
    if system is not None:
        same = system.fingerprint == fingerprint or system.fingerprint == _legacy_fingerprint(rankings, tag)
        if same:
            summary.unchanged += len(digests)
            summary.systems.append(f"{name} (unchanged)")
            return
        if not replace:
            raise RunExists(
                _("system %(system)s already has a different run in campaign %(campaign)s")
                % {"system": repr(name), "campaign": repr(campaign.slug)},
                filename=summary.filename,
            )
        system.rankings.all().delete()
        summary.updated += len(digests)
    else:
        system = System(campaign=campaign, name=name)
        summary.added += len(digests)
    system.source = summary.filename[:255]
    system.fingerprint = fingerprint
    system.entries = entries
    system.save()
    table = connection.ops.quote_name(Ranking._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (system_id, query_id, doc_ids, scores, length) "
            f"SELECT %s, query_id, doc_ids, scores, length FROM {rankings.name} WHERE tag = %s ORDER BY query_id",
            [system.pk, tag],
        )
    summary.systems.append(name)
    if pool is not None:
        summary.pairs_added += pool_merge(campaign=campaign, stage=pool, where="s.tag = %s", params=[tag])
