"""Fixtures for the Django app's tests."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    """Each test starts with empty in-process score caches, like a freshly started server process."""
    from judging import scoring

    scoring.process_caches_clear()
    yield


def run_concurrently(target, args_list, *, timeout: float = 180) -> list[Exception]:
    """Run ``target(*args)`` in one thread per entry of ``args_list``, all released at once, each with its
    own database connection; return what they raised (a thread's exception is otherwise swallowed)."""
    import threading

    from django.db import connections

    errors: list[Exception] = []
    barrier = threading.Barrier(len(args_list))

    def work(*args):
        try:
            barrier.wait()
            target(*args)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return errors
