"""Server-rendered pages."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from judging.models import Campaign


@login_required
def home(request):
    campaigns = Campaign.objects.all() if request.user.is_superuser else Campaign.objects.filter(
        memberships__user=request.user
    )
    return render(request, "judging/home.html", {"campaigns": campaigns})
