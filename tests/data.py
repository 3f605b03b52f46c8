"""Shared test data and plain helpers: tiny TREC files, hand-checkable grades, API clients, random campaigns.

Fixtures live in the conftest.py files; everything here is a constant or an ordinary function that test
modules import (no test module imports another test module or a conftest).
"""

from __future__ import annotations

import os
import threading
import traceback
from pathlib import Path

import numpy as np
import pytest
from django.db import connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import metrics
from metrics import PAD, UNJUDGED

TOPICS = "q1\twool knit sweater\tA warm sweater knitted from wool.\nq2\train jacket\tA waterproof jacket.\n"
DOCS = (
    '{"docid": "d1", "title": "Merino wool sweater", "text": "Soft merino knit."}\n'
    '{"docid": "d2", "title": "Cotton tee", "text": "Light cotton."}\n'
    '{"docid": "d3", "title": "Cable knit jumper", "text": "Chunky wool cable knit."}\n'
    '{"docid": "d4", "title": "Rain shell", "text": "Waterproof shell jacket."}\n'
)
# bm25 ranks d1, d3, d2 for q1 and d4, d2 for q2; dense ranks d3, d2, d1 and d2, d4.
RUN_BM25 = "q1 Q0 d1 1 9.5 bm25\nq1 Q0 d3 2 8.0 bm25\nq1 Q0 d2 3 7.5 bm25\nq2 Q0 d4 1 3.0 bm25\nq2 Q0 d2 2 1.0 bm25\n"
RUN_DENSE = (
    "q1 Q0 d3 1 0.9 dense\nq1 Q0 d2 2 0.8 dense\nq1 Q0 d1 3 0.7 dense\nq2 Q0 d2 1 0.6 dense\nq2 Q0 d4 2 0.5 dense\n"
)
# The systems' names: an annotator's responses must never contain them.
SYSTEM_NAMES = ("bm25", "dense")

# Debian's Chromium, driven by Playwright in the browser and header tests (never a browser download).
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
]

# Grades of alice, bob and carol for 8 pairs d0..d7 (None = not judged); d3 and d5 are two apart (disputed).
THREE_ANNOTATOR_GRADES = [
    (2, 2, 2),
    (1, 2, None),
    (0, 0, 0),
    (2, 0, 1),
    (1, 1, None),
    (0, 1, 2),
    (2, 2, None),
    (1, 0, 1),
]


def client_for(user=None):
    """An API client authenticated the way scripts are: with the user's token."""
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def body_of(response) -> bytes:
    """A response's body, streamed or not."""
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def run_concurrently(target, args_list, *, timeout: float = 180) -> list[Exception]:
    """Run ``target(*args)`` in one thread per entry of ``args_list``, all released at once, each with its
    own database connection; return what they raised (a thread's exception is otherwise swallowed)."""
    errors: list[Exception] = []
    barrier = threading.Barrier(len(args_list))

    def work(*args):
        try:
            barrier.wait()
            target(*args)
        except Exception as exc:  # noqa: BLE001 - every thread's failure is collected and raised after
            traceback.print_exc()  # shown with the failing test: where in its thread it was raised
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return errors


# --------------------------------------------------------------------------------------------------------
# Random campaigns for the metrics oracle tests (pytrec_eval, trec_eval's own code, is the reference)

TOLERANCE = 1e-9


def docid(rng: np.random.Generator, i: int) -> str:
    """Docids of different lengths and scripts, so that ties exercise strcmp's byte order."""
    return str(rng.choice(["d", "D", "doc-", "é", "문서", "z"])) + str(i)


def random_campaign(seed: int, *, max_grade: int = 2, scores: str = "ties", n_queries: int = 30):
    """pytrec_eval-style qrels and three runs: graded labels, unjudged documents, missing queries.

    scores: "ties" (few distinct values, exact in float32), "distinct" (distinct float32 values) or
    "float32-ties" (distinct doubles that round to the same float32, which trec_eval treats as ties).
    """
    rng = np.random.default_rng(seed)
    qrels, runs = {}, [{}, {}, {}]
    for q in range(n_queries):
        qid = f"q{q}"
        pool = [docid(rng, i) for i in range(int(rng.integers(4, 60)))]
        judged = rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False)
        top_grade = 0 if q % 9 == 4 else max_grade  # some queries without any relevant document
        qrels[qid] = {str(d): int(rng.integers(0, top_grade + 1)) for d in judged}
        for run in runs:
            if rng.random() < 0.1:
                continue  # the system returned nothing for this query
            n = int(rng.integers(1, len(pool) + 1))
            retrieved = rng.choice(pool, size=n, replace=False)
            if scores == "ties":
                values = rng.integers(0, 5, size=n).astype(np.float64)
            elif scores == "distinct":
                values = rng.choice(1 << 20, size=n, replace=False) / 1024.0
            else:
                values = 1.0 + rng.integers(0, 3, size=n) * 0.25 + rng.integers(1, 9, size=n) * 1e-9
            run[qid] = {str(d): float(v) for d, v in zip(retrieved, values, strict=True)}
    return qrels, runs


