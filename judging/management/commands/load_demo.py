"""Load a quickstart demo: users, the ``shop`` campaign (or the Korean ``shopping-ko``), three systems' runs and
some judgments."""

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from judging import demo
from judging.demo.loader import CATALOGUES, demo_catalogue


class Command(BaseCommand):
    help = (
        "Create the demo users and the demo campaign through the real importers, then print the URL and the "
        "logins: in English (--lang en, the default) the campaign 'shop' with lead, alice, bob, carol and admin; "
        "in Korean (--lang ko) the campaign 'shopping-ko' with jiwoo, minji, junho, seoyeon and admin. Running it "
        "again changes nothing; --reset deletes the demo campaign, rebuilds it and restores the demo users' "
        "passwords."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="delete the demo campaign with all its judgments and build it again; reset the demo passwords",
        )
        parser.add_argument(
            "--lang",
            choices=sorted(CATALOGUES),
            default="en",
            help="the demo's language: en (product search in English) or ko (Korean product search)",
        )

    def handle(self, *args: object, reset: bool, lang: str, **options: Any) -> None:
        cat = demo_catalogue(lang)
        summary = demo.demo_load(reset=reset, lang=lang)
        for line in summary.log:
            self.stdout.write(line)
        if summary.created:
            self.stdout.write(self.style.SUCCESS(f"Built the demo campaign {cat.SLUG!r} in {summary.seconds:.1f} s."))
        else:
            self.stdout.write(
                f"The demo campaign {cat.SLUG!r} already exists; nothing changed (use --reset to rebuild it)."
            )
        judged = (
            ", ".join(
                f"{name} {count}" + (f" ({summary.unsure_by[name]} unsure)" if summary.unsure_by.get(name) else "")
                for name, count in summary.judgments.items()
            )
            or "none"
        )
        self.stdout.write(
            f"\n{cat.NAME}\n"
            f"  {summary.queries} queries, {summary.documents} documents, "
            f"{len(summary.systems)} systems ({', '.join(summary.systems)})\n"
            f"  {summary.pairs} pairs in the pool, {summary.labelled} labelled, {summary.adjudicated} adjudicated\n"
            f"  judgments: {judged}; {summary.unsure} unsure in all\n"
        )
        # The quickstart and scripts/serve.sh serve on HOST:PORT (127.0.0.1:8000 unless told otherwise).
        url = f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}/"
        self.stdout.write(f"Open {url} and log in as:")
        width = max(map(len, cat.PASSWORDS))
        for username, password in cat.PASSWORDS.items():
            self.stdout.write(f"  {username:<{width}}  {password:<17}  {cat.ROLES[username]}")
        existing = [name for name in cat.PASSWORDS if name not in summary.users_created]
        if existing and not reset:
            again = "load_demo --reset" if lang == "en" else f"load_demo --lang {lang} --reset"
            self.stdout.write(
                f"({', '.join(existing)} existed already and kept their passwords; {again} restores the ones above.)"
            )
