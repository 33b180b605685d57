"""The suite's own shape: what would break `make test`'s collection while `make check` passes."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_no_two_test_files_share_a_name():
    # Test folders have no __init__.py: pytest imports each file by its basename, so two of one name
    # in different folders fail to collect ("import file mismatch") once both are collected.
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted(n for n, count in names.items() if count > 1) == []
