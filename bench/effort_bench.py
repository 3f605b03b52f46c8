"""Judging-effort simulator: how much of the pool each queue mode needs before the system ranking is right.

Input: TREC qrels and runs (and optionally topics), or a generated collection (bench/synthetic.py: ``--preset
realistic``, the default, shaped like a TREC ad-hoc track, or ``--preset easy``; ``--generate`` changes its
sizes). For each queue mode it builds a campaign (pool depth, grades, mode; ``audit`` draws every query), serves
the app through scripts/serve.sh on a port of its own, and lets N simulated annotators judge through the REST API
(GET /api/campaigns/SLUG/next/, then POST /api/judgments/) with the qrels' label (an unjudged document is 0),
optionally passed through a confusion matrix, until the pool is done. Every ``--step`` % of the pool it records,
against the ranking the whole pool gives (computed here from the labels with metrics/, nDCG@k as the
leaderboard ranks):

- Kendall's tau and tau_AP (Yilmaz, Aslam & Robertson, SIGIR 2008) of the system ranking;
- whether the top system and the top-3 set are right;
- the leaderboard's adjacent verdicts (``settled``, and ``likely`` where the JSON has ``verdict``/``p_holds``),
  each checked at the end: an order called settled or likely that the whole pool reverses is wrong.

With ``--model-confusion`` (a preset of bench/synthetic.py ``CONFUSIONS`` such as ``llm-0.4``/``llm-0.5``, drawn from
the confusion matrices of two LLMJudge challenge submissions, or a file of P(model grade | human grade), one row per
human grade) a simulated model judge answers every pooled pair before anyone judges (one answer per pair, drawn
from its true grade's row; the same answers in every mode), ``hybrid`` joins the modes, and at each checkpoint the
hybrid leaderboard (``labels=hybrid:sim``: people's labels, elsewhere the model's calibrated expectation) is read
too: the table gains its tau, its wrong ``settled`` and ``likely`` orders, whether its stop came with the wrong
top k, and the model's own tau (its labels alone).

Two reference orders, not queue modes, are judged offline (no server; ``--only-reference`` or ``--modes none``
runs them alone, in seconds) at the same checkpoints: ``relevant-first`` (an oracle: the pairs of true grade above
0 first, higher grades first, ties in a seeded random order) and ``rank-sum`` (by the sum over the systems of
their rank discount 1/log2(rank + 1) within the pool depth), a pair not judged yet counting as not relevant, as on
the people-only leaderboard; the table gives them as rows marked ``*`` and the ratio of the best people-only
mode's share for tau >= 0.9 to relevant-first's. At every checkpoint the leaderboard's ``stop``
(``reached``, ``judgments_left_estimate``; the hybrid leaderboard's too) is recorded: a second table gives, per
mode, the checkpoint at which the stop first said reached and, at each checkpoint before it with an estimate,
(the judgments it actually took) / the estimate: their median and the share within a factor 1.5.

It prints how hard the collection is (bench/synthetic.py ``Stats``: the adjacent nDCG@k gaps of the final
ranking, the relevant share of the pool, pairs and relevant pairs per query), then a table (per mode: the share
of the pool from which tau >= 0.9, tau_AP >= 0.9, the top 1 and the top-3 set stay right; wrong verdicts; 5xx
answers; next-pair latency) and writes an SVG of tau against the share judged, one line per mode.

    python bench/effort_bench.py --port 9060                       # the realistic preset, every mode
    python bench/effort_bench.py --only-reference                  # the reference orders only, in seconds
    python bench/effort_bench.py --preset easy --generate systems=20,queries=50,depth=20
    python bench/effort_bench.py --model-confusion llm-0.4 --modes shuffled,mtc,hybrid --step 2.5
    python bench/effort_bench.py --qrels q.txt --runs runs/ --topics topics.tsv --pool-depth 10 \\
        --modes shuffled,matter,mtc,bandit --annotators 4 --confusion "0.9,0.1,0;0.1,0.8,0.1;0,0.2,0.8"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME python bench/effort_bench.py ... --port 9060

Files that do not agree (a label off the scale, a run's query missing from the topics, one system in two
files) are refused with the file, line and field. The database is a SQLite file under ``--out`` unless
DATABASE_URL names one (its campaigns named ``effort-*`` are replaced).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import metrics  # noqa: E402
from bench import synthetic  # noqa: E402
from bench._setup import machine_line  # noqa: E402
from metrics.calibration import tau_ap  # noqa: E402

# every mode that people judge in (a campaign without a model judge: "doubtful" orders the pairs by how much
# their label weighs on nDCG@10; "audit" judges every query, drawn in a random order)
MODES = ("shuffled", "matter", "mtc", "bandit", "audit", "doubtful")
MODEL = "sim"  # the simulated model judge's name in each campaign (--model-confusion)
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")


class InputError(Exception):
    """A file that cannot be used, named by file, line and field."""


# --------------------------------------------------------------------------- reading and checking the files


@dataclass
class Collection:
    systems: list[str]  # run tags, sorted
    qids: list[str]  # every query of the runs, sorted
    rankings: dict[str, dict[str, list[str]]]  # tag -> qid -> docids in trec_eval order
    qrels: dict[tuple[str, str], int]
    topics: dict[str, tuple[str, str]]  # qid -> (text, description)
    run_bytes: dict[str, tuple[str, bytes]]  # tag -> (file name, content)
    topics_bytes: bytes | None
    grades: list[int]


def _where(path: Path, line: int | None, fieldname: str | None, message: str) -> InputError:
    text = str(path)
    if line is not None:
        text += f", line {line}"
    if fieldname is not None:
        text += f", field '{fieldname}'"
    return InputError(f"{text}: {message}")


def _line_of(text: str, wanted: tuple[str, ...], columns: tuple[int, ...]) -> int | None:
    for n, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if len(parts) > max(columns) and tuple(parts[c] for c in columns) == wanted:
            return n
    return None


def read_collection(
    qrels_path: Path, run_paths: list[Path], topics_path: Path | None, grades: list[int] | None
) -> Collection:
    """Parse and cross-check the files with the app's own parsers (judging.imports.parse)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")
    import django

    django.setup()
    from judging.imports.parse import FormatError, parse_qrels, parse_run, parse_topics

    if not run_paths:
        raise InputError("--runs: no run files given")
    rankings: dict[str, dict[str, list[str]]] = {}
    run_bytes: dict[str, tuple[str, bytes]] = {}
    for path in run_paths:
        data = path.read_bytes()
        try:
            parsed = parse_run(data, filename=str(path))
        except FormatError as exc:
            raise InputError(str(exc)) from None
        for tag, lists in parsed.items():
            if tag in rankings:
                raise _where(path, None, "tag", f"system {tag!r} is already in {run_bytes[tag][0]}")
            rankings[tag] = {r.qid: list(r.docids) for r in lists}
            run_bytes[tag] = (str(path), data)
        if len(parsed) > 1:
            raise _where(path, None, "tag", f"one system per run file, found {len(parsed)}: {', '.join(parsed)}")
    try:
        qrel_rows = parse_qrels(qrels_path.read_bytes(), filename=str(qrels_path))
    except FormatError as exc:
        raise InputError(str(exc)) from None
    qrels_text = qrels_path.read_text(errors="replace")
    labels = {(q.qid, q.docid): q.label for q in qrel_rows}
    top = max(labels.values(), default=1)
    scale = grades if grades is not None else list(range(0, max(top, 1) + 1))
    for q in qrel_rows:
        if q.label not in scale and not (q.label < 0 and 0 in scale):
            line = _line_of(qrels_text, (q.qid, q.docid), (0, 2))
            raise _where(qrels_path, line, "label", f"grade {q.label} is not on the scale {','.join(map(str, scale))}")
    qids = sorted({qid for r in rankings.values() for qid in r})
    if not {q for q, _ in labels} & set(qids):
        raise _where(qrels_path, None, "qid", "no query of the qrels is in the runs")
    topics: dict[str, tuple[str, str]] = {}
    topics_bytes = None
    if topics_path is not None:
        topics_bytes = topics_path.read_bytes()
        try:
            topics = {t.qid: (t.text, t.description) for t in parse_topics(topics_bytes, filename=str(topics_path))}
        except FormatError as exc:
            raise InputError(str(exc)) from None
        for tag, per_query in rankings.items():
            missing = sorted(set(per_query) - set(topics))
            if missing:
                path = Path(run_bytes[tag][0])
                text = path.read_text(errors="replace")
                line = next(
                    (n for n, ln in enumerate(text.splitlines(), 1) if ln.split()[:1] == [missing[0]]),
                    None,
                )
                raise _where(path, line, "qid", f"query {missing[0]!r} is not in {topics_path}")
    return Collection(
        sorted(rankings), qids, rankings, labels, topics, run_bytes, topics_bytes, sorted(set(scale) | {0})
    )


