"""Web pages of the judging app."""
from django.urls import path

from judging import views

app_name = "judging"

urlpatterns = [
    path("", views.home, name="home"),
]
