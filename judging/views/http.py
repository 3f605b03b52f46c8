"""The request the pages see: Django's, with what the middleware adds to it."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A page's request: django-htmx's middleware (in settings.MIDDLEWARE) sets ``htmx`` on every request, which
    django-stubs' HttpRequest does not declare. For annotations only: Django builds the requests."""

    htmx: HtmxDetails
