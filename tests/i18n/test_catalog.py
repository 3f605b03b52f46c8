"""The Korean catalog is complete: every string the code marks has a Korean translation, none fuzzy.

The strings are extracted from the code as it is now (Django's makemessages, GNU gettext's xgettext,
into a copy of locale/), not read from the committed catalog, so a string marked in the code but never
brought into locale/ko/LC_MESSAGES/ by scripts/i18n.sh fails here too. The catalogs are stored once, as the
.po files Django compiles; a merge that left two versions of an entry is refused by the compiler.
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("django", "djangojs")
IGNORE = [".venv/*", "tests/*", "bench/*", "node_modules/*", "staticfiles/*", "static/vendor/*"]


def _label(message) -> str:
    msgid = message.id[0] if isinstance(message.id, tuple) else message.id
    return f"{message.context}|{msgid!r}" if message.context else repr(msgid)


def _translated(message) -> bool:
    strings = message.string if isinstance(message.string, tuple) else (message.string,)
    return all(s.strip() for s in strings) and bool(strings)


def _key(message):
    return message.context, message.id[0] if isinstance(message.id, tuple) else message.id


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> dict[str, Path]:
    """The strings of the code, extracted now by makemessages into a scratch copy of the project's locale dir."""
    if shutil.which("xgettext") is None:
        message = "GNU gettext (xgettext) is missing: apt-get install gettext (the catalog check needs it)"
        if os.environ.get("RELJUDGE_REQUIRE_BROWSER") == "1" or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    scratch = tmp_path_factory.mktemp("extract")
    # makemessages reads the current directory and writes into the locale/ beside what it reads: a scratch
    # directory of links to the project's code (no locale/) keeps the committed catalogs out of its reach.
    skip = {"locale", ".git", ".venv", "tests", "bench", "node_modules", "staticfiles"}
    for entry in ROOT.iterdir():
        if entry.name not in skip and not entry.name.endswith((".sqlite3", ".sqlite3-wal", ".sqlite3-shm")):
            (scratch / entry.name).symlink_to(entry)
    (scratch / "locale").mkdir()
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "config.test_settings"}
    ignores = [arg for pattern in IGNORE for arg in ("-i", pattern)]
    for domain in DOMAINS:
        subprocess.run(
            [sys.executable, "manage.py", "makemessages", "--symlinks", "-l", "ko", "-d", domain, "--no-location"]
            + ignores,
            cwd=scratch,
            env=env,
            check=True,
            capture_output=True,
        )
    return {domain: scratch / "locale" / "ko" / "LC_MESSAGES" / f"{domain}.po" for domain in DOMAINS}


@pytest.mark.parametrize("domain", DOMAINS)
def test_korean_catalog_translates_every_marked_string(extracted, domain):
    with extracted[domain].open("rb") as f:
        wanted = [m for m in read_po(f) if m.id]
    catalog_path = ROOT / "locale" / "ko" / "LC_MESSAGES" / f"{domain}.po"
    assert catalog_path.exists(), f"{catalog_path.relative_to(ROOT)} is missing: run scripts/i18n.sh"
    with catalog_path.open("rb") as f:
        catalog = {_key(m): m for m in read_po(f) if m.id}

    missing = [_label(m) for m in wanted if _key(m) not in catalog]
    empty = [_label(m) for m in wanted if _key(m) in catalog and not _translated(catalog[_key(m)])]
    fuzzy = [_label(m) for m in wanted if _key(m) in catalog and catalog[_key(m)].fuzzy]
    problems = (
        [f"not in the catalog: {x}" for x in missing]
        + [f"untranslated: {x}" for x in empty]
        + [f"fuzzy: {x}" for x in fuzzy]
    )
    assert not problems, (
        f"{catalog_path.relative_to(ROOT)}: {len(problems)} string(s) need a Korean translation "
        f"(run scripts/i18n.sh, then translate them in {catalog_path.relative_to(ROOT)}):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize("domain", DOMAINS)
def test_korean_catalog_keeps_placeholders_and_plural_forms(domain):
    catalog_path = ROOT / "locale" / "ko" / "LC_MESSAGES" / f"{domain}.po"
    with catalog_path.open("rb") as f:
        catalog = read_po(f, locale="ko")
    assert not catalog.fuzzy, "the catalog's header is marked fuzzy: its Plural-Forms would be ignored"
    assert catalog.num_plurals == 1  # Korean: one form for every count
    # Babel's checks: %(name)s placeholders of each translation match its msgid's.
    problems = [f"{_label(m)}: {e}" for m, errors in catalog.check() for e in errors]
    assert not problems, "\n".join(problems)


def test_each_catalog_is_stored_once_as_the_file_django_compiles():
    catalogs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "locale").rglob("*.po"))
    assert catalogs == ["locale/ko/LC_MESSAGES/django.po", "locale/ko/LC_MESSAGES/djangojs.po"]


