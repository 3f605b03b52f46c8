"""A local OpenAI-compatible chat-completions server for the model judge's tests (a plain helper module:
test modules import it, none imports another test module)."""

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.local_http import serve

# A helper's own range when several run at once (RELJUDGE_FAKE_MODEL_PORT_FIRST), else 8210-8229.
_FIRST = int(os.environ.get("RELJUDGE_FAKE_MODEL_PORT_FIRST", "8210"))
PORTS = range(_FIRST, _FIRST + 20)


class FakeModel:
    """A local OpenAI-compatible chat-completions server. ``script[docid]`` is a list of replies used in turn
    for that document (the last one repeats): ``(status, content, delay_seconds)``; others get ``default``.
    ``responder(body)``, when set, answers every call instead (content as a function of the request)."""

    def __init__(self, default=(200, '{"grade": 1, "reason": "on topic"}', 0.0)):
        self.default = default
        self.responder = None
        self.script: dict[str, list] = {}
        self.calls: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as real servers do: headers and body go out without waiting

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                docid = re.search(r"^Document (\S+)$", user, re.M).group(1)
                with fake.lock:
                    fake.calls.append(body)
                    fake.headers.append(dict(self.headers))
                    replies = fake.script.get(docid)
                    reply = (replies.pop(0) if len(replies) > 1 else replies[0]) if replies else fake.default
                    if fake.responder is not None:
                        reply = fake.responder(body)
                status, content, delay = reply
                if delay:
                    time.sleep(delay)
                if status == 200:
                    payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
                else:
                    payload = json.dumps({"error": {"message": content}})
                data = payload.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client timed out and hung up

        self.server, self.thread = serve(PORTS, Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
