"""judging.runtime: every per-process cache is registered, process_caches_clear empties each, work after the answer
runs in a thread that logs and closes its connections (or inline in tests), and ARCHITECTURE.md lists the registry."""

from __future__ import annotations

import ast
import logging
import threading
from collections import OrderedDict
from pathlib import Path

import pytest

from judging import runtime, scoring
from judging.api.leaderboard_text import TextLRU

ROOT = Path(__file__).resolve().parents[2]

# Module-level containers that code of their module changes at run time but that are not caches, each with why.
# Containers only read after import (constants: vocabularies, field lists, url patterns) need no entry.
NOT_CACHES = {
    # the registry of job kinds: filled by the @runs decorator as the kinds' modules are imported, then only read
    "judging/jobs/runner.py:_RUNNERS",
    # the registry itself
    "judging/runtime.py:_REGISTRY",
    # a log-once flag (at most the one folder of RELJUDGE_CUBE_DIR); cube_file imports nothing of judging, so that
    # other processes load it alone (tests/judging/test_grid_file.py), and so cannot register it
    "judging/scoring/cube_file.py:_REFUSED_FOLDERS",
    # a counter that numbers the fitted label models: it must never go back, so it is never cleared
    "judging/scoring/trust/final.py:_VERSION",
}

MUTATING_METHODS = {
    "add",
    "append",
    "clear",
    "discard",
    "extend",
    "insert",
    "move_to_end",
    "pop",
    "popitem",
    "put",
    "put_many",
    "remove",
    "setdefault",
    "update",
}
CONTAINER_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter", "bytearray", "TextLRU"}


def _is_container(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in CONTAINER_CALLS
    return False


def _is_registered(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == "runtime"
        and value.func.attr in ("keep", "hold")
    )


def _mutated_in_functions(tree: ast.Module) -> set[str]:
    """Names changed inside a function: name[...] = / += / del, or name.<mutating method>(...)."""
    names: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        for node in ast.walk(fn):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign | ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    names.add(t.value.id)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATING_METHODS
                and isinstance(node.func.value, ast.Name)
            ):
                names.add(node.func.value.id)
    return names


