"""Compile every translation catalog (locale/*/LC_MESSAGES/*.po) into the .mo file Django reads.

Run by scripts/setup.sh and, for a test run without setup, by tests/conftest.py. Django's own
`compilemessages` needs GNU gettext's msgfmt, which a fresh machine with only Python lacks; Babel (a pinned
runtime dependency) reads and writes the same files in pure Python. A catalog is compiled again only when
its .po is newer than its .mo. Fuzzy entries are left out (Django would show them otherwise), and a catalog
whose translations do not keep their placeholders (python-format) is refused, naming the entry.

    python scripts/compile_messages.py [--force]
"""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent


def compile_all(*, force: bool = False) -> list[Path]:
    """Compile the stale catalogs; returns the .mo files written. Raises ValueError on a broken catalog."""
    written = []
    for po in sorted((ROOT / "locale").glob("*/LC_MESSAGES/*.po")):
        mo = po.with_suffix(".mo")
        if not force and mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        with po.open("rb") as f:
            catalog = read_po(f, locale=po.parent.parent.name, abort_invalid=True)
        problems = [
            f"{po.relative_to(ROOT)}:{message.lineno}: {message.id!r}: {error}"
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
