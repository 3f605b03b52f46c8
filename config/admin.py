"""The admin app with RelJudge's site (config/admin_site.py): loaded from INSTALLED_APPS, so it imports no models."""

from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    default_site = "config.admin_site.AdminSite"