COMPILER = runpy.run_path(str(ROOT / "scripts" / "compile_messages.py"))
HEADER = (
    'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Plural-Forms: nplurals=1; plural=0;\\n"\n\n'
)


def test_strings_added_on_two_branches_and_merged_side_by_side_compile(tmp_path):
    """What git's union merge makes of two branches that each appended a string: both entries, no blank line."""
    po = tmp_path / "locale" / "ko" / "LC_MESSAGES" / "django.po"
    po.parent.mkdir(parents=True)
    po.write_text(HEADER + 'msgid "Alpha"\nmsgstr "알파"\nmsgid "Beta"\nmsgstr "베타"\n', encoding="utf-8")
    assert COMPILER["compile_all"](root=tmp_path) == [po.with_suffix(".mo")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'msgid "Alpha"\nmsgstr "알파"\nmsgstr "알파!"\n',
            "django.po:8: a second msgstr in the entry that starts at line 6",
        ),
        (
            'msgid "Alpha"\nmsgstr "알파"\n\nmsgid "Beta"\nmsgstr "베타"\n\nmsgid "Alpha"\nmsgstr "알파!"\n',
            'django.po:12: msgid "Alpha" is already defined at line 6',
        ),
        (
            'msgctxt "grade"\nmsgid "Alpha"\nmsgstr "알파"\n\nmsgctxt "grade"\nmsgid "Alpha"\nmsgstr "알파!"\n',
            'django.po:10: msgid "Alpha" is already defined at line 6',
        ),
    ],
)
def test_a_merge_that_kept_two_versions_of_an_entry_is_refused(tmp_path, body, message):
    po = tmp_path / "locale" / "ko" / "LC_MESSAGES" / "django.po"
    po.parent.mkdir(parents=True)
    po.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(ValueError, match="broken translations") as refused:
        COMPILER["compile_all"](root=tmp_path)
    assert f"locale/ko/LC_MESSAGES/{message}" in str(refused.value)
    assert not po.with_suffix(".mo").exists()


def test_one_string_in_two_contexts_is_two_entries():
    text = (
        HEADER + 'msgctxt "a"\nmsgid "x"\nmsgstr "1"\n\nmsgctxt "b"\nmsgid "x"\nmsgstr "2"\n\nmsgid "x"\nmsgstr "3"\n'
    )
    assert COMPILER["doubled_entries"](text) == []


# One Korean word per English one: the catalog's most used word, never its synonym beside it.
KOREAN_WORDS = {"query": ("질의", "쿼리"), "annotator": ("판정자", "평가자")}


@pytest.mark.parametrize("english", sorted(KOREAN_WORDS))
def test_korean_catalog_uses_one_word_for(english):
    word, synonym = KOREAN_WORDS[english]
    found = []
    for domain in DOMAINS:
        with (ROOT / "locale" / "ko" / "LC_MESSAGES" / f"{domain}.po").open("rb") as f:
            for message in read_po(f):
                strings = message.string if isinstance(message.string, tuple) else (message.string,)
                found += [_label(message) for s in strings if synonym in s]
    demo = ROOT / "judging" / "demo" / "catalogue_ko.py"
    found += [f"{demo.name}:{n}" for n, line in enumerate(demo.read_text().splitlines(), 1) if synonym in line]
    assert not found, f"{synonym!r} where the Korean pages say {word!r}: {found}"
