"""Response headers: a Content-Security-Policy that the pages (and Swagger UI) live with, and the public
exceptions to the API's 401 for anonymous requests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.data import in_browser

ROOT = Path(__file__).resolve().parents[2]


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.parametrize("url", ["/accounts/login/", "/", "/campaigns/demo/", "/campaigns/demo/judge/"])
def test_pages_send_a_strict_content_security_policy(client, world, url):
    if url != "/accounts/login/":
        client.force_login(world.lead)
    response = client.get(url)
    assert response.status_code == 200
    csp = policy(response)
    assert csp["script-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]


def test_rendered_pages_carry_no_inline_script_style_or_handler(client, world):
    client.force_login(world.lead)
    for url in ("/", "/campaigns/demo/", "/campaigns/demo/judge/", "/campaigns/demo/leaderboard/", "/accounts/token/"):
        html = client.get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), url
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=|javascript:", html, re.I), url


def test_templates_carry_no_inline_script_style_or_handler():
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), path
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", text, re.I), path


def test_swagger_ui_gets_its_own_narrow_relaxation(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200  # public, like the schema
    csp = policy(response)
    assert csp["script-src"] == ["'self'"]  # its start-up script is a file, not inline
    assert "'unsafe-inline'" in csp["style-src"] and "data:" in csp["img-src"]
    html = response.content.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)
    init = re.search(r'<script src="([^"]*\?script[^"]*)"', html).group(1).replace("&amp;", "&")
    script = client.get(init)
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_anonymous_api_gets_401_except_the_schema_and_its_docs(client, db):
    assert client.get("/api/campaigns/").status_code == 401
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
    api_docs = (ROOT / "docs" / "api.md").read_text()
    sentence = next(line for line in api_docs.splitlines() if "anonymous requests 401" in line)
    assert "/api/schema/" in sentence and "/api/docs/" in sentence


@pytest.mark.browser
def test_swagger_ui_renders_under_the_policy(live_server):
    def check(page):
        page.goto(live_server.url + "/api/docs/")
        page.wait_for_selector(".swagger-ui .info .title")
        page.wait_for_selector(".opblock-tag")
        assert "RelJudge API" in page.inner_text(".swagger-ui .info .title")

    assert in_browser(check) == []


@pytest.mark.browser
def test_login_and_lockout_pages_render_under_the_policy(live_server, lead):
    def check(page):
        for _ in range(5):
            page.goto(live_server.url + "/accounts/login/")
            page.fill("#id_username", "lead")
            page.fill("#id_password", "wrong")
            with page.expect_navigation():
                page.keyboard.press("Enter")
        assert "Too many failed logins" in page.inner_text("main")
        shots = Path(__file__).resolve().parents[1] / "browser" / "screenshots"
        shots.mkdir(exist_ok=True)
        page.screenshot(path=str(shots / "lockout.png"))

    errors = in_browser(check)
    # The lockout page itself is a 429, which Chromium logs as a failed resource; nothing else may show up.
    assert [e for e in errors if "Failed to load resource" not in e] == []
