"""The management commands (create, import, export, scores, members, demo), as a lead runs them."""

import io
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command, get_commands
from rest_framework.test import APIClient

from judging.models import Campaign, Document, Judgment, Membership, Pair, Query, System
from tests.data import DOCS, RUN_BM25, RUN_DENSE, TOPICS

User = get_user_model()


def run(*args):
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_import_summaries_agree_in_number_and_a_refusal_names_the_flag(campaign, write):
    run("import_topics", "demo", write("t.tsv", TOPICS))
    out = run("import_run", "demo", write("one.run", "q1 Q0 d1 1 2.0 solo\n"))
    assert "one.run: 1 ranking added, 0 updated, 0 unchanged" in out and "1 pair added to the pool" in out
    out = run("import_run", "demo", write("one.run", "q1 Q0 d1 1 2.0 solo\n"))
    assert "0 rankings added, 0 updated, 1 unchanged" in out and "no new pairs for the pool" in out
    with pytest.raises(CommandError) as refused:
        run("import_run", "demo", write("two.run", "q1 Q0 d2 1 2.0 solo\n"))
    message = str(refused.value)
    assert "system 'solo' already has a different run in campaign 'demo'; pass --replace to overwrite it" in message
    assert "replace=true" not in message and "tick" not in message


def test_create_campaign_with_scale_and_depth(db):
    out = run("create_campaign", "news", "--name", "News", "--grades", "0,1,2,3", "--pool-depth", "20")
    c = Campaign.objects.get(slug="news")
    assert (c.name, c.pool_depth) == ("News", 20)
    assert list(c.grades.values_list("value", flat=True)) == [0, 1, 2, 3]
    assert "created campaign 'news'" in out


def test_create_campaign_twice_is_an_error(db):
    run("create_campaign", "news")
    with pytest.raises(CommandError, match="already exists"):
        run("create_campaign", "news")


def test_quickstart_style_pipeline(campaign, write, annotator):
    assert "2 queries added" in run("import_topics", "demo", write("t.tsv", TOPICS))
    assert "4 documents added" in run("import_docs", "demo", write("d.jsonl", DOCS))
    out = run("import_run", "demo", write("bm25.run", RUN_BM25))
    assert "systems: bm25" in out and "4 pairs added to the pool" in out
    out = run("import_run", "demo", write("dense.run", RUN_DENSE))
    assert "1 pair added to the pool" in out
    out = run("import_qrels", "demo", write("q.qrels", "q1 0 d1 2\nq1 0 d3 1\nq2 0 d4 0\n"), "--annotator", "ann")
    assert "3 judgments added" in out
    path = write("out.qrels", "")
    call_command("export_qrels", "demo", "--output", path, stderr=io.StringIO())
    with open(path) as fh:
        assert fh.read() == "q1 0 d1 2\nq1 0 d3 1\nq2 0 d4 0\n"
    assert Judgment.objects.count() == 3 and System.objects.count() == 2


def test_import_run_stubs_counted_in_summary(campaign, write):
    out = run("import_run", "demo", write("bm25.run", RUN_BM25))
    assert "stubs created: 2 queries, 4 documents" in out


@pytest.mark.parametrize(
    ("command", "filename", "content", "expected"),
    [
        ("import_run", "r.run", "q1 Q0 d1 1 2.0\n", "r.run, line 1"),
        ("import_run", "r.run", "q1 Q0 d1 x 2.0 t\n", "field 'rank'"),
        ("import_run", "r.run", "q1 Q0 d1 1 abc t\n", "field 'score'"),
        ("import_run", "r.run", "q1 Q0 d1 1 2 t\nq1 Q0 d1 2 1 t\n", "line 2, field 'docid'"),
        ("import_run", "r.run", b"q1 Q0 d1 1 2 t\nq1 Q0 \xff 2 1 t\n", "line 2"),
        ("import_run", "r.run", "", "empty"),
        ("import_topics", "t.tsv", "q1\n", "t.tsv, line 1"),
        ("import_docs", "d.jsonl", '{"docid": "d1", "text": "a"}\n{"docid": "d2"\n', "d.jsonl, line 2"),
        ("import_docs", "d.jsonl", '{"docid": "d1"}\n', "field 'text'"),
        ("import_qrels", "q.qrels", "q1 0 d1 9\n", "q.qrels, line 1, field 'label'"),
        ("import_qrels", "q.qrels", "q1 0 d1\n", "q.qrels, line 1"),
    ],
)
def test_bad_input_names_file_line_field_and_writes_nothing(campaign, write, command, filename, content, expected):
    args = [command, "demo", write(filename, content)]
    if command == "import_qrels":
        args += ["--annotator", "ann"]
    with pytest.raises(CommandError) as exc:
        run(*args)
    assert expected in str(exc.value)
    assert "nothing was imported" in str(exc.value)
    counts = [m.objects.count() for m in (Query, Document, System, Pair, Judgment)]
    assert counts == [0, 0, 0, 0, 0]


def test_unknown_campaign_is_an_error(db, write):
    with pytest.raises(CommandError, match="unknown campaign 'nope'"):
        run("import_run", "nope", write("r.run", RUN_BM25))


def test_missing_file_is_an_error(campaign):
    with pytest.raises(CommandError, match="no such file"):
        run("import_run", "demo", "/nonexistent/file.run")


