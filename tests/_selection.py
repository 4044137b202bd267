"""What a run's ``-m`` and ``-k`` can select, decided before a test module is imported or a case is read.

pytest collects every test of every module and only then deselects what ``-m``/``-k`` leave out, so
``pytest -m graded -k compute_advantages`` would read every recorded case and define every property law
to run 30 tests. Two decisions here skip that work; where they cannot tell, everything is collected:

- a test module is not imported when none of its tests can carry the markers ``-m`` asks for. The
  project's own markers (pyproject.toml: graded, slow, processes, ...) reach a test only through
  ``mark.<name>`` written in its module or in a conftest.py above it;
- a graded function's cases (tests/test_graded.py) and laws (tests/test_properties.py) are loaded only
  when ``-m``/``-k`` can select one of its tests. A test's keywords are its folder, its module, its
  markers and its name, ``test_graded[<file>-<function>-<case>]``; no case or law name contains the
  name of a graded function (checked), so a ``-k`` word that contains one matches only where the file or
  function itself does.

tests/test_selection.py checks both decisions against what pytest itself selects from a full collection.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from _pytest.mark.expression import Expression  # pytest is pinned (requirements.txt)

from rlhf_practice.course import GRADED, module_of

FUNCTIONS = tuple(g.function for g in GRADED)
PROJECT_MARKERS = ("graded", "slow", "untouched_stubs", "processes")  # pyproject.toml's, set only as mark.<name>
TESTS = Path(__file__).resolve().parent


class _Undecided(Exception):
    pass


def holds(expression: str, matches: Callable[[str], bool]) -> bool:
    """A -m or -k expression (names, and/or/not, parentheses) as pytest evaluates it, with ``matches(name)`` for
    each name; an empty one holds."""
    return not expression or Expression.compile(expression).evaluate(lambda name, /, **kwargs: matches(name))


def satisfiable(expression: str | None, truth: Callable[[str], bool | None]) -> bool:
    """Whether ``expression`` (a -m or -k expression) can be true when each name is ``truth(name)``,
    None meaning "true for some tests and false for others": then every combination is tried."""
    if not expression:
        return True
    try:
        compiled = Expression.compile(expression)
    except Exception:  # noqa: BLE001 - pytest reports a malformed expression itself
        return True
    unknown = sorted(name for name in compiled.idents() if truth(name) is None)
    if len(unknown) > 10:
        return True
    for values in itertools.product((False, True), repeat=len(unknown)):
        try:
            if compiled.evaluate(_matcher(dict(zip(unknown, values)), truth)):
                return True
        except _Undecided:
            return True
    return False


def _matcher(given: dict[str, bool], truth: Callable[[str], bool | None]) -> Callable[..., bool]:
    def matcher(name: str, /, **kwargs: object) -> bool:
        if kwargs:  # a marker's arguments, -m "timeout(60)": not decided here
            raise _Undecided
        return given[name] if name in given else bool(truth(name))

    return matcher


# --- -m: which modules can hold a selected test ----------------------------------------------------------


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def module_may_match(path: Path, markexpr: str) -> bool:
    """Whether a test of the module at ``path`` can carry the markers ``markexpr`` (-m) selects."""
    texts = [_text(path)] + [_text(d / "conftest.py") for d in path.parents if (d / "conftest.py").is_file()]
    written = {name for text in texts for name in re.findall(r"\bmark\.(\w+)", text)}

    def truth(marker: str) -> bool | None:
        return False if marker in PROJECT_MARKERS and marker not in written else None

    return satisfiable(markexpr, truth)


# --- -k and -m: which graded functions a graded test module must load -----------------------------------


def _keyword_truth(test: str, file: str, function: str) -> Callable[[str], bool | None]:
    """-k truth of a name for every test ``test[<file>-<function>-...]`` of tests/<test>.py."""
    named = f"{test}[{module_of(function)}-{function}-".lower()  # what every one of these tests' names starts with
    certain = (file.lower(), "graded", named)

    def truth(name: str) -> bool | None:
        word = name.lower()
        if any(word in c for c in certain):
            return True
        if any(f in word and f not in named for f in FUNCTIONS):
            return False  # a graded function's name occurs in these tests' names only where theirs stands
        return None

    return truth


def reachable(test: str, markexpr: str, keyword: str) -> list[str]:
    """The graded functions (course order) some test ``test[...]`` of tests/<test>.py can be selected for by
    ``-m markexpr -k keyword``."""
    if not satisfiable(markexpr, lambda m: True if m == "graded" else None if m == "parametrize" else False):
        return []
    return [f for f in FUNCTIONS if satisfiable(keyword, _keyword_truth(test, f"{test}.py", f))]
