"""The mutation check: every catalogued mistake fails the graded cases, names itself, and is never
told another mistake alone; every right variant passes.

    python -m instructor mutations

Each variant of the catalog (:data:`instructor.mistakes.CATALOG`, written in :mod:`instructor.book`)
runs in this process, in place of the key's function, on every case of its function: the recorded ones (tests/fixtures) and a fresh set (the grader's hidden
inputs: random ones and a variant of each fixed one), through the same
:func:`~rlhf_practice.checks.run_case` / :func:`~rlhf_practice.checks.check_case` that the graded tests
and the grader use. Prints one line per variant and exits 1 if any verdict is unexpected.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from functools import cache

from instructor.mistakes import CATALOG, Variant
from rlhf_practice.checks import check_case, load_cases, run_case

HIDDEN_SEED = 7  # the fresh inputs: any seed other than the fixtures' one
MATCHES = "This matches"  # how a failure that names recorded mistakes says so (rlhf_practice.checks)


@dataclass
class Verdict:
    variant: Variant
    messages: list[str]  # the failing cases' diagnoses, as a student running pytest reads them

    @property
    def ok(self) -> bool:
        if self.variant.verdict == "right":
            return not self.messages
        return any(self.variant.diagnosis in message for message in self.messages) and not self.misnamed

    @property
    def misnamed(self) -> list[str]:
        """The failures that name recorded mistakes, but not this one: a false diagnosis."""
        return [m for m in self.messages if MATCHES in m and self.variant.diagnosis not in m]

    @property
    def shown(self) -> str:
        """A false diagnosis if there is one, else the message that names the mistake (else the first
        one), or "passed"."""
        named = [m for m in self.messages if self.variant.diagnosis and self.variant.diagnosis in m]
        return (self.misnamed or named or self.messages or ["passed"])[0]


@cache
def all_cases() -> tuple[dict, ...]:
    from instructor.cases import build_cases

    return tuple(load_cases()) + tuple(build_cases(seed=HIDDEN_SEED))


def judge(variant: Variant) -> Verdict:
    """Run ``variant`` on every case of its function; collect the failures' messages."""
    with warnings.catch_warnings():  # what a variant warns about is its mistake, reported by the verdict
        warnings.simplefilter("ignore")
        messages = [
            check_case(case, run_case(variant.fn, case)) for case in all_cases() if case["function"] == variant.function
        ]
    return Verdict(variant, [m for m in messages if m])


def main() -> None:
    verdicts = [judge(variant) for variant in CATALOG]
    for v in verdicts:
        said = v.shown[:300]
        print(f"{'ok ' if v.ok else 'BAD'} {v.variant.verdict:5s} {v.variant.function}: {v.variant.name}\n      {said}")
    bad = sum(not v.ok for v in verdicts)
    print(f"{len(verdicts) - bad}/{len(verdicts)} verdicts as expected")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
