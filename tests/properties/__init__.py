"""Property tests of the graded functions: laws that every correct implementation obeys, checked with
Hypothesis on many small random inputs, plus float64 central-difference gradient checks.

The laws of the functions of rlhf_practice/rl/<file>.py live in tests/properties/<file>.py (the input
strategies they share in :mod:`properties.draws`; the tiny GPT-2s of tasks 12 and 13, and the laws that
reply_logps and get_reward share, in :mod:`properties.models`); this module holds what they share. Each
:class:`Property` names its graded function, says the law in words, draws its inputs (a dict of named
values) and checks the law on them: ``check(fn, example)`` returns None when the law holds, or what
``fn`` did instead. :func:`laws` loads the laws of one function (only its student file's module).
:func:`failure` runs one property against one implementation of its function and returns the one-line
message a student reads (the law, the smallest counterexample Hypothesis found, the TASKS.md section),
or None. tests/test_properties.py runs the properties on the implementation under test (``--impl``).

Functions without a gradient check, and why: :data:`NO_GRADIENT`. reply_logps is checked in float32,
as it returns, along one random direction of the model's parameters; the others with torch's gradcheck.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from rlhf_practice.course import GRADED, module_of, probe_args

SECTION = {g.function: g.section for g in GRADED}
# The graded functions without a gradient check, and why: each laws module adds its own (every other
# function has a law named "gradcheck", or "gradient" for reply_logps).
NO_GRADIENT: dict[str, str] = {}

# Deterministic and quiet: the same examples on every run and machine, no database, no deadline, no
# report but ours. Applied to each property's own search, never loaded as a profile, so it does not
# reach other tests.
SETTINGS = settings(
    max_examples=15,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
    print_blob=False,
)
TOL = 1e-6  # float64 inputs: the laws hold to rounding
TIE_TOL = 0.01  # a tie's advantages (deltas) are 0 to within this, in float32 too (DESIGN: the tied-group contract)


@dataclass(frozen=True)
class Property:
    function: str  # the graded function
    name: str  # short id, unique per function (test ids read module-function-name)
    words: str  # the law, as the failure message states it
    inputs: st.SearchStrategy  # draws one example: {input name: value}
    check: Callable[[Callable, dict], str | None]  # None, or what the function did instead
    examples: int = 15

    @property
    def test_id(self) -> str:
        """Its test's id in tests/test_properties.py: student file-function-law."""
        return f"{module_of(self.function)}-{self.function}-{self.name}"


PROPERTIES: list[Property] = []  # every law loaded so far, in the order its module declares them


def laws(function: str | None = None) -> list[Property]:
    """The laws of ``function`` (default: of every graded function), in the course's order; loads the
    laws module of its student file (tests/properties/<file>.py) if it is not loaded yet."""
    functions = [g.function for g in GRADED] if function is None else [function]
    for module in dict.fromkeys(module_of(f) for f in functions):
        importlib.import_module(f"{__name__}.{module}")
    return sorted((p for p in PROPERTIES if p.function in functions), key=lambda p: ORDER[p.function])


ORDER = {g.function: i for i, g in enumerate(GRADED)}


def law(function: str, name: str, words: str, inputs: st.SearchStrategy, examples: int = 15) -> Callable:
    def register(check: Callable) -> Callable:
        PROPERTIES.append(Property(function, name, words, inputs, check, examples))
        return check

    return register


class _Stub(Exception):
    pass


class _Broken(Exception):
    pass


class _Seen(dict):
    """An example that records which of its inputs a check reads (nested examples too): a counterexample
    shows only those."""

    def __init__(self, data: dict, used: list[str], prefix: str = ""):
        super().__init__(data)
        self._used, self._prefix = used, prefix

    def __getitem__(self, key: str) -> object:
        value = super().__getitem__(key)
        if isinstance(value, dict):
            return _Seen(value, self._used, f"{self._prefix}{key}.")
        if self._prefix + key not in self._used:
            self._used.append(self._prefix + key)
        return value


class _Override:
    """``base`` with some inputs replaced, read as a dict (the reads of ``base`` are still recorded)."""

    def __init__(self, base: dict, change: dict):
        self.base, self.change = base, change

    def __getitem__(self, key: str) -> object:
        return self.change[key] if key in self.change else self.base[key]


def show_used(example: dict, used: list[str]) -> str:
    """The inputs a check read, in the example's order, each as name=value."""
    flat: dict[str, object] = {}

    def walk(d: dict, prefix: str) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(example, "")
    return ", ".join(f"{path.rsplit('.', 1)[-1]}={fmt(v)}" for path, v in flat.items() if path in used)


def failure(prop: Property, fn: Callable, shrink: bool = True) -> str | None:
    """Run ``prop`` against ``fn`` (an implementation of ``prop.function``): None if the law held on every
    example, else one line naming the function, the law, the smallest counterexample and the section.
    Without ``shrink`` the counterexample is the first one found (the same verdict, found sooner: for
    counting what the laws catch, not for showing a student)."""
    phases = SETTINGS.phases if shrink else tuple(p for p in SETTINGS.phases if p is not Phase.shrink)

    @settings(SETTINGS, max_examples=prop.examples, phases=phases)
    @given(prop.inputs)
    def search(example: dict) -> None:
        used: list[str] = []
        with warnings.catch_warnings():  # e.g. the std of one value: its NaN is the failure we report
            warnings.simplefilter("ignore")
            try:
                seen = prop.check(fn, _Seen(example, used))
            except NotImplementedError:
                raise _Stub() from None
            except _Broken as err:  # a helper found the result unusable (wrong type or shape)
                seen = str(err)
            except Exception as err:  # noqa: BLE001 - whatever the function raises is its failure
                seen = f"raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if seen:
            raise _Broken(f"{show_used(example, used)} -> {seen}")

    section = SECTION[prop.function]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*probe_args(next(g for g in GRADED if g.function == prop.function)))
    except NotImplementedError:  # a stub: say so at once, without a search
        return f"{prop.function} is not implemented yet (it raises NotImplementedError). See TASKS.md {section}."
    except Exception:  # noqa: BLE001, S110 - the search below reports what is wrong
        pass
    try:
        search()
    except _Stub:
        return f"{prop.function} is not implemented yet (it raises NotImplementedError). See TASKS.md {section}."
    except _Broken as err:
        found = "smallest counterexample" if shrink else "counterexample"
        return f"{prop.function} ({section}): {prop.words}; {found}: {err}. Reread TASKS.md {section}."
    except Exception as err:  # noqa: BLE001 - e.g. Hypothesis's FlakyFailure: a result that changes from call to call
        return (
            f"{prop.function} ({section}): {prop.words}; it broke this law on an input and then kept it on the same "
            f"input ({type(err).__name__}): does it use randomness or state kept between calls? Reread TASKS.md {section}."
        )
    return None


# --- how a counterexample is shown --------------------------------------------------------------------


def fmt(value: object) -> str:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return f"{value.item():.4g}"
        if value.is_floating_point():
            rows = value.detach().double().tolist()
            return str(_rounded(rows)).replace("'", "")
        return str(value.tolist())
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + show(value) + "}"
    return repr(value)


def _rounded(x: object) -> object:
    return [_rounded(v) for v in x] if isinstance(x, list) else f"{x:.4g}"


def show(example: dict) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in example.items())


def close(a: object, b: torch.Tensor, tol: float = TOL) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and bool(torch.allclose(a.detach().double(), b.double(), rtol=tol, atol=tol))
    )


def got(a: object) -> str:
    return f"got {fmt(a)}" if isinstance(a, torch.Tensor) else f"returned {type(a).__name__}"
