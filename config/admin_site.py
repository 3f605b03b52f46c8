"""The admin site for superusers only: campaign leads are not site staff and work in the app itself."""

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.models import User as Account
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _


class SuperuserAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form, refusing staff who are not superusers with the same message as a wrong password."""

    def confirm_login_allowed(self, user: Account) -> None:
        super().confirm_login_allowed(user)
        if not user.is_superuser:
            raise self.get_invalid_login_error()


class AdminSite(admin.AdminSite):
    site_header = _("RelJudge administration")
    login_form = SuperuserAuthenticationForm

    def has_permission(self, request: HttpRequest) -> bool:
        # Django lets any is_staff user in and then trusts model permissions; those are global, not per
        # campaign, so a staff lead with judging.* rights could read and edit every campaign. A superuser
        # can reach every campaign anyway, so the admin shows nobody anything they could not already see.
        return request.user.is_active and request.user.is_superuser
