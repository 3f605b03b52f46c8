"""API views: thin DRF viewsets over the selectors (reads) and the services (writes), one module per resource.

``base`` holds what they share (ApiMixin, the exception handler, download helpers); CampaignViewSet is put
together from the action mixins of ``leaderboard``, ``members``, ``uploads`` and ``judges``.
"""

from judging.api.views.campaigns import CampaignViewSet
from judging.api.views.content import DocumentViewSet, PairViewSet, QueryViewSet, SystemViewSet
from judging.api.views.judgments import JudgmentViewSet
from judging.api.views.tokens import AuthTokenView

__all__ = [
    "AuthTokenView",
    "CampaignViewSet",
    "DocumentViewSet",
    "JudgmentViewSet",
    "PairViewSet",
    "QueryViewSet",
    "SystemViewSet",
]
