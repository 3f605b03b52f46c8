"""Document text shown to annotators: readable, and always escaped."""

import re

import pytest
from django.template import Context, Template
from django.template.loader import render_to_string
from django.utils import translation

from judging.templatetags.judging_text import plaintext


def test_plaintext_drops_tags_keeps_breaks_and_decodes_entities():
    assert plaintext("Hand-knitted in Donegal &amp; finished by hand.<br>Pure wool") == (
        "Hand-knitted in Donegal & finished by hand.\nPure wool"
    )
    assert plaintext("<p>one</p><p>two</p>") == "one\ntwo\n"
    assert plaintext(None) == ""


def test_plaintext_output_is_escaped_in_templates():
    out = Template("{% load judging_text %}{{ text|plaintext|linebreaks }}").render(
        Context({"text": "&lt;script&gt;alert(1)&lt;/script&gt;<script>alert(2)</script>"})
    )
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


# --------------------------------------------------------------------------- markdown


def test_markdown_renders_headings_lists_emphasis_links_and_quotes():
    from judging.templatetags.judging_text import markdown

    html = markdown(
        "# Relevant\n\n- a **size** match\n- *colour* too\n\n> waterproof jacket -> 2\n\n[more](https://e.org/x)"
    )
    assert "<h3>Relevant</h3>" in html  # shifted below the page's own h1/h2
    assert "<li>a <strong>size</strong> match</li>" in html and "<em>colour</em>" in html
    assert "<blockquote>" in html
    assert '<a href="https://e.org/x" rel="noopener noreferrer nofollow">more</a>' in html


def test_markdown_headings_never_skip_a_level_whichever_level_the_text_starts_at():
    """A lead who starts at "##" (as the demos do) gets the same outline as one who starts at "#": the text's
    highest heading is an h3 under the page's h2, the next an h4; axe-core's heading-order holds."""
    from judging.templatetags.judging_text import markdown

    for top in ("#", "##", "###"):
        html = markdown(f"{top} Grades\n\n{top}# 2 Relevant\n\ntext\n\n{top} Doubt")
        assert "<h3>Grades</h3>" in html and "<h4>2 Relevant</h4>" in html and "<h3>Doubt</h3>" in html
    assert "<h4>Grades</h4>" in markdown("## Grades", 4)  # |markdown:4 under an h3
    assert "<h6>Deep</h6>" in markdown("# Top\n\n###### Deep")  # capped at h6


def test_markdown_plain_text_keeps_its_lines():
    from judging.templatetags.judging_text import markdown

    assert markdown("line one\nline two\n\nnext") == "<p>line one<br>\nline two</p>\n<p>next</p>\n"


@pytest.mark.parametrize(
    "payload",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "![x](javascript:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "<iframe src=https://evil.example></iframe>",
    ],
)
def test_markdown_neutralises_script_payloads(payload):
    from html.parser import HTMLParser

    from judging.templatetags.judging_text import markdown

    elements = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            elements.append((tag, dict(attrs)))

    Collect().feed(markdown(payload))
    # Whatever survives as text is escaped; no element may run script or load a page.
    assert {tag for tag, _ in elements} <= {"p", "a", "img", "br"}
    for _tag, attrs in elements:
        assert not any(name.startswith("on") for name in attrs)
        for name in ("href", "src"):
            assert not attrs.get(name, "").lower().startswith(("javascript:", "data:"))


@pytest.mark.parametrize(
    ("language", "verdict", "percent", "shown"),
    [
        ("en", "open", 0, "open · holds 0%"),
        ("en", "likely", 99, "likely · holds 99%"),
        ("ko", "open", 0, "미정 · 유지 확률 0%"),
        ("ko", "likely", 99, "유력 · 유지 확률 99%"),
    ],
)
def test_verdict_badge_says_what_the_percent_is(language, verdict, percent, shown):
    """'open · 0%' read as a contradiction (issue 42): the figure is the probability that the order holds."""
    with translation.override(language):
        html = render_to_string("judging/_verdict_badge.html", {"verdict": verdict, "percent": percent, "pairs": 3})
    assert re.sub(r"<[^>]+>", "", html).strip() == shown