def arrays_via_trec_order(qrels, runs, qids):
    """The (S, Q, D) labels built query by query with metrics.trec_order."""
    depth = max(len(docs) for run in runs for docs in run.values())
    labels = np.full((len(runs), len(qids), depth), PAD)
    for s, run in enumerate(runs):
        for i, qid in enumerate(qids):
            docs = run.get(qid, {})
            docids = list(docs)
            order = metrics.trec_order(docids, list(docs.values()))
            labels[s, i, : len(docids)] = [qrels[qid].get(docids[j], UNJUDGED) for j in order]
    return labels


def trec_f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def ranked(run, qid):
    docs = run.get(qid, {})
    docids = list(docs)
    return [docids[j] for j in metrics.trec_order(docids, list(docs.values()))]


def doc_id_array(runs, qids, depth):
    """(S, Q, D) integer ids of the ranked documents, one id per docid string, -1 after the run."""
    ids: dict[str, int] = {}
    out = np.full((len(runs), len(qids), depth), -1, dtype=np.int64)
    for s, run in enumerate(runs):
        for i, qid in enumerate(qids):
            docs = ranked(run, qid)
            out[s, i, : len(docs)] = [ids.setdefault(d, len(ids)) for d in docs]
    return out


def in_browser(check) -> list[str]:
    """Run ``check(page)`` in Chromium and return the console errors and page errors it caused.

    Its own thread and Playwright instance: tests/browser keeps a session-wide sync Playwright running in
    the main thread, and a second one cannot start beside it there."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
        if os.environ.get("RELJUDGE_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    outcome: dict = {}

    def work():
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
                try:
                    page = browser.new_page()
                    page.set_default_timeout(10_000)
                    errors: list[str] = []
                    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
                    check(page)
                    outcome["errors"] = errors
                finally:
                    browser.close()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread, which raises it
            outcome["exception"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=120)
    if "exception" in outcome:
        raise outcome["exception"]
    return outcome["errors"]


# Browser window sizes of the screenshot tests: a phone with touch, and a laptop.
PHONE = {"width": 390, "height": 844, "is_mobile": True, "has_touch": True}
DESKTOP = {"width": 1366, "height": 900}

# The "tiny" campaign (fixture in tests/conftest.py): three systems, three queries with labels and one without.
# P@1 per query (q1, q2, q3): alpha (1, 0, 1), beta (0, 1, 1), gamma (1, 0, 0) - gamma returned nothing for q2
# and q3. alpha vs beta on P@1: q1 win, q2 loss, q3 tie. d9 and d10 are unjudged. Names and titles carry markup
# that pages must escape.
TINY_TOPICS = "q1\tmerino <b>wool</b> sweater\nq2\train jacket\nq3\tcable knit\nq4\tnot judged yet\n"
TINY_DOCS = "".join(
    f'{{"docid": "d{i}", "title": "Title {i}{" <script>alert(1)</script>" if i == 1 else ""}", "text": "t"}}\n'
    for i in range(1, 11)
)
TINY_RUNS = (
    "q1 Q0 d1 1 3 alpha\nq1 Q0 d2 2 2 alpha\nq1 Q0 d3 3 1 alpha\n"
    "q2 Q0 d4 1 3 alpha\nq2 Q0 d5 2 2 alpha\nq2 Q0 d6 3 1 alpha\n"
    "q3 Q0 d7 1 3 alpha\nq3 Q0 d8 2 2 alpha\nq3 Q0 d9 3 1 alpha\n"
    "q1 Q0 d2 1 3 beta\nq1 Q0 d1 2 2 beta\nq1 Q0 d3 3 1 beta\n"
    "q2 Q0 d6 1 3 beta\nq2 Q0 d5 2 2 beta\nq2 Q0 d4 3 1 beta\n"
    "q3 Q0 d8 1 3 beta\nq3 Q0 d7 2 2 beta\nq3 Q0 d10 3 1 beta\n"
    "q1 Q0 d3 1 3 <em>gamma</em>\nq1 Q0 d2 2 2 <em>gamma</em>\nq1 Q0 d1 3 1 <em>gamma</em>\n"
)
TINY_QRELS = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d4 0\nq2 0 d5 0\nq2 0 d6 1\nq3 0 d7 1\nq3 0 d8 1\n"
