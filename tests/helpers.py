"""Helpers shared by the tests (importable because pytest puts tests/ on sys.path)."""

import os

import pytest

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


def shared_path(*parts):
    """A file of ../shared/data (real development data; never copied into the repo)."""
    p = os.path.abspath(os.path.join(SHARED, *parts))
    if not os.path.exists(p):
        pytest.skip(f"shared data not found: {p}")
    return p

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def fixture_path(name):
    """A small dataset of our own in an official layout (tests/fixtures/README.md)."""
    return os.path.join(FIXTURES, name)


HOTPOT = fixture_path("hotpotqa_mini.official.json")
