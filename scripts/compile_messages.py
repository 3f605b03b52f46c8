"""Compile every translation catalog (locale/*/LC_MESSAGES/*.po) into the .mo file Django reads.

Run by scripts/setup.sh and, for a test run without setup, by tests/conftest.py. Django's own
`compilemessages` needs GNU gettext's msgfmt, which a fresh machine with only Python lacks; Babel (a pinned
runtime dependency) reads and writes the same files in pure Python. A catalog is compiled again only when
its .po is newer than its .mo. Fuzzy entries are left out (Django would show them otherwise). A catalog is
refused, naming the line, when a translation does not keep its placeholders (python-format), or when a string
appears twice or has two translations: git merges the catalogs line by line, keeping both sides' lines
(.gitattributes), which is right for strings added on two branches, and this check catches the rare merge that
kept two versions of one entry (Babel would silently keep one of them).

    python scripts/compile_messages.py [--force]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent


_KEYWORD = re.compile(r"(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?) ")


def doubled_entries(text: str) -> list[tuple[int, str]]:
    """(line, what) for every string defined twice and every keyword given twice within one entry of a .po text.

    An entry is its keyword lines (msgctxt, msgid, msgid_plural, msgstr, msgstr[n]) with their continuation
    lines; comments and blank lines separate entries. Obsolete entries (#~) are comments here.
    """
    problems: list[tuple[int, str]] = []
    seen: dict[tuple[str, str], int] = {}
    entry: dict[str, list[str]] = {}
    keyword = None
    start = 0

    def close() -> None:
        if entry and not any(word.startswith("msgstr") for word in entry):
            problems.append((start, "an entry without msgstr"))
        if "msgid" in entry:
            key = ("".join(entry.get("msgctxt", [])), "".join(entry["msgid"]))
            if key in seen:
                problems.append((start, f"msgid {key[1]} is already defined at line {seen[key]}"))
            else:
                seen[key] = start

    for lineno, line in enumerate(text.splitlines(), 1):
        match = _KEYWORD.match(line)
        if match:
            word = match.group(1)
            if word == "msgctxt" or (word == "msgid" and keyword != "msgctxt"):
                close()
                entry, start = {}, lineno
            if word in entry:
                problems.append((lineno, f"a second {word} in the entry that starts at line {start}"))
            entry[word] = [line[match.end() :]]
            keyword = word
        elif line.startswith('"') and keyword is not None:
            entry[keyword].append(line)
        else:
            keyword = None if not line.strip() or line.startswith("#") else keyword
    close()
    return problems


def compile_all(*, force: bool = False, root: Path = ROOT) -> list[Path]:
    """Compile the stale catalogs; returns the .mo files written. Raises ValueError on a broken catalog."""
    written = []
    for po in sorted((root / "locale").glob("*/LC_MESSAGES/*.po")):
        mo = po.with_suffix(".mo")
        if not force and mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        name = po.relative_to(root)
        problems = [f"{name}:{line}: {what}" for line, what in doubled_entries(po.read_text(encoding="utf-8"))]
        with po.open("rb") as f:
            catalog = read_po(f, locale=po.parent.parent.name, abort_invalid=True)
        problems += [
            f"{name}:{message.lineno}: {message.id!r}: {error}"
            for message, errors in catalog.check()
            for error in errors
        ]
        if problems:
            raise ValueError("broken translations:\n" + "\n".join(problems))
        tmp = mo.with_suffix(".mo.tmp")
        with tmp.open("wb") as f:
            write_mo(f, catalog, use_fuzzy=False)
        tmp.replace(mo)  # never a half-written catalog for a server to read
        written.append(mo)
    return written


if __name__ == "__main__":
    try:
        done = compile_all(force="--force" in sys.argv[1:])
    except ValueError as exc:
        sys.exit(str(exc))
    for mo in done:
        print(f"compiled {mo.relative_to(ROOT)}")
