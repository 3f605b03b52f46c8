"""Local search engines for the engine tests and the fetch bench (a plain helper module: test modules import it,
none imports another test module).

One server speaks three protocols over the same documents, ranked by BM25 (Lucene's formula: k1 = 1.2,
b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)); ties by id):

- Elasticsearch / OpenSearch ``POST /{index}/_search`` (the Search API: a Query DSL body with ``match``,
  ``multi_match`` or ``query_string``, ``size`` and ``from``; the answer's ``took``, ``timed_out``, ``_shards``
  and ``hits`` with ``total``, ``max_score`` and ``hits[]`` of ``_index``, ``_id``, ``_score``, ``_source``);
  an unknown index answers 404 ``index_not_found_exception``, an unknown query type 400 ``parsing_exception``,
  in Elasticsearch's error shape;
- Solr ``GET /solr/{collection}/select`` (``q``, ``rows``, ``start``, ``fl``, ``wt=json``; the answer's
  ``responseHeader`` and ``response`` with ``numFound``, ``start``, ``numFoundExact`` and ``docs[]``); an
  unknown collection answers 404, a missing ``q`` 400 with Solr's ``error`` object (``msg``, ``code``);
- a generic JSON API ``GET /api/v1/search?text=...&limit=N`` or ``POST`` with ``{"text": ..., "limit": N}``:
  ``{"data": {"results": [{"doc": {"key", "name", "body"}, "relevance"}]}}``.

``script[query text] = mode`` makes the server misbehave for that query: ``slow`` (answers after 3 s),
``500``, ``403``, ``nonjson``, ``huge`` (a body of 50 MB, written until the client hangs up), ``drip``
(a byte of the body every 0.2 s), ``dripheaders`` (of the headers), ``redirect`` (302 elsewhere), ``echo``
(an error quoting the Authorization header), ``noid`` (a hit without its id), ``dupid`` (an id twice),
``few`` (one hit), ``close`` (hangs up).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_http import serve

_FIRST = int(os.environ.get("RELJUDGE_FAKE_ENGINE_PORT_FIRST", "8250"))
PORTS = range(_FIRST, _FIRST + 20)
INDEX = "products"  # the one index (Elasticsearch) and collection (Solr) the server holds

_WORD = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """BM25 over ``docs`` ({id: {"title", "text"}}), both fields as one bag of words."""

    def __init__(self, docs: dict[str, dict[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = docs
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[str, int]]] = {}
        self.length: dict[str, int] = {}
        for docid, doc in docs.items():
            words = tokens(doc.get("title", "") + " " + doc.get("text", ""))
            self.length[docid] = len(words)
            for word, tf in Counter(words).items():
                self.postings.setdefault(word, []).append((docid, tf))
        self.avgdl = sum(self.length.values()) / max(1, len(docs))
        self.norm = {d: k1 * (1 - b + b * n / self.avgdl) for d, n in self.length.items()}

    def search(self, text: str) -> list[tuple[str, float]]:
        n = len(self.docs)
        scores: dict[str, float] = {}
        for word in set(tokens(text)):
            posting = self.postings.get(word, [])
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            norm, k1 = self.norm, self.k1
            for docid, tf in posting:
                scores[docid] = scores.get(docid, 0.0) + idf * tf * (k1 + 1) / (tf + norm[docid])
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class FakeEngine:
    """The server (see the module's docstring); ``requests`` keeps (method, path, headers, body) of each call."""

    def __init__(self, docs: dict[str, dict[str, str]]) -> None:
        self.ranker = BM25(docs)
        self.script: dict[str, str] = {}
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0  # most calls being answered at once
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle(b"")

            def do_POST(self) -> None:
                self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _handle(self, body: bytes) -> None:
                with fake.lock:
                    fake.requests.append((self.command, self.path, dict(self.headers), body))
                    fake.active += 1
                    fake.peak = max(fake.peak, fake.active)
                try:
                    fake.answer(self, body)
                except OSError:
                    pass  # the client hung up (a timeout, a size cap)
                finally:
                    with fake.lock:
                        fake.active -= 1

        self.server, self.thread = serve(PORTS, Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ answering

    @staticmethod
    def send(
        handler: BaseHTTPRequestHandler, status: int, payload: Any, *, headers: dict[str, str] | None = None
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=UTF-8")
        handler.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)

    def answer(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        if m := re.fullmatch(r"/([^/]+)/_search", path):
            self.elasticsearch(handler, m.group(1), body)
        elif m := re.fullmatch(r"/solr/([^/]+)/select", path):
            self.solr(handler, m.group(1), params)
        elif path == "/api/v1/search":
            if handler.command == "POST":
                request = json.loads(body or b"{}")
                text, limit = str(request.get("text", "")), int(request.get("limit", 10))
            else:
                text, limit = params.get("text", ""), int(params.get("limit", "10"))
            hits = self.misbehave(handler, text, self.ranker.search(text)[:limit])
            if hits is None:
                return
            results = [
                {
                    "doc": {"key": d, "name": self.ranker.docs[d]["title"], "body": self.ranker.docs[d]["text"]},
                    "relevance": s,
                }
                for d, s in hits
            ]
            self.send(handler, 200, {"data": {"results": results}, "meta": {"count": len(results)}})
        else:
            self.send(handler, 404, {"error": f"no route {path}"})

    def misbehave(
        self, handler: BaseHTTPRequestHandler, text: str, hits: list[tuple[str, float]]
    ) -> list[tuple[str, float]] | None:
        """The scripted misbehaviour for ``text``: None when the answer was sent (or refused) here, else the
        hits to send, changed when the mode changes them."""
        mode = self.script.get(text)
        if mode is None:
            return hits
        if mode == "slow":
            time.sleep(3)
            return hits
        if mode in ("500", "403"):
            self.send(
                handler, int(mode), {"error": {"type": "boom", "reason": f"scripted {mode}"}, "status": int(mode)}
            )
        elif mode == "echo":
            auth = handler.headers.get("Authorization", "")
            self.send(handler, 401, {"error": f"bad credentials: {auth}"})
        elif mode == "nonjson":
            self.send(handler, 200, b"<html><body>Service Unavailable</body></html>")
        elif mode == "redirect":
            self.send(handler, 302, {}, headers={"Location": "http://127.0.0.1:9/elsewhere?key=x"})
        elif mode == "close":
            handler.close_connection = True
            handler.wfile.flush()
            handler.connection.close()
        elif mode == "huge":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"hits": {"hits": [')
            block = b'{"_id": "x", "_source": {"title": "' + b"a" * 65536 + b'"}},'
            for _ in range(800):  # 50 MB unless the client hangs up first
                handler.wfile.write(block)
        elif mode == "drip":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            for _ in range(200):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.2)
        elif mode == "dripheaders":  # the status line, then a header a byte at a time
            handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(200):
                handler.wfile.write(b"X")
                handler.wfile.flush()
                time.sleep(0.2)
        elif mode == "noid":
            return [("", s) if i == 1 else (d, s) for i, (d, s) in enumerate(hits)]
        elif mode == "dupid":
            return hits[:2] + hits[:1] + hits[2:]
        elif mode == "few":
            return hits[:1]
        return None

    def elasticsearch(self, handler: BaseHTTPRequestHandler, index: str, body: bytes) -> None:
        if index != INDEX:
            reason = f"no such index [{index}]"
            cause = {"type": "index_not_found_exception", "reason": reason, "index": index}
            self.send(handler, 404, {"error": {"root_cause": [cause], **cause}, "status": 404})
            return
        request = json.loads(body or b"{}")
        query = request.get("query", {"match_all": {}})
        ((kind, clause),) = query.items()
        if kind == "match":
            ((_field, value),) = clause.items()
            text = value["query"] if isinstance(value, dict) else str(value)
        elif kind in ("multi_match", "query_string", "simple_query_string"):
            text = str(clause["query"])
        elif kind == "match_all":
            text = ""
        else:
            cause = {"type": "parsing_exception", "reason": f"unknown query [{kind}]", "line": 1, "col": 12}
            self.send(handler, 400, {"error": {"root_cause": [cause], **cause}, "status": 400})
            return
        size, start = int(request.get("size", 10)), int(request.get("from", 0))
        ranked = self.ranker.search(text)
        hits = self.misbehave(handler, text, ranked[start : start + size])
        if hits is None:
            return
        self.send(
            handler,
            200,
            {
                "took": 1,
                "timed_out": False,
                "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                "hits": {
                    "total": {"value": len(ranked), "relation": "eq"},
                    "max_score": ranked[0][1] if ranked else None,
                    "hits": [
                        {"_index": index, "_score": s, "_source": self.ranker.docs.get(d, {})}
                        | ({"_id": d} if d else {})
                        for d, s in hits
                    ],
                },
            },
        )

    def solr(self, handler: BaseHTTPRequestHandler, collection: str, params: dict[str, str]) -> None:
        header = {"status": 0, "QTime": 1, "params": params}
        if collection != INDEX:
            msg = f"Collection: {collection} not found"
            header["status"] = 404
            self.send(handler, 404, {"responseHeader": header, "error": {"msg": msg, "code": 404}})
            return
        if "q" not in params:
            header["status"] = 400
            self.send(handler, 400, {"responseHeader": header, "error": {"msg": "missing parameter q", "code": 400}})
            return
        text = re.sub(r"\b\w+:", " ", params["q"])  # field:(words) -> words
        rows, start = int(params.get("rows", "10")), int(params.get("start", "0"))
        ranked = self.ranker.search(text)
        hits = self.misbehave(handler, params["q"], ranked[start : start + rows])
        if hits is None:
            return
        fields = [f.strip() for f in params.get("fl", "*").split(",")]
        docs = []
        for d, s in hits:
            full: dict[str, Any] = {"id": d, "title": [self.ranker.docs.get(d, {}).get("title", "")], "score": s}
            full["text"] = self.ranker.docs.get(d, {}).get("text", "")
            if not d:
                del full["id"]
            docs.append(full if "*" in fields else {k: v for k, v in full.items() if k in fields})
        self.send(
            handler,
            200,
            {
                "responseHeader": header,
                "response": {"numFound": len(ranked), "start": start, "numFoundExact": True, "docs": docs},
            },
        )
