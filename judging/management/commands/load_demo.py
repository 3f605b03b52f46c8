"""Load the quickstart demo: users, the ``shop`` campaign, three systems' runs and some judgments."""

import os

from django.core.management.base import BaseCommand

from judging import demo


class Command(BaseCommand):
    help = (
        "Create the demo users (lead, alice, bob, carol, admin) and the demo campaign 'shop' through the real "
        "importers, then print the URL and the logins. Running it again changes nothing; --reset deletes the "
        "demo campaign, rebuilds it and restores the demo users' passwords."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--reset",
            action="store_true",
            help="delete the demo campaign with all its judgments and build it again; reset the demo passwords",
        )

    def handle(self, *args, reset, **options):
        summary = demo.demo_load(reset=reset)
        for line in summary.log:
            self.stdout.write(line)
        if summary.created:
            self.stdout.write(self.style.SUCCESS(f"Built the demo campaign {demo.SLUG!r} in {summary.seconds:.1f} s."))
        else:
            self.stdout.write(
                f"The demo campaign {demo.SLUG!r} already exists; nothing changed (use --reset to rebuild it)."
            )
        judged = (
            ", ".join(
                f"{name} {count}" + (f" ({summary.unsure_by[name]} unsure)" if summary.unsure_by.get(name) else "")
                for name, count in summary.judgments.items()
            )
            or "none"
        )
        self.stdout.write(
            f"\n{demo.NAME}\n"
            f"  {summary.queries} queries, {summary.documents} documents, "
            f"{len(summary.systems)} systems ({', '.join(summary.systems)})\n"
            f"  {summary.pairs} pairs in the pool, {summary.labelled} labelled, {summary.adjudicated} adjudicated\n"
            f"  judgments: {judged}; {summary.unsure} unsure in all\n"
        )
        # The quickstart and scripts/serve.sh serve on HOST:PORT (127.0.0.1:8000 unless told otherwise).
        url = f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}/"
        self.stdout.write(f"Open {url} and log in as:")
        width = max(map(len, demo.PASSWORDS))
        for username, password in demo.PASSWORDS.items():
            self.stdout.write(f"  {username:<{width}}  {password:<16}  {demo.ROLES[username]}")
        existing = [name for name in demo.PASSWORDS if name not in summary.users_created]
        if existing and not reset:
            self.stdout.write(
                f"({', '.join(existing)} existed already and kept their passwords; "
                "load_demo --reset restores the ones above.)"
            )
