"""The worker page: what the process that answers keeps between requests (judging.runtime's registry), each cache's
size against its bound, the module that keeps it and what invalidates it (issue 43). For staff and leads."""

from __future__ import annotations

import os

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from judging import runtime
from judging.access import can_see_worker


@never_cache  # the sizes are this moment's
@login_required
@require_GET
def worker_page(request: HttpRequest) -> HttpResponse:
    if not can_see_worker(request.user):
        raise PermissionDenied(_("Only staff and campaign leads see what a worker keeps."))
    runtime.load_all()
    rows = [
        {
            "name": k.name,
            "module": k.module,
            "size": k.size(),
            "unit": k.unit,
            "bound": k.bound_text,
            "invalidated_by": k.invalidated_by,
            "cache": k.clear is not None,
        }
        for k in runtime.registered()
    ]
    return render(request, "judging/worker.html", {"rows": rows, "pid": os.getpid()})
