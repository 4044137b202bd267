"""The property tests (tests/_properties.py) against the catalog of mistakes: they reject no right
variant and not the key, and on their own catch a majority of the wrong ones (python -m instructor
properties prints the count per function). Slow: every variant runs every property of its function."""

from __future__ import annotations

import pytest

from instructor.mistakes import CATALOG
from instructor.properties import judge, key_results

pytestmark = pytest.mark.slow


def test_key_passes_every_property() -> None:
    failures = [m for r in key_results() for m in r.failures]
    assert not failures, failures[0]


def test_right_variants_pass_and_most_mistakes_are_caught() -> None:
    results = [judge(v) for v in CATALOG]
    rejected = [r for r in results if r.verdict == "right" and r.failures]
    assert not rejected, f"a right answer fails a property: {rejected[0].name}: {rejected[0].failures[0]}"
    wrong = [r for r in results if r.verdict == "wrong"]
    caught = sum(bool(r.failures) for r in wrong)
    assert caught > len(wrong) / 2, f"the properties catch only {caught} of {len(wrong)} catalogued mistakes"
