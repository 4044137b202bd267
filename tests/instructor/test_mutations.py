"""The catalog of mistakes (written in instructor/book/) against the graded cases: every wrong variant fails
with its diagnosis and is never told other mistakes alone, every right variant passes (python -m instructor mutations prints the same)."""

from __future__ import annotations

import pytest

from instructor.mistakes import CATALOG, Variant
from instructor.mutations import judge


@pytest.mark.parametrize("variant", CATALOG, ids=lambda v: f"{v.function}-{v.verdict}-{v.name}")
def test_variant_gets_its_verdict(variant: Variant) -> None:
    verdict = judge(variant)
    if variant.verdict == "right":
        assert not verdict.messages, f"a right answer fails: {verdict.messages[0]}"
    else:
        assert verdict.messages, "a catalogued mistake passes every graded case"
        assert not verdict.misnamed, f"a failure names other mistakes only: {verdict.misnamed[0]}"
        assert verdict.ok, f"no failure names the mistake ({variant.diagnosis!r}); the first says: {verdict.shown}"


def test_catalog_names_are_unique_per_function() -> None:
    names = [(v.function, v.name) for v in CATALOG]
    assert len(names) == len(set(names))
    assert all(v.verdict in ("right", "wrong") and (v.verdict == "right") == (v.diagnosis == "") for v in CATALOG)


def test_a_named_mistake_reads_as_a_sentence() -> None:
    """A failure names recorded mistakes as "This matches a common mistake: <diagnosis>." or, where several
    agree, joined with "; or ". A diagnosis that is a few words of a generic message ("in place", "dtype")
    would read as a garbled "...; or in place.": such a variant must fail through the generic checks only, and
    one whose result a case records says what it did in a phrase of its own."""
    from rlhf_practice.checks import load_cases

    names = set()
    for case in load_cases():
        names |= set(case["mistakes"])
        names |= {name for grad in case["grads"].values() for name in grad["mistakes"]}
    short = sorted(name for name in names if len(name.split()) < 3)
    assert not short, f"recorded under a fragment of a generic message: {short}; give the variant a whole phrase"
