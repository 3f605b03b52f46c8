"""/healthz: whether this server can reach its database and cache, for load balancers and orchestrators."""

from __future__ import annotations

import logging
import time

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the cache both answer, 503 (naming which failed) when not.

    No login and no data in the answer: it says only which dependency is down, so a balancer can take
    the server out of rotation and an operator can see why.
    """
    checks = {}
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        checks["database"] = "ok"
    except Exception:  # any failure means "not healthy", and is logged
        logger.exception("healthz: database unreachable")
        checks["database"] = "unreachable"
    try:
        cache.set("healthz", "1", 10)
        checks["cache"] = "ok" if cache.get("healthz") == "1" else "unreachable"
    except Exception:
        logger.exception("healthz: cache unreachable")
        checks["cache"] = "unreachable"
    healthy = all(v == "ok" for v in checks.values())
    body = {"status": "ok" if healthy else "unavailable", **checks, "ms": round(1000 * (time.monotonic() - started))}
    return JsonResponse(body, status=200 if healthy else 503)
