"""A local HTTP server for the fake outside services of the tests (tests/fake_model.py, tests/fake_engine.py): bound
to the first free port of the service's range, served by a daemon thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(ports: range, handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """A server of ``handler`` on the first port of ``ports`` nobody holds (each test process and suite gets its own
    range through the environment), already serving; RuntimeError when every port of the range is taken."""
    for port in ports:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), handler)
            break
        except OSError:
            continue
    else:
        raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
