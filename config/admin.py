"""The admin site for superusers only: campaign leads are not site staff and work in the app itself."""

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminSite(admin.AdminSite):
    site_header = "RelJudge administration"

    def has_permission(self, request):
        # Django lets any is_staff user in and then trusts model permissions; those are global, not per
        # campaign, so a staff lead with judging.* rights could read and edit every campaign. A superuser
        # can reach every campaign anyway, so the admin shows nobody anything they could not already see.
        return request.user.is_active and request.user.is_superuser


class AdminConfig(DjangoAdminConfig):
    default_site = "config.admin.AdminSite"
