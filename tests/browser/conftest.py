"""Playwright (sync API) driving Debian's Chromium against pytest-django's live server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.knitwear import knitwear_campaign
from tests.data import CHROMIUM, LAUNCH_ARGS

# Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from a thread with a
# running loop unless told that this is deliberate.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
        if os.environ.get("RELJUDGE_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        yield browser
        browser.close()


class Watch:
    """What a page did that a test should know about: dialogs opened, script errors, console errors."""

    def __init__(self, page):
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("console", self._console)

    def _console(self, msg):
        # A 4xx answer (an invalid grade, a refused request) is logged by Chromium as a failed resource;
        # that is the app working. Script errors are what count.
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            self.errors.append(f"console: {msg.text}")

    def _dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def new_page(browser):
    """Open a page in a fresh browser context (its own cookies): returns (page, watch)."""
    contexts = []

    def make(width: int = 1366, height: int = 900, **options):
        """``options`` go to the browser context, e.g. ``is_mobile=True, has_touch=True`` for a phone."""
        context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US", **options)
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        return page, Watch(page)

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(exist_ok=True)

    def take(page, name: str, *, full_page: bool = False) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take


@pytest.fixture
def judged(db):
    """A campaign with two systems, four annotators' judgments and a lead: every page has something to show."""
    return knitwear_campaign()
