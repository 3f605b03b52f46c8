"""The header's language switcher, and the scripts' translations (the JavaScript catalog) for each language."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import redirect
from django.utils import translation
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET, require_POST
from django.views.i18n import JavaScriptCatalog, set_language

from judging.languages import catalog_url, catalog_version, remember_in_session
from judging.services.languages import language_codes, user_language_set


@require_POST
def language_set(request: HttpRequest) -> HttpResponseBase:
    """Django's set_language (the cookie, and a redirect to ``next`` only if it is on this site), plus the
    choice kept on the account of a signed-in user, so that it follows them to their next login anywhere.

    Flash messages still waiting to be shown were written in the previous language (they are stored as text,
    translated when queued): a switch drops them, so that the next page does not greet an English reader in
    Korean (issue 42). They told of a step done before the switch, whose result the pages show."""
    previous = translation.get_language()
    response = set_language(request)
    language = request.POST.get("language", "")
    if language in language_codes():
        if language != previous:
            for _pending in messages.get_messages(request):  # read: MessageMiddleware stores none of them back
                pass
        if request.user.is_authenticated:
            user_language_set(user=request.user, language=language)
            remember_in_session(request, language)
    return response


@require_GET
def javascript_catalog(request: HttpRequest, language: str, version: str) -> HttpResponseBase:
    """The scripts' messages in the language the URL names, whatever the request's own language. Its address
    changes with the language and the catalog, so it is cached for a year as it is; a stale version (a page
    from before a deployment) is sent on to the current one."""
    if language not in language_codes():
        raise Http404("No such language.")
    if version != catalog_version(language):
        return redirect(catalog_url(language))
    with translation.override(language):
        response = JavaScriptCatalog.as_view()(request)
    patch_cache_control(response, public=True, max_age=365 * 24 * 3600, immutable=True)
    return response