def parse_confusion(raw: str | None, grades: list[int]) -> np.ndarray | None:
    """ "0.9,0.1,0;0.1,0.8,0.1;..." -> rows (true grade) x columns (grade given), each row summing to 1."""
    if not raw:
        return None
    try:
        rows = [[float(x) for x in row.split(",")] for row in raw.split(";")]
    except ValueError:
        raise InputError(f"--confusion: numbers separated by ',' and rows by ';', not {raw!r}") from None
    matrix = np.array(rows, dtype=float) if len({len(r) for r in rows}) == 1 else None
    if matrix is None or matrix.shape != (len(grades), len(grades)):
        raise InputError(f"--confusion: expected {len(grades)} rows of {len(grades)} numbers (grades {grades})")
    if (matrix < 0).any() or not np.allclose(matrix.sum(axis=1), 1.0):
        raise InputError("--confusion: each row holds probabilities summing to 1")
    return matrix


def model_labels(
    coll: Collection, keys: list[tuple[str, str]], confusion: np.ndarray, seed: int
) -> dict[tuple[str, str], int]:
    """A simulated model judge's one answer for each pooled pair: a grade drawn from the row of ``confusion``
    (P(model grade | human grade)) at the pair's true grade (an unjudged document's is the lowest)."""
    rng = np.random.default_rng([seed, 7919])
    index = {g: i for i, g in enumerate(coll.grades)}
    true = np.array([index.get(max(coll.qrels.get(key, 0), 0), 0) for key in keys], dtype=np.int64)
    cumulative = np.cumsum(confusion, axis=1)
    drawn = (rng.random(len(keys))[:, None] > cumulative[true]).sum(axis=1)
    drawn = np.minimum(drawn, len(coll.grades) - 1)
    return {key: coll.grades[int(g)] for key, g in zip(keys, drawn, strict=True)}


# --------------------------------------------------------------------------- a generated collection


def generate(preset: str, spec: str, seed: int) -> synthetic.Collection:
    """The collection of ``preset`` (bench/synthetic.py), its sizes from ``spec``
    (``systems=N,queries=N,depth=N[,docs=N,seed=N]``, each optional)."""
    try:
        return synthetic.generate(preset, **synthetic.parse_spec(spec, seed=seed))
    except synthetic.SpecError as exc:
        raise InputError(f"--generate: {exc}") from None


# --------------------------------------------------------------------------- scoring here (metrics/)


class Scorer:
    """The pool's (query, document) keys and every system's ranked keys, scored with metrics.ndcg."""

    def __init__(self, coll: Collection, pool_depth: int, k: int) -> None:
        self.k = k
        depth = max(k, pool_depth)
        pool: dict[tuple[str, str], int] = {}
        for tag in coll.systems:
            for qid, docids in coll.rankings[tag].items():
                for docid in docids[:pool_depth]:
                    pool.setdefault((qid, docid), len(pool))
        self.pool = pool
        self.keys = list(pool)
        q_index = {qid: i for i, qid in enumerate(coll.qids)}
        self.index = np.full((len(coll.systems), len(coll.qids), depth), -2, dtype=np.int64)  # -2: PAD
        for s, tag in enumerate(coll.systems):
            for qid, docids in coll.rankings[tag].items():
                row = [pool.get((qid, d), -1) for d in docids[:depth]]
                self.index[s, q_index[qid], : len(row)] = row
        key_q = np.array([q_index[q] for q, _ in self.keys], dtype=np.int64)
        order = np.argsort(key_q, kind="stable")
        counts = np.bincount(key_q, minlength=len(coll.qids))
        starts = np.cumsum(counts) - counts
        self.slot = np.empty(len(self.keys), dtype=np.int64)
        self.slot[order] = np.arange(len(self.keys)) - starts[key_q[order]]
        self.key_q = key_q
        self.width = max(int(counts.max()) if counts.size else 1, 1)
        self.n_q = len(coll.qids)

    def stats(self, qrels: dict[tuple[str, str], int]) -> synthetic.Stats:
        """How hard the collection is (bench/synthetic.py ``stats_of``) once every pooled pair has its qrels
        label (an unjudged one 0, as the simulated annotators answer)."""
        grade = np.array([max(qrels.get(key, 0), 0) for key in self.keys], dtype=np.int64)
        vec = np.append(grade, 0).astype(np.int8)
        grid = np.where(self.index >= 0, vec[np.maximum(self.index, 0)], np.where(self.index == -1, -1, -2))
        return synthetic.stats_of(grid.astype(np.int8), self.key_q, grade, k=self.k)

    def scores(self, labels: dict[tuple[str, str], int]) -> np.ndarray:
        """(S,) mean nDCG@k over the queries with a label (the leaderboard's means), unjudged = not relevant."""
        vec = np.full(len(self.keys), metrics.UNJUDGED, dtype=np.int8)
        for key, grade in labels.items():
            at = self.pool.get(key)
            if at is not None:
                vec[at] = grade
        return self.scores_of(vec)

    def scores_of(self, vec: np.ndarray) -> np.ndarray:
        """(S,) as ``scores`` from the (P,) labels of the pooled pairs in pool order (``metrics.UNJUDGED``: not
        judged yet). As the people-only leaderboard (judging.scoring.cache): an unjudged pair counts as not
        relevant in the DCG and is left out of the ideal DCG; a query without a label is left out of the mean."""
        vec = np.append(np.asarray(vec, dtype=np.int8), np.int8(metrics.UNJUDGED))
        grid = np.where(self.index >= 0, vec[np.maximum(self.index, 0)], np.where(self.index == -1, -1, -2))
        grid = grid.astype(np.int8)
        qrels = np.full((self.n_q, self.width), metrics.UNJUDGED, dtype=np.int8)
        qrels[self.key_q, self.slot] = vec[:-1]
        per_query = metrics.ndcg(grid, qrels, k=self.k)
        labelled = (qrels >= 0).any(axis=1)
        if not labelled.any():
            return np.zeros(per_query.shape[0])
        result: np.ndarray = per_query[:, labelled].mean(axis=1)
        return result