def test_import_qrels_user_outside_the_campaign_refused(campaign, write, make_user):
    # An unknown name becomes a source account (tests/security/test_qrels_import.py); a real user
    # who is not a member cannot have labels recorded for them.
    make_user("ghost")
    with pytest.raises(CommandError, match="'ghost' is not a member of campaign 'demo'"):
        run("import_qrels", "demo", write("q.qrels", "q1 0 d1 1\n"), "--annotator", "ghost")


def test_add_member_roles(campaign, make_user):
    make_user("newbie")
    run("add_member", "demo", "newbie", "--role", "lead")
    assert Membership.objects.get(user__username="newbie").role == "lead"
    with pytest.raises(CommandError, match="no user named"):
        run("add_member", "demo", "ghost", "--role", "annotator")


# --------------------------------------------------------------------------- the README's walk-through

ROOT = Path(__file__).resolve().parents[2]


def walkthrough() -> tuple[str, list[str]]:
    """The README's "Run your first campaign": the shell block that makes the example files, and every
    command-line step of its table, in order (code spans of the table's last column)."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Run your first campaign", 1)[1]
    section = section.split("\n## ", 1)[0]
    files = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    steps = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| step", "|---")):
            steps += re.findall(r"`([^`]+)`", line.rstrip(" |").rsplit(" | ", 1)[-1])
    return files, steps


def test_readme_walkthrough_runs_as_written(db, tmp_path, monkeypatch, make_user):
    """Every command of the walk-through, exactly as the README prints it, from the example files it makes."""
    files, steps = walkthrough()
    subprocess.run(["bash", "-euc", files], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    commands = get_commands()
    ran, posted = [], False
    for i, step in enumerate(steps):
        words = shlex.split(step.removeprefix("scripts/manage "))
        if words[0] in commands:
            output = run(*words)
            ran.append(words[0])
            if words[0] == "add_member":
                link = re.search(r"https?://\S+/accounts/set-password/\S+/", output).group(0)
                assert link.startswith("http://127.0.0.1:8000/")
                dave = User.objects.get(username="dave")
                assert not dave.has_usable_password() and dave.email == "dave@example.org"
        elif step.startswith("POST /api/judgments/"):
            # The annotator's judgment, as the README's API call sends it.
            client = APIClient()
            client.force_authenticate(User.objects.get(username="dave"))
            response = client.post("/api/judgments/", json.loads(steps[i + 1]), format="json")
            assert response.status_code == 201, response.content
            posted = True
    assert ran == [
        "create_campaign",
        "import_topics",
        "import_docs",
        "import_run",
        "import_run",
        "add_member",
        "scores",
        "export_qrels",
    ]
    assert posted
    campaign = Campaign.objects.get(slug="shoes")
    assert campaign.pairs.filter(pooled=True).count() == 5 and campaign.systems.count() == 2
    assert (tmp_path / "shoes.qrels").read_text() == "t1 0 p1 2\n"


@pytest.mark.slow
def test_scripts_manage_links_lead_where_the_quickstart_serves(tmp_path):
    """After `PORT=8201 bash scripts/quickstart.sh`, scripts/manage in another shell (no PORT there) prints
    add_member --create's link on port 8201: the quickstart wrote its address and scripts/manage reads it."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        message = f"{ROOT / '.venv'} is missing (scripts/quickstart.sh or scripts/setup.sh makes it)"
        if os.environ.get("RELJUDGE_REQUIRE_BROWSER") == "1" or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    served = tmp_path / "quickstart.env"
    # The lines scripts/quickstart.sh writes, run as it runs them (HOST and PORT as that shell had them).
    script = (ROOT / "scripts" / "quickstart.sh").read_text()
    block = script[script.index("served_on=$HOST") : script.index("exec bash scripts/serve.sh")]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    subprocess.run(
        ["bash", "-euc", block],
        env=env | {"HOST": "0.0.0.0", "PORT": "8201", "RELJUDGE_QUICKSTART_ENV": str(served)},
        check=True,
    )
    assert "RELJUDGE_BASE_URL=http://127.0.0.1:8201\n" in served.read_text()

    env |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "RELJUDGE_QUICKSTART_ENV": str(served)}

    def manage(*args, **extra):
        result = subprocess.run(
            [str(ROOT / "scripts" / "manage"), *args], cwd=tmp_path, env=env | extra, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    manage("migrate", "-v", "0")
    manage("create_campaign", "shoes", "--name", "Shoes")
    printed = manage("add_member", "shoes", "dave", "--role", "annotator", "--create")
    assert re.search(r"http://127\.0\.0\.1:8201/accounts/set-password/\S+/", printed), printed
    # What this shell says wins over the file: its own RELJUDGE_BASE_URL, or its HOST and PORT.
    printed = manage(
        "add_member", "shoes", "erin", "--role", "annotator", "--create", RELJUDGE_BASE_URL="https://judge.example.org"
    )
    assert "https://judge.example.org/accounts/set-password/" in printed
    printed = manage("add_member", "shoes", "fay", "--role", "annotator", "--create", PORT="9000")
    assert "http://127.0.0.1:9000/accounts/set-password/" in printed


def test_scripts_manage_runs_from_a_fresh_shell(tmp_path):
    """scripts/manage needs nothing exported: not the settings module, not a secret key, not an activated venv."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        message = f"{ROOT / '.venv'} is missing (scripts/quickstart.sh or scripts/setup.sh makes it)"
        if os.environ.get("RELJUDGE_REQUIRE_BROWSER") == "1" or os.environ.get("CI"):
            pytest.fail(message)  # .ci/run makes it first: there this test must run
        pytest.skip(message)
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    result = subprocess.run(
        [str(ROOT / "scripts" / "manage"), "check"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout
