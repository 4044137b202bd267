"""How many catalogued mistakes the property tests catch on their own, and that they reject no right answer.

    python -m instructor properties

Every variant of the catalog (:data:`instructor.mistakes.CATALOG`, written in :mod:`instructor.book`) runs,
in this process and in place of the key's function, through every property of its function in
tests/properties/<file>.py: the same code and the same
deterministic examples as the student suite (tests/test_properties.py). A wrong variant counts as
caught when at least one property fails; the mistakes no property catches are listed (the recorded and
hidden cases still catch them: ``python -m instructor mutations``). Exits 1 if a right variant, or the
key, fails a property.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from instructor.mistakes import CATALOG, KEY, Variant
from rlhf_practice.course import GRADED, ROOT, module_of


@cache
def properties_module() -> ModuleType:
    """tests/properties, with the laws of every graded function loaded (tests/ is not a package: pytest puts
    it on sys.path, and so does this)."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    module = importlib.import_module("properties")
    module.laws()
    return module


@dataclass
class Result:
    function: str
    name: str
    verdict: str  # "wrong", "right", or "key"
    failures: list[str]  # one message per failing property


def run(function: str, name: str, verdict: str, fn: object) -> Result:
    """Every property of ``function`` against ``fn``: the same examples as the student suite, without
    shrinking a counterexample (a count needs only whether a law broke)."""
    props = properties_module().laws(function)
    failures = [m for m in (properties_module().failure(p, fn, shrink=False) for p in props) if m]
    return Result(function, name, verdict, failures)


def judge(variant: Variant) -> Result:
    return run(variant.function, variant.name, variant.verdict, variant.fn)


def key_results() -> list[Result]:
    return [run(g.function, "key", "key", getattr(KEY.module(module_of(g.function)), g.function)) for g in GRADED]


def main() -> None:
    results = key_results() + [judge(v) for v in CATALOG]
    bad = [r for r in results if r.verdict != "wrong" and r.failures]
    missed = [r for r in results if r.verdict == "wrong" and not r.failures]
    counts = {p.function: 0 for p in properties_module().PROPERTIES}
    for p in properties_module().PROPERTIES:
        counts[p.function] += 1
    print(f"{'function':32s} {'laws':>4s} {'caught':>8s}")
    total_caught = total = 0
    for g in GRADED:
        wrong = [r for r in results if r.function == g.function and r.verdict == "wrong"]
        caught = sum(bool(r.failures) for r in wrong)
        total_caught, total = total_caught + caught, total + len(wrong)
        print(f"{g.function:32s} {counts[g.function]:4d} {caught:4d}/{len(wrong):<3d}")
    print(f"the properties alone catch {total_caught} of the {total} catalogued mistakes")
    for r in missed:
        print(f"  not caught: {r.function}: {r.name}")
    for r in bad:
        print(f"BAD {r.verdict} {r.function}: {r.name}\n      {r.failures[0][:400]}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
