"""The browser tests' campaign ("Knitwear search": two systems, a lead, two annotators' judgments) and login."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model

from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    queries_import,
    run_import,
)

GUIDELINES = """# What counts

Judge each product against **what the searcher wanted**:

- the exact item: *highly relevant*
- a related item: partially relevant

> "wool sweater" -> a merino crew-neck is a 2; wool socks are a 1.

More in the [style guide](https://example.org/guide). <script>window.__xss = 1</script>
[bad](javascript:window.__xss=2)
"""
TOPICS = (
    "q1\twool knit sweater\tA warm sweater knitted from wool; *cardigans count*, cotton does not.\n"
    "q2\train jacket\tA waterproof jacket for walking in the rain.\n"
)
LONG = "A soft merino knit in six colours, knitted in Donegal and finished by hand. " * 14
DOCS = (
    '{"docid": "d1", "title": "Merino wool crew-neck sweater", "text": "' + LONG + '"}\n'
    '{"docid": "d2", "title": "Cotton T-shirt", "text": "' + "Light, breathable cotton for summer. " * 10 + '"}\n'
    '{"docid": "d3", "title": "Chunky cable-knit wool cardigan", "text": "' + "Hand-knitted wool. " * 30 + '"}\n'
    '{"docid": "d4", "title": "Packable rain shell", "text": "' + "A waterproof shell. " * 25 + '"}\n'
)
RUN_A = "q1 Q0 d1 1 9 alpha\nq1 Q0 d3 2 8 alpha\nq1 Q0 d2 3 7 alpha\nq2 Q0 d4 1 9 alpha\nq2 Q0 d2 2 8 alpha\n"
RUN_B = "q1 Q0 d2 1 9 beta-with-a-long-system-name\nq1 Q0 d1 2 8 beta-with-a-long-system-name\n"
RUN_B += "q2 Q0 d2 1 9 beta-with-a-long-system-name\nq2 Q0 d4 2 8 beta-with-a-long-system-name\n"


def log_in(page, base: str, username: str, password: str, *, then: str = "/") -> None:
    page.goto(base + then)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(".*" + re.escape(then) + "$"))


def knitwear_campaign():
    """A campaign with two systems, four annotators' judgments and a lead: every page has something to show."""
    User = get_user_model()
    campaign = campaign_create(
        slug="knitwear", name="Knitwear search", pool_depth=3, redundancy=3, guidelines=GUIDELINES
    )
    lead = User.objects.create_user("lena", password="lena-pw-secret-1")
    membership_add(campaign=campaign, user=lead, role="lead")
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="docs.jsonl")
    run_import(campaign=campaign, data=RUN_A.encode(), filename="alpha.run")
    run_import(campaign=campaign, data=RUN_B.encode(), filename="beta.run")
    people = []
    for name in ("ann", "bob"):
        user = User.objects.create_user(name, password=f"{name}-pw-secret-1")
        membership_add(campaign=campaign, user=user, role="annotator")
        people.append(user)
    # Added by the lead, link not used yet: the members page's widest row (e-mail, "no password yet", New link).
    dora = User.objects.create_user("dora", email="dora.knitwear@example.org", password=None)
    membership_add(campaign=campaign, user=dora, role="annotator")
    pairs = list(campaign.pairs.filter(pooled=True).order_by("id"))
    for i, pair in enumerate(pairs[:4]):
        judgment_record(pair=pair, annotator=people[0], grade=i % 3, seconds_spent=5)
    judgment_record(pair=pairs[4], annotator=people[1], grade=None, unsure=True, note="not sure", seconds_spent=9)
    return campaign
