"""The header's language switcher: sets the language cookie and, for a signed-in user, keeps the choice."""

from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from judging.languages import remember_in_session
from judging.services.languages import language_codes, user_language_set


@require_POST
def language_set(request):
    """Django's set_language (the cookie, and a redirect to ``next`` only if it is on this site), plus the
    choice kept on the account of a signed-in user, so that it follows them to their next login anywhere."""
    response = set_language(request)
    language = request.POST.get("language", "")
    if language in language_codes() and request.user.is_authenticated:
        user_language_set(user=request.user, language=language)
        remember_in_session(request, language)
    return response
