"""The judging requests in one transaction on PostgreSQL: one commit a request.

Outside a transaction every statement is a transaction of its own: the session's read, the user's, the campaign
and membership check, the priority list's "did a label move?", the progress counts. A "record + next" on the
judging page committed 4 times in ``shuffled`` and 17 times in ``mtc`` (issue 45: commits per judgment are part
of what the database spends on each one). :class:`RequestTransaction` runs the judging page's requests and the
API's next pair and judgments (:data:`ONE_TRANSACTION`) in one transaction, from the session's read to its save:
one commit each. A request that ends in a 5xx is rolled back whole (a view's exception is turned into its answer
inside the layers below this one, so this layer sees the answer, not the exception); a 4xx keeps what the view
committed, as before (a refused judgment writes nothing: its own savepoint rolled back).

What it changes for the queue: a "record + next" inside this transaction holds the pair it has just judged when it
takes the lock of the pair it goes on to, so that lock is not waited for in the lock manager (judging.services.queue
``wait=False``: NOWAIT, tried a few times; a pair kept locked throughout is passed over as a lost race) and two
requests cannot deadlock; a pair found no longer open lets its lock go with its savepoint, so a request that holds
no other pair's lock (the page's hold of the pair it shows, the next pair of the API) still waits for one. SQLite
is left as it was: its transactions take the one write lock (``BEGIN IMMEDIATE``), which a page that only reads must
not hold.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

#: The views whose requests run in one transaction on PostgreSQL (URL names, as ``reverse`` takes them).
ONE_TRANSACTION = frozenset(
    {
        "judging:judge",
        "judging:judge_record",
        "judging:judge_skip",
        "judging:judge_hold",
        "api:campaign-next-pair",
        "api:judgment-list",
    }
)


def one_transaction(path: str) -> bool:
    """Whether a request for ``path`` runs in one transaction (on PostgreSQL)."""
    try:
        return resolve(path).view_name in ONE_TRANSACTION
    except Resolver404:
        return False


class RequestTransaction:
    """Runs the requests of ONE_TRANSACTION's views in one transaction on PostgreSQL (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if connection.vendor != "postgresql" or not one_transaction(request.path_info):
            return self.get_response(request)
        with transaction.atomic():
            response = self.get_response(request)
            if response.status_code >= 500:
                transaction.set_rollback(True)
        return response
