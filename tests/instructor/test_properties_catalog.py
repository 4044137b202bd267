"""The property tests (tests/properties/): every graded function has at least two laws and a gradient
check (or a reason in NO_GRADIENT); against the catalog of mistakes they reject no right variant and not
the key, and on their own catch a majority of the wrong ones (python -m instructor properties prints the
count per function). The catalog tests are slow: every variant runs every property of its function."""

from __future__ import annotations

import pytest

from instructor.mistakes import CATALOG
from instructor.properties import judge, key_results, properties_module
from rlhf_practice.course import GRADED


def test_every_graded_function_has_laws_and_a_gradient_check() -> None:
    props = properties_module()
    for g in GRADED:
        names = [p.name for p in props.laws(g.function)]
        checks = [n for n in names if n in ("gradcheck", "gradient")]
        assert len(names) - len(checks) >= 2, (
            f"{g.function}: {names}; write at least two laws in tests/properties/{g.module}.py"
        )
        assert bool(checks) != (g.function in props.NO_GRADIENT), (
            f"{g.function}: give it a gradient check, or say in NO_GRADIENT why it has none"
        )
        assert len(set(names)) == len(names), f"{g.function}: two laws share a name: {names}"


@pytest.mark.slow
def test_key_passes_every_property() -> None:
    failures = [m for r in key_results() for m in r.failures]
    assert not failures, failures[0]


@pytest.mark.slow
@pytest.mark.timeout(600)  # every catalog variant through every law of its function: ~1 min on a quiet 2-core machine
def test_right_variants_pass_and_most_mistakes_are_caught() -> None:
    results = [judge(v) for v in CATALOG]
    rejected = [r for r in results if r.verdict == "right" and r.failures]
    assert not rejected, f"a right answer fails a property: {rejected[0].name}: {rejected[0].failures[0]}"
    wrong = [r for r in results if r.verdict == "wrong"]
    caught = sum(bool(r.failures) for r in wrong)
    assert caught > len(wrong) / 2, f"the properties catch only {caught} of {len(wrong)} catalogued mistakes"
