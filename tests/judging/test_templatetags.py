"""Document text shown to annotators: readable, and always escaped."""

from django.template import Context, Template

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