def _unregistered_caches(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    mutated = _mutated_in_functions(tree)
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _is_registered(value) or not _is_container(value):
            continue
        for t in targets:
            if isinstance(t, ast.Name) and t.id in mutated and f"{where}:{t.id}" not in NOT_CACHES:
                found.append(f"{where}:{t.id}")
    return found


def test_every_module_level_cache_of_judging_is_registered():
    modules = [p for p in sorted((ROOT / "judging").rglob("*.py")) if "migrations" not in p.parts]
    assert len(modules) > 100
    found = []
    for path in modules:
        found += _unregistered_caches(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert found == [], "register these with judging.runtime.keep (or hold), or say in NOT_CACHES why not"


def test_the_cache_check_finds_an_unregistered_cache_and_passes_constants_and_registered_ones():
    source = """
from collections import OrderedDict
_SEEN = {}
_LRU: OrderedDict = OrderedDict()
_NAMES = {"a": 1}
_KEPT = runtime.keep("x.kept", {}, bound=4, invalidated_by="never")
COUNT = [0]

def look(key):
    _SEEN[key] = 1
    _LRU.move_to_end(key)
    _KEPT[key] = _NAMES[key]
    COUNT[0] += 1
"""
    assert _unregistered_caches(source, "m.py") == ["m.py:_SEEN", "m.py:_LRU", "m.py:COUNT"]


def test_the_registry_holds_the_caches_named_in_the_issue():
    runtime.load_all()
    names = {k.name for k in runtime.registered()}
    assert {
        "scoring.scores",
        "scoring.labels_versions",
        "scoring.run_cubes",
        "scoring.hybrid_fits",
        "queue.complete_prefixes",
        "queue.own_prefixes",
        "progress.done_counts",
        "campaigns.pool_sizes",
        "trust.results",
        "trust.per_query_parts",
        "api.series_texts",
        "api.row_texts",
    } <= names
    for k in runtime.registered():
        assert k.invalidated_by and (k.bound is not None or k.grows_with), k.name
        assert k.module.startswith("judging."), k.name


def _fill(store: object) -> None:
    value = (None, None, None, None, 1)  # a series entry's size is its fifth item
    if isinstance(store, TextLRU):
        store.put(("runtime-test",), b"x" * 100)
    elif isinstance(store, set):
        store.add(("runtime-test",))
    else:
        assert isinstance(store, dict | OrderedDict), type(store)
        store[("runtime-test",)] = value


def test_process_caches_clear_empties_every_registered_cache_and_keeps_the_rest():
    runtime.load_all()
    entries = runtime.registered()
    caches = [k for k in entries if k.clear is not None]
    held = [k for k in entries if k.clear is None]
    assert len(caches) >= 25 and held
    for k in entries:
        _fill(k.store)
    assert all(k.size() > 0 for k in entries)
    try:
        scoring.process_caches_clear()
        assert {k.name: k.size() for k in caches if k.size()} == {}
        assert all(k.size() > 0 for k in held)  # work in flight is never dropped
    finally:
        for k in held:
            k.store.discard(("runtime-test",)) if isinstance(k.store, set) else k.store.pop(("runtime-test",), None)


def test_a_group_is_cleared_alone():
    from judging.scoring.trust.store import caches_clear

    _SCORES = runtime.kept("scoring.scores").store
    _RESULTS = runtime.kept("trust.results").store
    _SCORES["runtime-test"] = object()
    _RESULTS[("runtime-test",)] = object()
    caches_clear()  # the trust group: the score tables stay, as before the registry
    assert "runtime-test" in _SCORES and ("runtime-test",) not in _RESULTS
    scoring.process_caches_clear()
    assert "runtime-test" not in _SCORES


def test_keep_needs_a_bound_and_one_module_per_name():
    with pytest.raises(ValueError, match="needs a bound or what it grows with"):
        runtime.keep("test.unbounded", {}, bound=None, invalidated_by="x")
    runtime.keep("test.once", {}, bound=1, invalidated_by="x")
    runtime.keep("test.once", {}, bound=1, invalidated_by="x")  # the same module again (a reload)
    with pytest.raises(ValueError, match="'scoring.scores' is kept by judging.scoring.cache already"):
        runtime.keep("scoring.scores", {}, bound=1, invalidated_by="x")
    runtime._REGISTRY.pop("test.once")


def test_later_runs_inline_when_the_setting_says_so(settings):
    settings.RELJUDGE_BACKGROUND_INLINE = True
    ran = []
    runtime.later(lambda a: ran.append((a, threading.current_thread().name)), 7, name="inline-test")
    assert ran == [(7, threading.current_thread().name)]
    with pytest.raises(ZeroDivisionError):  # inline, a failure is the caller's
        runtime.later(lambda: 1 / 0)


def test_later_runs_in_a_named_thread_that_logs_its_failure_and_closes_its_connections(settings, monkeypatch, caplog):
    settings.RELJUDGE_BACKGROUND_INLINE = False
    closed = []
    monkeypatch.setattr(runtime.connections, "close_all", lambda: closed.append(threading.current_thread().name))
    done = threading.Event()
    names = []

    def work(x):
        names.append((x, threading.current_thread().name))
        done.set()

    runtime.later(work, 3, name="later-test")
    assert done.wait(10)
    for thread in threading.enumerate():
        if thread.name in ("later-test", "later-failing"):
            thread.join(10)
    assert names == [(3, "later-test")] and closed == ["later-test"]

    def failing():
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="judging.runtime"):
        runtime.later(failing, name="later-failing")
        for thread in threading.enumerate():
            if thread.name == "later-failing":
                thread.join(10)
    assert closed == ["later-test", "later-failing"]
    assert "background work later-failing failed" in caplog.text and "boom" in caplog.text


def test_architecture_lists_what_a_worker_keeps():
    runtime.load_all()
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "## What a worker keeps" in text
    assert runtime.table_markdown() in text, "regenerate it: python manage.py caches --markdown"


def test_the_caches_command_lists_each_cache_with_its_size_and_bound():
    from io import StringIO

    from django.core.management import call_command

    _SCORES = runtime.kept("scoring.scores").store
    _SCORES["runtime-test"] = object()
    out = StringIO()
    call_command("caches", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()}
    assert set(lines) == {k.name for k in runtime.registered()}
    assert lines["scoring.scores"].split()[1] == "1"
    assert "of one per score table (campaign x parameter set)" in lines["scoring.scores"]
    assert "of 16 entries" in lines["scoring.labels_versions"] and "of 64 MB" in lines["api.series_texts"]
    assert "not a cache" in lines["jobs.model_endpoints"]
    _SCORES.clear()


def test_the_worker_page_shows_staff_and_leads_each_cache_with_its_size_and_refuses_annotators(
    client, campaign, lead, annotator, make_user
):
    """The worker page lists every registered cache with its size in the process that answered, to staff and to
    leads of any campaign, in both languages; an annotator gets 403 and a visitor the login page."""
    import re

    from django.urls import reverse

    url = reverse("judging:worker")
    assert client.get(url).status_code == 302  # to the login page
    scores = runtime.kept("scoring.scores").store
    scores["worker-page-test"] = object()
    try:
        for who in (lead, make_user("staff", is_staff=True)):
            client.force_login(who)
            page = client.get(url)
            assert page.status_code == 200
            html = page.content.decode()
            assert set(re.findall(r'<td class="mono">([a-z_]+\.[a-z_]+)', html)) == {
                k.name for k in runtime.registered()
            }
            row = html[html.index("scoring.scores") :]
            assert re.search(r'<td class="num">1</td>', row[:400]), row[:400]
            assert page["Cache-Control"].startswith("max-age=0")
        client.force_login(lead)
        korean = client.get(url, HTTP_ACCEPT_LANGUAGE="ko")
        assert "이 워커가 보관하는 것" in korean.content.decode()
        client.force_login(annotator)
        refused = client.get(url)
        assert refused.status_code == 403
        assert "scoring.scores" not in refused.content.decode()
        # the home page links it for leads, not for annotators
        assert url not in client.get(reverse("judging:home")).content.decode()
        client.force_login(lead)
        assert f'href="{url}"' in client.get(reverse("judging:home")).content.decode()
    finally:
        scores.clear()