# --------------------------------------------------------------------------- the app


def build_campaign(
    coll: Collection,
    *,
    slug: str,
    mode: str,
    pool_depth: int,
    n_annotators: int,
    seed: int,
    model: dict[tuple[str, str], int] | None = None,
) -> dict[str, str]:
    """A campaign with the runs (and topics), its lead and annotators, through the services; their tokens. In
    mode ``audit`` every query is drawn (in a random order fixed by ``seed``): the mode serves drawn queries only.
    ``model``: the simulated model judge's answers, imported as the labels of a model judge named MODEL."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from judging.models import Campaign
    from judging.services import (
        audit_draw,
        campaign_create,
        campaign_settings_update,
        membership_add,
        qrels_import,
        queries_import,
        run_import,
        scale_from_values,
    )
    from judging.services.model_judge import model_judge_get_or_create

    Campaign.objects.filter(slug=slug).delete()
    campaign = campaign_create(slug=slug, pool_depth=pool_depth, scale=scale_from_values(coll.grades))
    if coll.topics_bytes is not None:
        queries_import(campaign=campaign, data=coll.topics_bytes, filename="topics.tsv")
    for name, data in coll.run_bytes.values():
        run_import(campaign=campaign, data=data, filename=Path(name).name)
    if model is not None:
        judge = model_judge_get_or_create(name=MODEL, campaign=campaign)
        lines = "".join(f"{qid} 0 {docid} {grade}\n" for (qid, docid), grade in model.items())
        qrels_import(campaign=campaign, data=lines.encode(), filename=f"{MODEL}.qrels", annotator=judge)
    campaign_settings_update(campaign=campaign, queue_mode=mode)
    if mode == Campaign.QueueMode.AUDIT:
        audit_draw(campaign=campaign, size=campaign.queries.count(), user=None, seed=seed)
    users = {"lead": "lead", **{f"a{i}": "annotator" for i in range(n_annotators)}}
    tokens = {}
    for name, role in users.items():
        user = get_user_model().objects.filter(username=f"effort-{name}").first()
        if user is None:
            user = get_user_model().objects.create_user(username=f"effort-{name}", password=None)
        membership_add(campaign=campaign, user=user, role=role)
        tokens[name] = Token.objects.get_or_create(user=user)[0].key
    return tokens


def serve(port: int, database_url: str, log: Path, workers: int, threads: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "WEB_CONCURRENCY": str(workers),
        "GUNICORN_THREADS": str(threads),
        "RELJUDGE_TASK_WORKERS": "0",
        "RELJUDGE_MODEL_WORKERS": "0",
        "RELJUDGE_ALLOW_DEV_SECRET": "1",
        "GUNICORN_ACCESS_LOG": str(log.with_suffix(".access.log")),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    handle = open(log, "ab")  # noqa: SIM115 - the server's log, open while it runs
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "serve.sh")],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"scripts/serve.sh stopped:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(base + "/healthz", timeout=10).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"the app did not answer on {base} within 120 s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


# --------------------------------------------------------------------------- one mode


@dataclass
class Checkpoint:
    judged: int
    share: float
    labels: dict[tuple[str, str], int]
    claims: list[tuple[str, str, str, float | None]]  # (above, below, verdict, p_holds)
    hybrid: dict[str, float] | None = None  # the hybrid leaderboard's nDCG@k per system (--model-confusion)
    hybrid_claims: list[tuple[str, str, str, float | None]] = field(default_factory=list)
    hybrid_stop: list[str] | None = None  # its top k (in order) when its stop says the lead may stop
    # the leaderboard JSON's stop ({"reached", "judgments_left_estimate", ...}): people's, then the hybrid one's;
    # None where the answer had none
    stop_reached: bool | None = None
    stop_left: int | None = None
    hybrid_reached: bool | None = None
    hybrid_left: int | None = None


@dataclass
class ModeRun:
    mode: str
    pool: int
    checkpoints: list[Checkpoint] = field(default_factory=list)
    labels: dict[tuple[str, str], int] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    transport_errors: int = 0
    next_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0


def verdict_claims(board: dict) -> list[tuple[str, str, str, float | None]]:
    """The adjacent orders the leaderboard JSON calls ``settled`` or ``likely``: from ``verdict`` (and
    ``p_holds``) where the JSON has them, else from the boolean ``settled``."""
    out = []
    for key in ("settled", "adjacent", "comparisons"):
        entries = board.get(key)
        if isinstance(entries, list):
            break
    else:
        return out
    for entry in entries:
        if not isinstance(entry, dict) or len(entry.get("systems", [])) != 2:
            continue
        verdict = entry.get("verdict")
        if verdict is None:
            verdict = "settled" if entry.get("settled") is True else "open"
        if verdict in ("settled", "likely"):
            a, b = entry["systems"]
            out.append((a, b, verdict, entry.get("p_holds")))
    return out


def stop_fields(board: dict) -> tuple[bool | None, int | None]:
    """(reached, judgments_left_estimate) of the leaderboard JSON's ``stop`` object; None for what it lacks."""
    stop = board.get("stop")
    if not isinstance(stop, dict):
        return None, None
    reached = stop.get("reached")
    left = stop.get("judgments_left_estimate")
    return (
        bool(reached) if isinstance(reached, bool) else None,
        int(left) if isinstance(left, int | float) and not isinstance(left, bool) and math.isfinite(left) else None,
    )


def thresholds(pool: int, step: float) -> list[int]:
    """The judgment counts at which a mode's figures are recorded: every ``step`` % of the pool, the last at the
    whole pool."""
    got = [math.ceil(pool * f / 100) for f in np.arange(step, 100 + step / 2, step)]
    return sorted({t for t in got if 0 < t <= pool})


def run_mode(
    coll: Collection,
    *,
    mode: str,
    base: str,
    slug: str,
    tokens: dict[str, str],
    pool: int,
    step: float,
    k: int,
    confusion: np.ndarray | None,
    seed: int,
    hybrid: bool = False,
) -> ModeRun:
    result = ModeRun(mode, pool)
    lock = threading.Lock()
    pending = thresholds(pool, step)
    lead = httpx.Client(base_url=base, headers={"Authorization": f"Token {tokens['lead']}"}, timeout=120)
    grade_index = {g: i for i, g in enumerate(coll.grades)}

    def count(status: int) -> None:
        with lock:
            result.statuses[status] = result.statuses.get(status, 0) + 1

    def checkpoint(judged: int, labels: dict[tuple[str, str], int]) -> None:
        claims: list[tuple[str, str, str, float | None]] = []
        people: tuple[bool | None, int | None] = (None, None)
        try:
            got = lead.get(f"/api/campaigns/{slug}/leaderboard/", params={"k": k})
            count(got.status_code)
            if got.status_code == 200:
                claims = verdict_claims(got.json())
                people = stop_fields(got.json())
        except httpx.HTTPError:
            with lock:
                result.transport_errors += 1
        point = Checkpoint(judged, judged / pool, labels, claims, stop_reached=people[0], stop_left=people[1])
        if hybrid:
            try:
                got = lead.get(f"/api/campaigns/{slug}/leaderboard/", params={"k": k, "labels": f"hybrid:{MODEL}"})
                count(got.status_code)
                if got.status_code == 200:
                    board = got.json()
                    point.hybrid = {
                        str(row["name"]): float(row["measures"][f"nDCG@{k}"]) for row in board.get("systems", [])
                    }
                    point.hybrid_claims = verdict_claims(board)
                    stop = board.get("stop") or {}
                    point.hybrid_reached, point.hybrid_left = stop_fields(board)
                    if stop.get("reached"):
                        ranked = sorted(point.hybrid, key=lambda name: (-round(point.hybrid[name], 12), name))
                        point.hybrid_stop = ranked[: int(stop.get("top_k") or 3)]
            except httpx.HTTPError:
                with lock:
                    result.transport_errors += 1
        with lock:
            result.checkpoints.append(point)

    def annotator(name: str, rng: random.Random) -> None:
        client = httpx.Client(base_url=base, headers={"Authorization": f"Token {tokens[name]}"}, timeout=120)
        failures = 0
        while failures < 20:
            started = time.perf_counter()
            try:
                got = client.get(f"/api/campaigns/{slug}/next/")
            except httpx.HTTPError:
                with lock:
                    result.transport_errors += 1
                failures += 1
                continue
            with lock:
                result.next_ms.append((time.perf_counter() - started) * 1000)
            count(got.status_code)
            if got.status_code == 204:
                return
            if got.status_code != 200:
                failures += 1
                continue
            body = got.json()
            true = coll.qrels.get((body["qid"], body["docid"]), 0)
            true = max(true, 0)
            grade = true
            if confusion is not None:
                grade = coll.grades[rng.choices(range(len(coll.grades)), weights=confusion[grade_index[true]])[0]]
            try:
                posted = client.post("/api/judgments/", json={"pair": body["pair"], "grade": grade})
            except httpx.HTTPError:
                with lock:
                    result.transport_errors += 1
                failures += 1
                continue
            count(posted.status_code)
            if posted.status_code not in (200, 201):
                failures += 1
                continue
            snap = None
            with lock:
                result.labels[(body["qid"], body["docid"])] = grade
                judged = len(result.labels)
                if pending and judged >= pending[0]:
                    while pending and judged >= pending[0]:
                        pending.pop(0)
                    snap = dict(result.labels)
            if snap is not None:
                checkpoint(judged, snap)

    started = time.perf_counter()
    threads = [
        threading.Thread(target=annotator, args=(name, random.Random(f"{seed}-{name}")))
        for name in tokens
        if name != "lead"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = time.perf_counter() - started
    result.checkpoints.sort(key=lambda c: c.judged)
    lead.close()
    return result


# --------------------------------------------------------------------------- figures


@dataclass
class Figures:
    mode: str
    shares: list[float]
    tau: list[float]
    tau_ap: list[float]
    top1: list[bool]
    top3: list[bool]
    wrong_settled: set[tuple[str, str]]
    wrong_likely: set[tuple[str, str]]
    likely_claims: int
    likely_wrong_claims: int
    settled_claims: int
    hybrid_tau: list[float] = field(default_factory=list)  # at each checkpoint (--model-confusion)
    hybrid_wrong_settled: set[tuple[str, str]] = field(default_factory=set)
    hybrid_likely: int = 0
    hybrid_likely_wrong: int = 0
    hybrid_stops: int = 0  # checkpoints whose stop said the lead may stop
    hybrid_wrong_stops: int = 0  # ... with a top k that is not the final one
    stop: StopAccuracy | None = None  # the people-only leaderboard's stop (None for a reference order)
    hybrid_stop_accuracy: StopAccuracy | None = None  # the hybrid leaderboard's (--model-confusion)


# an estimate within this factor of the judgments it actually took counts as right (issue 40 item 4)
WITHIN = 1.5


@dataclass
class StopAccuracy:
    """How well the leaderboard stop's ``judgments_left_estimate`` foretold the stop, over one mode's checkpoints.

    The stop comes at ``first``: the judgment count of the first checkpoint whose stop said ``reached`` (a lead
    who watches the leaderboard stops there; seen at the checkpoints only, so to within one ``--step``). For each
    earlier checkpoint with an estimate above 0 the ratio is (``first`` - its judgments) / its estimate: 1 is
    exact, above 1 the stop came later than estimated. Checkpoints before the stop whose estimate was 0 or
    missing (no stop object, a failed request) are counted in ``ignored``. ``stays``: the judgment count from
    which the stop said reached at every later checkpoint (it may say so and take it back). ``everything``: of the
    ratios, those whose estimate was at least ALL_LEFT of the pool's pairs left (what judgments_to_stop answers
    when only judging about every pair reaches the stop): right only if the stop waits for the whole pool."""

    judged: list[int]
    reached: list[bool | None]
    estimate: list[int | None]
    first: int | None
    stays: int | None
    ratios: list[float]
    ignored: int
    everything: int = 0

    @property
    def median(self) -> float | None:
        return float(np.median(self.ratios)) if self.ratios else None

    @property
    def within(self) -> float | None:
        """The share of the ratios within a factor WITHIN of 1."""
        if not self.ratios:
            return None
        r = np.asarray(self.ratios)
        return float(np.mean((r >= 1 / WITHIN - 1e-12) & (r <= WITHIN + 1e-12)))

    def as_json(self) -> dict:
        return {
            "judged": self.judged,
            "reached": self.reached,
            "judgments_left_estimate": self.estimate,
            "first_reached": self.first,
            "stays_reached": self.stays,
            "ratios": self.ratios,
            "median_ratio": self.median,
            "within_1_5": self.within,
            "ignored": self.ignored,
            "estimate_all_left": self.everything,
        }


Share = TypeVar("Share", int, float)  # a checkpoint's share of the pool, or its judgment count

# an estimate at least this share of the pairs left is "every pair left" (StopAccuracy.everything)
ALL_LEFT = 0.9


def stop_accuracy(
    judged: list[int], reached: list[bool | None], estimate: list[int | None], pool: int | None = None
) -> StopAccuracy:
    """StopAccuracy of the checkpoints (judgment counts, in order) and what the stop said at each (``pool``: the
    pooled pairs, for ``everything``)."""
    first = next((n for n, r in zip(judged, reached, strict=True) if r), None)
    stays = _stays(judged, [bool(r) for r in reached])
    ratios: list[float] = []
    ignored = everything = 0
    if first is not None:
        for n, left in zip(judged, estimate, strict=True):
            if n >= first:
                break
            if left is None or left <= 0:
                ignored += 1
            else:
                ratios.append((first - n) / left)
                everything += int(pool is not None and left >= ALL_LEFT * (pool - n))
    return StopAccuracy(list(judged), list(reached), list(estimate), first, stays, ratios, ignored, everything)


def _stays(shares: Sequence[Share], ok: list[bool]) -> Share | None:
    """The smallest share (or judgment count) from which ``ok`` holds at every later checkpoint (None: not even at
    the end)."""
    at: Share | None = None
    for share, good in zip(shares, ok, strict=True):
        if good and at is None:
            at = share
        elif not good:
            at = None
    return at


def _ranking_point(
    out: Figures, names: list[str], final: np.ndarray, est: np.ndarray, share: float, top1: set[str], top3: set[str]
) -> None:
    """Append one checkpoint's tau, tau_AP and whether the top 1 and the top-3 set are right to ``out``."""
    order = np.lexsort((np.arange(len(names)), -np.round(est, 12)))
    tau = metrics.kendall_tau(final, est)
    out.shares.append(share)
    out.tau.append(0.0 if math.isnan(tau) else tau)
    out.tau_ap.append(tau_ap(est, final) if np.ptp(est) > 0 else 0.0)
    out.top1.append({names[order[0]]} == top1)
    out.top3.append({names[i] for i in order[:3]} == top3)


# --------------------------------------------------------------------------- reference orders (no server)

# fixed orders of the whole pool, judged offline with the true labels: what a queue could reach (issue 40 item 4)
REFERENCES = ("relevant-first", "rank-sum")


def relevant_first_order(grade: np.ndarray, seed: int) -> np.ndarray:
    """An oracle's order of the pool positions: the pairs whose true ``grade`` is above 0 first, higher grades
    first, ties in a random order fixed by ``seed``."""
    grade = np.asarray(grade)
    perm = np.random.default_rng([seed, 40]).permutation(grade.size)
    order: np.ndarray = perm[np.argsort(-grade[perm], kind="stable")]
    return order


def rank_sum_order(scorer: Scorer, pool_depth: int) -> np.ndarray:
    """The pool positions by the sum over the systems of their rank discount 1/log2(rank + 1) (rank from 1, within
    the pool depth) for the pair, largest first; equal sums in the pool's order."""
    index = scorer.index[:, :, :pool_depth]
    discount = 1.0 / np.log2(np.arange(index.shape[2]) + 2.0)
    ranked = index >= 0
    weight = np.bincount(
        index[ranked], weights=np.broadcast_to(discount, index.shape)[ranked], minlength=len(scorer.keys)
    )
    order: np.ndarray = np.lexsort((np.arange(weight.size), -np.round(weight, 12)))
    return order


def true_grades(coll: Collection, scorer: Scorer) -> np.ndarray:
    """(P,) the qrels' grade of each pooled pair in pool order (an unjudged document's is 0, as annotators say)."""
    return np.array([max(coll.qrels.get(key, 0), 0) for key in scorer.keys], dtype=np.int8)


def reference_figures(coll: Collection, scorer: Scorer, name: str, order: np.ndarray, step: float) -> Figures:
    """The figures of judging the pool in ``order`` (pool positions) with the true grades, at the modes'
    checkpoints (``thresholds``), scored as the people-only leaderboard scores (Scorer.scores_of: a pair not
    judged yet counts as not relevant, a query without a label is left out)."""
    names = coll.systems
    grade = true_grades(coll, scorer)
    final = scorer.scores_of(grade)
    truth_order = np.lexsort((np.arange(len(names)), -np.round(final, 12)))
    top1, top3 = {names[truth_order[0]]}, {names[i] for i in truth_order[:3]}
    out = Figures(name, [], [], [], [], [], set(), set(), 0, 0, 0)
    for n in thresholds(grade.size, step):
        vec = np.full(grade.size, metrics.UNJUDGED, dtype=np.int8)
        vec[order[:n]] = grade[order[:n]]
        _ranking_point(out, names, final, scorer.scores_of(vec), n / grade.size, top1, top3)
    return out


def references(coll: Collection, scorer: Scorer, pool_depth: int, step: float, seed: int) -> list[Figures]:
    """The figures of the REFERENCES orders."""
    orders = {
        "relevant-first": relevant_first_order(true_grades(coll, scorer), seed),
        "rank-sum": rank_sum_order(scorer, pool_depth),
    }
    return [reference_figures(coll, scorer, name, orders[name], step) for name in REFERENCES]


BASELINE_SHARES = (0.05, 0.10, 0.15, 0.20, 0.30)


def model_baseline(
    coll: Collection, scorer: Scorer, model: dict[tuple[str, str], int], pool_depth: int
) -> list[tuple[float, float]]:
    """Issue 40's baseline with a model judge: people judge the pool in ``rank-sum`` order (true grades) and the
    model's raw grade stands for every pair they have not judged; (share, tau against the whole pool's ranking) at
    each of BASELINE_SHARES."""
    grade = true_grades(coll, scorer)
    final = scorer.scores_of(grade)
    order = rank_sum_order(scorer, pool_depth)
    raw = np.array([model[key] for key in scorer.keys], dtype=np.int8)
    out = []
    for share in BASELINE_SHARES:
        n = int(round(share * grade.size))
        vec = raw.copy()
        vec[order[:n]] = grade[order[:n]]
        tau = metrics.kendall_tau(final, scorer.scores_of(vec))
        out.append((share, 0.0 if math.isnan(tau) else float(tau)))
    return out


def model_baseline_line(coll: Collection, scorer: Scorer, model: dict[tuple[str, str], int], pool_depth: int) -> str:
    """model_baseline as one line of the bench's output."""
    points = ", ".join(f"{share:.0%} {tau:.3f}" for share, tau in model_baseline(coll, scorer, model, pool_depth))
    return f"the issue's baseline (people in rank-sum order, the model's raw labels elsewhere): tau at {points}"


def tau_share(f: Figures) -> float | None:
    """The share of the pool from which tau >= 0.9 stays so (None: not even at the end)."""
    return _stays(f.shares, [t >= 0.9 for t in f.tau])


def best_over_oracle(figs: list[Figures], refs: list[Figures]) -> tuple[str, float, float, float] | None:
    """(best people-only mode, its share for tau >= 0.9, relevant-first's, their ratio), or None without a mode
    or a share."""
    people = [(tau_share(f), f.mode) for f in figs if f.mode != "hybrid"]
    people = [(share, mode) for share, mode in people if share is not None]
    oracle = next((tau_share(r) for r in refs if r.mode == "relevant-first"), None)
    if not people or not oracle:
        return None
    share, mode = min(people)
    return mode, share, oracle, share / oracle


def figures(coll: Collection, scorer: Scorer, run: ModeRun) -> Figures:
    names = coll.systems
    final = scorer.scores(run.labels)
    truth_order = np.lexsort((np.arange(len(names)), -np.round(final, 12)))
    top1, top3 = {names[truth_order[0]]}, {names[i] for i in truth_order[:3]}
    final_of = dict(zip(names, final.tolist(), strict=True))
    out = Figures(run.mode, [], [], [], [], [], set(), set(), 0, 0, 0)
    for cp in run.checkpoints:
        _ranking_point(out, names, final, scorer.scores(cp.labels), cp.share, top1, top3)
        for a, b, verdict, _p in cp.claims:
            wrong = final_of.get(a, 0.0) < final_of.get(b, 0.0) - 1e-12
            if verdict == "settled":
                out.settled_claims += 1
                if wrong:
                    out.wrong_settled.add((a, b))
            else:
                out.likely_claims += 1
                if wrong:
                    out.likely_wrong_claims += 1
                    out.wrong_likely.add((a, b))
        if cp.hybrid is not None:
            est_h = np.array([cp.hybrid.get(name, 0.0) for name in names])
            tau_h = metrics.kendall_tau(final, est_h)
            out.hybrid_tau.append(0.0 if math.isnan(tau_h) else tau_h)
            for a, b, verdict, _p in cp.hybrid_claims:
                wrong = final_of.get(a, 0.0) < final_of.get(b, 0.0) - 1e-12
                if verdict == "settled" and wrong:
                    out.hybrid_wrong_settled.add((a, b))
                elif verdict == "likely":
                    out.hybrid_likely += 1
                    out.hybrid_likely_wrong += int(wrong)
            if cp.hybrid_stop is not None:
                out.hybrid_stops += 1
                final_top = [names[i] for i in truth_order[: len(cp.hybrid_stop)]]
                out.hybrid_wrong_stops += int(cp.hybrid_stop != final_top)
        elif run.checkpoints and any(c.hybrid is not None for c in run.checkpoints):
            out.hybrid_tau.append(0.0)
    judged = [cp.judged for cp in run.checkpoints]
    out.stop = stop_accuracy(
        judged, [cp.stop_reached for cp in run.checkpoints], [cp.stop_left for cp in run.checkpoints], run.pool
    )
    if any(cp.hybrid is not None for cp in run.checkpoints):
        out.hybrid_stop_accuracy = stop_accuracy(
            judged, [cp.hybrid_reached for cp in run.checkpoints], [cp.hybrid_left for cp in run.checkpoints], run.pool
        )
    return out


def _pct(value: float | None) -> str:
    return "never" if value is None else f"{100 * value:.0f}%"


def table(runs: list[ModeRun], figs: list[Figures], refs: list[Figures] | None = None, pool: int = 0) -> str:
    """The people-only table: a row per mode, then a row per reference order (``refs``, marked ``*``: fixed orders
    judged offline, not queue modes) and the ratio of the best mode's share for tau >= 0.9 to relevant-first's."""
    head = (
        f"{'mode':<15} {'pool':>6} {'tau>=0.9':>9} {'tauAP>=0.9':>10} {'top1':>6} {'top3':>6} "
        f"{'wrong settled':>13} {'wrong likely':>14} {'5xx':>4} {'next p50/p95 ms':>16} {'time s':>7}"
    )
    lines = [head, "-" * len(head)]
    for run, f in zip(runs, figs, strict=True):
        five = sum(n for s, n in run.statuses.items() if s >= 500) + run.transport_errors
        p50, p95 = np.percentile(run.next_ms, [50, 95]) if run.next_ms else (math.nan, math.nan)
        likely = f"{len(f.wrong_likely)} ({f.likely_wrong_claims}/{f.likely_claims})"
        lines.append(
            f"{run.mode:<15} {run.pool:>6} {_pct(_stays(f.shares, [t >= 0.9 for t in f.tau])):>9} "
            f"{_pct(_stays(f.shares, [t >= 0.9 for t in f.tau_ap])):>10} {_pct(_stays(f.shares, f.top1)):>6} "
            f"{_pct(_stays(f.shares, f.top3)):>6} {len(f.wrong_settled):>13} {likely:>14} {five:>4} "
            f"{p50:>7.0f}/{p95:<8.0f} {run.seconds:>7.0f}"
        )
    for f in refs or []:
        lines.append(
            f"{f.mode + '*':<15} {pool:>6} {_pct(tau_share(f)):>9} "
            f"{_pct(_stays(f.shares, [t >= 0.9 for t in f.tau_ap])):>10} {_pct(_stays(f.shares, f.top1)):>6} "
            f"{_pct(_stays(f.shares, f.top3)):>6} {'-':>13} {'-':>14} {'-':>4} {'-':>16} {'-':>7}"
        )
    if refs:
        lines.append(
            "* a reference order, not a queue mode: the whole pool judged offline in a fixed order with the true "
            "labels, a pair not judged yet counting as not relevant (as on the people-only leaderboard); "
            "relevant-first: an oracle (grade > 0 first, higher first, ties at random); rank-sum: by the sum over "
            "the systems of 1/log2(rank + 1) within the pool depth"
        )
        ratio = best_over_oracle(figs, refs)
        if ratio is not None:
            mode, share, oracle, value = ratio
            lines.append(
                f"tau >= 0.9: the best people-only mode ({mode}) from {_pct(share)} of the pool, relevant-first from "
                f"{_pct(oracle)}: ratio {value:.2f} (issue 40 asks for at most {WITHIN:g})"
            )
        elif figs:
            lines.append("tau >= 0.9: no ratio to relevant-first (a mode or relevant-first never stays at 0.9)")
    if any(f.hybrid_tau for f in figs):
        head = (
            f"{'mode':<9} {'hybrid tau>=0.9':>15} {'tau@5%':>7} {'tau@10%':>8} {'tau@20%':>8} "
            f"{'wrong settled':>13} {'wrong likely':>13} {'stops (wrong)':>14}"
        )
        lines += ["", f"the hybrid leaderboard (labels=hybrid:{MODEL}) while people judge in each mode:", head]
        lines.append("-" * len(head))
        for f in figs:
            if not f.hybrid_tau:
                continue
            at = [_tau_at(f.shares, f.hybrid_tau, share) for share in (0.05, 0.10, 0.20)]
            likely = f"{f.hybrid_likely_wrong}/{f.hybrid_likely}"
            lines.append(
                f"{f.mode:<9} {_pct(_stays(f.shares, [t >= 0.9 for t in f.hybrid_tau])):>15} "
                + " ".join(f"{v:>{w}}" for v, w in zip(at, (7, 8, 8), strict=True))
                + f" {len(f.hybrid_wrong_settled):>13} {likely:>13} {f'{f.hybrid_stops} ({f.hybrid_wrong_stops})':>14}"
            )
    return "\n".join(lines)


def stop_table(figs: list[Figures], pool: int) -> str:
    """The stop's estimate per mode (StopAccuracy): where the stop first said reached and from where it stayed
    so, and (judgments it actually took) / judgments_left_estimate at the checkpoints before it."""
    head = (
        f"{'mode':<9} {'board':<7} {'stop at':>8} {'stays':>6} {'checkpoints used (ignored)':>27} "
        f"{'median actual/estimate':>23} {f'within {WITHIN:g}x':>11} {'estimate ~ all left':>20}"
    )
    lines = [
        "the stop's judgments_left_estimate against the judgments it took (stop at: the first checkpoint whose stop "
        f"said reached; estimate ~ all left: of the checkpoints used, those estimating {100 * ALL_LEFT:.0f}% or more "
        "of the pairs left):",
        head,
        "-" * len(head),
    ]
    for f in figs:
        for board, acc in (("people", f.stop), ("hybrid", f.hybrid_stop_accuracy)):
            if acc is None:
                continue
            first = "never" if acc.first is None else f"{100 * acc.first / pool:.0f}%"
            stays = "never" if acc.stays is None else f"{100 * acc.stays / pool:.0f}%"
            median = "-" if acc.median is None else f"{acc.median:.2f}"
            within = "-" if acc.within is None else f"{100 * acc.within:.0f}%"
            used = f"{len(acc.ratios)} ({acc.ignored})"
            lines.append(
                f"{f.mode:<9} {board:<7} {first:>8} {stays:>6} {used:>27} {median:>23} {within:>11} "
                f"{acc.everything:>20}"
            )
            if acc.first is None:
                lines.append(f"{'':<9} {board:<7} the stop never said reached within the pool")
    return "\n".join(lines)


def _tau_at(shares: list[float], taus: list[float], share: float) -> str:
    """tau at the last checkpoint at or below ``share`` of the pool (people's judgments), as text."""
    seen = [t for s, t in zip(shares, taus, strict=True) if s <= share + 1e-9]
    return f"{seen[-1]:.3f}" if seen else "-"


def svg(figs: list[Figures], title: str) -> str:
    """tau (solid) and tau_AP (dashed) against the share of the pool judged, one colour per mode."""
    w, h, left, right, top, bottom = 640, 400, 56, 130, 36, 48
    pw, ph = w - left - right, h - top - bottom

    def x(share: float) -> float:
        return left + pw * share

    def y(value: float) -> float:
        return top + ph * (1 - max(min(value, 1.0), 0.0))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="20" font-size="14">{_escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0):
        dash = ' stroke-dasharray="4 3"' if v == 0.9 else ""
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#ddd"{dash}/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for s in range(0, 101, 20):
        parts.append(f'<text x="{x(s / 100):.1f}" y="{top + ph + 18}" text-anchor="middle">{s}%</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{h - 8}" text-anchor="middle">share of the pool judged</text>')
    parts.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {top + ph / 2})">'
        "Kendall's τ (solid), τ_AP (dashed)</text>"
    )
    for i, f in enumerate(figs):
        color = COLORS[i % len(COLORS)]
        for values, dash in ((f.tau, ""), (f.tau_ap, ' stroke-dasharray="5 4"')):
            points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip([0.0, *f.shares], [0.0, *values], strict=True))
            parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        ly = top + 16 + 20 * i
        parts.append(
            f'<line x1="{left + pw + 12}" y1="{ly}" x2="{left + pw + 36}" y2="{ly}" stroke="{color}" stroke-width="2"/>'
        )
        parts.append(f'<text x="{left + pw + 42}" y="{ly + 4}">{_escape(f.mode)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qrels", type=Path)
    parser.add_argument("--runs", nargs="+", type=Path, help="run files, or one folder of them")
    parser.add_argument("--topics", type=Path)
    parser.add_argument(
        "--preset",
        choices=synthetic.PRESETS,
        help="the generated collection when no files are given (bench/synthetic.py; default realistic)",
    )
    parser.add_argument(
        "--generate", help="systems=N,queries=N,depth=N[,docs=N,seed=N]: the generated collection's sizes"
    )
    parser.add_argument(
        "--modes", help=f"default: {','.join(MODES)} (and hybrid with --model-confusion); none: --only-reference"
    )
    parser.add_argument(
        "--only-reference",
        action="store_true",
        help="only the reference orders (relevant-first, rank-sum), offline, in seconds: no server (or --modes none)",
    )
    parser.add_argument("--annotators", type=int, default=4)
    parser.add_argument("--pool-depth", type=int, default=10)
    parser.add_argument("--k", type=int, default=10, help="nDCG@k, the leaderboard's ranking (default 10)")
    parser.add_argument("--grades", help="the scale, e.g. 0,1,2 (default 0 to the qrels' top label)")
    parser.add_argument("--confusion", help='rows per true grade, e.g. "0.9,0.1,0;0.1,0.8,0.1;0,0.2,0.8"')
    parser.add_argument(
        "--model-confusion",
        help="a simulated model judge labels every pair and hybrid joins the modes: a preset of "
        f"bench/synthetic.py ({', '.join(synthetic.CONFUSIONS)}) or a file of P(model grade | human grade), one line "
        "per human grade",
    )
    parser.add_argument("--step", type=float, default=5.0, help="record every STEP %% of the pool (default 5)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("RELJUDGE_TEST_PORT_FIRST", "9060")))
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/effort_bench"))
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    modes = [m.strip() for m in (args.modes or ",".join(MODES)).split(",") if m.strip()]
    if args.model_confusion and args.modes is None:
        modes.append("hybrid")
    if args.only_reference or modes == ["none"]:
        modes = []  # the reference orders only: no campaign, no server
    from_files = args.qrels is not None or args.runs is not None
    if from_files and (args.preset is not None or args.generate is not None):
        parser.error("give --qrels and --runs, or a generated collection (--preset, --generate), not both")
    generated = None
    try:
        if not from_files:
            generated = generate(args.preset or "realistic", args.generate or "", args.seed)
            qrels, runs, topics = generated.write(args.out / "generated")
        else:
            if args.qrels is None or not args.runs:
                parser.error("give --qrels and --runs, or a generated collection (--preset, --generate)")
            qrels, topics = args.qrels, args.topics
            runs = []
            for path in args.runs:
                runs.extend(sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path])
        os.environ.setdefault("DATABASE_URL", f"sqlite:///{args.out / 'effort.sqlite3'}")
        grades = [int(g) for g in args.grades.split(",")] if args.grades else None
        coll = read_collection(qrels, runs, topics, grades)
        confusion = parse_confusion(args.confusion, coll.grades)
        model_confusion = None
        if args.model_confusion:
            model_confusion = synthetic.confusion_matrix(args.model_confusion, grades=len(coll.grades))
        elif "hybrid" in modes:
            raise InputError("--modes: hybrid needs a model judge: give --model-confusion")
    except (InputError, synthetic.SpecError, ValueError, OSError) as exc:
        print(f"effort_bench: {exc}", file=sys.stderr)
        return 2

    from judging.models import Campaign

    unknown = sorted(set(modes) - set(Campaign.QueueMode.values))
    if unknown:
        allowed = ", ".join(Campaign.QueueMode.values)
        print(f"effort_bench: --modes: unknown {', '.join(unknown)}; the modes are {allowed}", file=sys.stderr)
        return 2
    print(machine_line(), flush=True)
    scorer = Scorer(coll, args.pool_depth, args.k)
    source = "files" if generated is None else f"preset {generated.preset}, seed {generated.seed}"
    print(
        f"collection ({source}): {len(coll.systems)} systems, {len(coll.qids)} queries, pool depth "
        f"{args.pool_depth}: {len(scorer.keys)} pooled pairs; grades {coll.grades}; {args.annotators} annotators; "
        f"confusion {'yes' if confusion is not None else 'no'}; nDCG@{args.k}",
        flush=True,
    )
    if generated is not None and generated.duplicates:
        print(
            f"{len(generated.duplicates)} lines that list a docid a second time in a query dropped from the runs "
            "(the import refuses such a file; each docid keeps its highest-scored line)",
            flush=True,
        )
    stats = scorer.stats(coll.qrels)
    print("\n".join(stats.lines()), flush=True)
    refs = references(coll, scorer, args.pool_depth, args.step, args.seed)
    model = None
    if model_confusion is not None:
        model = model_labels(coll, scorer.keys, model_confusion, args.seed)
        truth = scorer.scores({key: max(coll.qrels.get(key, 0), 0) for key in scorer.keys})
        alone = metrics.kendall_tau(truth, scorer.scores(model))
        true_grades_ = [max(coll.qrels.get(key, 0), 0) for key in scorer.keys]
        kappa = metrics.cohen_kappa(true_grades_, [model[key] for key in scorer.keys], coll.grades, weights="quadratic")
        print(
            f"model judge ({args.model_confusion}): quadratic-weighted kappa {kappa:.2f} against the true grades; "
            f"its labels alone rank the systems with tau {alone:.3f}",
            flush=True,
        )
        print(model_baseline_line(coll, scorer, model, args.pool_depth), flush=True)
    runs_done, figs = run_modes(coll, scorer, modes, args, model, confusion) if modes else ([], [])
    print()
    print(f"collection ({source}):")
    print("\n".join("  " + line for line in stats.lines()))
    print(table(runs_done, figs, refs, len(scorer.keys)))
    if figs:
        print()
        print(stop_table(figs, len(scorer.keys)))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    title = f"{len(coll.systems)} systems x {len(coll.qids)} queries, pool depth {args.pool_depth}, nDCG@{args.k}"
    (args.out / "effort.svg").write_text(svg(figs + refs, title))
    (args.out / "effort.json").write_text(json.dumps(effort_json(source, stats, runs_done, figs, refs), indent=1))
    print(f"SVG: {args.out / 'effort.svg'}; figures: {args.out / 'effort.json'}")
    return 0


def run_modes(
    coll: Collection,
    scorer: Scorer,
    modes: list[str],
    args: argparse.Namespace,
    model: dict[tuple[str, str], int] | None,
    confusion: np.ndarray | None,
) -> tuple[list[ModeRun], list[Figures]]:
    """Build each mode's campaign, serve the app and let the annotators judge in each mode in turn."""
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    tokens = {}
    for mode in modes:
        tokens[mode] = build_campaign(
            coll,
            slug=f"effort-{mode}",
            mode=mode,
            pool_depth=args.pool_depth,
            n_annotators=args.annotators,
            seed=args.seed,
            model=model,
        )
    connections.close_all()
    log = args.out / "serve.log"
    server = serve(args.port, os.environ["DATABASE_URL"], log, args.workers, args.threads)
    base = f"http://127.0.0.1:{args.port}"
    runs_done: list[ModeRun] = []
    figs: list[Figures] = []
    try:
        for mode in modes:
            run = run_mode(
                coll,
                mode=mode,
                base=base,
                slug=f"effort-{mode}",
                tokens=tokens[mode],
                pool=len(scorer.keys),
                step=args.step,
                k=args.k,
                confusion=confusion,
                seed=args.seed,
                hybrid=model is not None,
            )
            runs_done.append(run)
            figs.append(figures(coll, scorer, run))
            print(f"{mode}: {len(run.labels)} judgments in {run.seconds:.0f} s; statuses {run.statuses}", flush=True)
    finally:
        stop(server)
    return runs_done, figs


def effort_json(
    source: str, stats: synthetic.Stats, runs: list[ModeRun], figs: list[Figures], refs: list[Figures]
) -> dict:
    """effort.json: the collection's statistics, each mode's figures per checkpoint (and its stop's estimates),
    the reference orders' and the ratio of the best people-only mode's share for tau >= 0.9 to relevant-first's."""
    ratio = best_over_oracle(figs, refs)
    return {
        "collection": {"source": source, **dataclasses.asdict(stats)},
        "modes": [
            {
                "mode": f.mode,
                "share": f.shares,
                "tau": f.tau,
                "tau_ap": f.tau_ap,
                "top1": f.top1,
                "top3": f.top3,
                "wrong_settled": sorted(map(list, f.wrong_settled)),
                "wrong_likely": sorted(map(list, f.wrong_likely)),
                "likely_claims": f.likely_claims,
                "likely_wrong_claims": f.likely_wrong_claims,
                "hybrid_tau": f.hybrid_tau,
                "hybrid_wrong_settled": sorted(map(list, f.hybrid_wrong_settled)),
                "hybrid_likely_claims": f.hybrid_likely,
                "hybrid_likely_wrong_claims": f.hybrid_likely_wrong,
                "hybrid_stops": f.hybrid_stops,
                "hybrid_wrong_stops": f.hybrid_wrong_stops,
                "statuses": {str(s): n for s, n in r.statuses.items()},
                "stop": None if f.stop is None else f.stop.as_json(),
                "hybrid_stop": None if f.hybrid_stop_accuracy is None else f.hybrid_stop_accuracy.as_json(),
            }
            for f, r in zip(figs, runs, strict=True)
        ],
        "references": [
            {
                "order": f.mode,
                "share": f.shares,
                "tau": f.tau,
                "tau_ap": f.tau_ap,
                "top1": f.top1,
                "top3": f.top3,
                "tau_0_9_from": tau_share(f),
            }
            for f in refs
        ],
        "best_over_relevant_first": None
        if ratio is None
        else {"mode": ratio[0], "share": ratio[1], "relevant_first": ratio[2], "ratio": ratio[3]},
    }


if __name__ == "__main__":
    sys.exit(main())
