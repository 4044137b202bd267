"""Instructor only: the machinery that builds the graded cases from the answer key (see :mod:`rlhf_practice.checks`).

    python -m instructor fixtures      # record tests/fixtures/graded/<file>.pt from the key

The cases themselves are written in the grading book, one module per student file
(:mod:`instructor.book`): each graded function's builder, registered with :func:`cases_of`, beside its
catalogued mistakes. :func:`build_cases` walks the course table and imports a book module only when it
needs one of its functions.

:func:`build_cases` with ``seed=None`` gives the committed cases (fixed inputs: the task book's
examples, edge cases and seeded random inputs); with a seed it gives fresh inputs, which the grader
uses as hidden cases: other random inputs, and a variant of every fixed case with the same structure
and other values (the §2.1 table with other ratios, in another order; a group of equal rewards at
another value; an all-masked row in another position), so that no published expected value is one
of theirs. Expected values and gradients come from the key. Each case also
records what every wrong variant of :mod:`instructor.mistakes` returns on its inputs, under the
variant's diagnosis, so that a failure can name the mistake without the key: a builder writes
inputs, never a mistake. :mod:`instructor.fixtures` compares a recording with the key, with a
tolerance per dtype.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextvars import ContextVar

import torch

from instructor.mistakes import BOOK, load_book, wrong_variants
from rlhf_practice.checks import fresh_inputs, modes, run_case
from rlhf_practice.course import GRADED, graded, load_impl, module_of

DTYPES = (torch.float32, torch.float64)
F64 = torch.float64


def _differs(a, b) -> bool:
    """Whether two results (tensors, lists of them, or floats) differ beyond rounding of ``b``'s dtype."""
    if isinstance(b, float):
        return abs(a - b) > 1e-12 * max(1.0, abs(b))
    a, b = (a, b) if isinstance(b, list) else ([a], [b])
    # float64: as tight as the check's tolerance (rlhf_practice.checks._close), so that a mistake the check
    # tells apart in float64 alone (e.g. the epsilon inside a square root) is recorded, and named
    tol = {"rtol": 1e-5, "atol": 1e-6} if b[0].dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-12}
    return any(x.shape != y.shape or not torch.allclose(x.to(y.dtype), y, **tol) for x, y in zip(a, b))


def _plain_like(got, expected, any_float: tuple[int, ...] = ()) -> bool:
    """A result of the expected structure, shapes and dtypes: one the generic checks do not stop before
    the values are compared (NaN included: a NaN that a mistake makes is recorded, so that it is named). The
    parts at ``any_float`` may have any floating dtype."""
    if isinstance(expected, float):
        return type(got) is float
    got, expected = (got, expected) if isinstance(expected, list) else ([got], [expected])
    return (
        isinstance(got, list)
        and len(got) == len(expected)
        and all(
            type(g) is torch.Tensor
            and g.shape == e.shape
            and (g.dtype == e.dtype or (i in any_float and g.is_floating_point()))
            for i, (g, e) in enumerate(zip(got, expected))
        )
    )


def _other_shape(got, expected) -> bool:
    """A tensor of the expected dtype but another shape, where one tensor is expected."""
    return (
        type(got) is torch.Tensor
        and type(expected) is torch.Tensor
        and got.dtype == expected.dtype
        and got.shape != expected.shape
    )


def _case(key, function, section, id, what, args, *, kwargs=None, grads=None, **extra) -> dict:
    """One case dict; ``expected`` is what the key returns on ``args``: every case checks the value.

    A function that returns a tuple gets ``outputs`` (the names of its parts); its ``expected`` and
    each mistake are then lists of tensors. ``raises="ValueError"``: the key raises it on ``args``, and
    so must the function under test (``expected`` is None). ``any_float``: the names of the parts (of
    ``outputs``) whose dtype the contract leaves free among the floating ones (a metric beside a loss).
    """
    module = module_of(function)
    kwargs = kwargs or {}
    raises = extra.pop("raises", None)
    called = fresh_inputs({"args": args})  # models rebuilt from their recorded data
    try:
        out = getattr(key.module(module), function)(*called.values(), **kwargs)
    except Exception as err:
        if type(err).__name__ != raises:
            raise
        out = None
    else:
        assert raises is None, f"the key does not raise {raises} on {function}/{id}"
    outputs = extra.pop("outputs", None)
    grads = grads or {}
    case = {
        "id": id,
        "function": function,
        "section": section,
        "what": what,
        "args": list(args),
        "kwargs": kwargs,
        "expected": None if raises else [part.detach() for part in out] if outputs else _detached(out),
        "mistakes": {},
        "grad_of": extra.pop("grad_of", list(grads)),
        "grad_weights": extra.pop("grad_weights", None),
        "grad_output": extra.pop("grad_output", None),
        "grads": grads,
        "modes": {name: m.training for name, m in called.items() if isinstance(m, torch.nn.Module)},
        "unmodified": extra.pop("unmodified", False),
        "atol": extra.pop("atol", None),
        "book": extra.pop("book", ""),
        "outputs": outputs,
        "raises": raises,
    }
    if "any_float" in extra:
        case["any_float"] = extra.pop("any_float")
    if "dtype_rule" in extra:  # why the answer has its dtype, where it is not an input's (rlhf_practice.checks.compare)
        case["dtype_rule"] = extra.pop("dtype_rule")
    assert not extra, extra
    if _DIAGNOSES.get():
        _add_catalogued_mistakes(case)
    return case


def _add_catalogued_mistakes(case: dict) -> None:
    """Record what each wrong variant of the catalog returns on this case, under its diagnosis: its
    value where that differs from the expected one, else the gradients where they differ. Every
    diagnosis is recorded, in the catalog's order, even where two return the same: a result that
    matches both is told both, never only one of them. A result of another type, shape or dtype, or an
    error, is left to the generic checks; a NaN is recorded (the check names the mistake that makes it).
    A case that must raise records nothing: a variant that returns instead is told so by the check."""
    if case["raises"]:
        return
    for variant in wrong_variants(case["function"]):
        with warnings.catch_warnings():  # e.g. the std of a group of one reward: NaN, which is recorded
            warnings.simplefilter("ignore")
            result = run_case(variant.fn, case)
        got = result["output"]
        free = tuple(case["outputs"].index(name) for name in case.get("any_float", ()))
        if result["error"] or modes(case, result) != case["modes"]:
            continue  # the generic checks tell these (a model left in another mode: whatever its dropout drew)
        if not _plain_like(got, case["expected"], free):
            if _other_shape(got, case["expected"]):  # the check tells the shape, and names the mistakes that make it
                case["mistakes"].setdefault(variant.diagnosis, got)
            continue
        if _differs(got, case["expected"]):
            case["mistakes"].setdefault(variant.diagnosis, got)
            _mark(case, variant)
            continue
        for name, grad in case["grads"].items():
            wrong = result["grads"].get(name)
            if grad["expected"].any() and _plain_like(wrong, grad["expected"]) and _differs(wrong, grad["expected"]):
                grad["mistakes"].setdefault(variant.diagnosis, wrong)
                _mark(case, variant)


def _mark(case: dict, variant) -> None:
    """A recorded mistake that stops training (``@wrong(..., stops_training=True)``) is named in the case too
    (``stops_training``: its diagnoses), so that the grader caps it without the catalog, which holds the key."""
    if variant.stops_training and variant.diagnosis not in case.setdefault("stops_training", []):
        case["stops_training"].append(variant.diagnosis)


def _detached(out):
    return out if isinstance(out, float) else out.detach()


def _grad(expected: torch.Tensor, message: str = "") -> dict:
    """The expected gradient of one input; all zeros: none may reach it, and ``message`` says why."""
    return {"expected": expected, "message": message, "mistakes": {}}


def _adder(key, cases: list[dict], function: str, fresh: bool = False, **common):
    """``add(id, what, args, **extra)`` appends one case of ``function`` to ``cases``; its TASKS.md
    section comes from the course table. ``book=`` names the section that prints a case's numbers; a
    fresh case (``fresh=True``: the grader's hidden variants) prints in no section, so it has none."""
    section = graded(module_of(function))[function]

    def add(id: str, what: str, args: list, **extra) -> None:
        if fresh:
            extra.pop("book", None)
        cases.append(_case(key, function, section, id, what, args, **common, **extra))

    return add


# Fresh variants. With a seed, every builder also makes a variant of each of its fixed cases (the task
# book's examples and the edge cases): the same structure and what it tests, other values, drawn from the
# seed's generator; their expected gradients come from the key. Without a seed, the builders give the
# book's values, as recorded in tests/fixtures, and draw nothing for them.


def _own(seed: int) -> torch.Generator:
    """A published case's own generator: its inputs stay the same whatever the other functions' cases draw."""
    return torch.Generator().manual_seed(seed)


def _uniform(g: torch.Generator, low: float, high: float, *shape: int, dtype=F64) -> torch.Tensor:
    """Values drawn uniformly from [low, high), rounded to 3 decimals (numbers that read like the book's)."""
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=F64)).round(decimals=3).to(dtype)


def _signs(g: torch.Generator, *shape: int, dtype=F64) -> torch.Tensor:
    return (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(dtype)


def _perm(g: torch.Generator, n: int) -> torch.Tensor:
    return torch.randperm(n, generator=g)


def _show(value) -> str:
    """Drawn values in a case's description."""
    return str(value.tolist() if isinstance(value, torch.Tensor) else value)


def _name(dtype: torch.dtype) -> str:
    return str(dtype)[6:]  # "float32"


# A tie: every reward of a group (or every advantage) equal. Its advantages are 0 "to within 0.01" (DESIGN),
# also where rounding puts the float32 mean an ulp off and the std far above eps; a tie case checks that.
TIE_TOLERANCE = 0.01


def _tie_value(g: torch.Generator, n: int = 8, minus: float = 0.0) -> float:
    """A reward for a tie of ``n``: one whose float32 mean over ``n`` replies (less ``minus``, the value baseline of
    compute_advantages) is off by an ulp (over 8, 2.2 is exact and 12.4 is not)."""
    while True:
        value = _uniform(g, -20, 20, 1).item()
        tie = torch.full((n,), value, dtype=torch.float32) - torch.full((n,), minus, dtype=torch.float32)
        if tie.mean() != tie[0]:
            return value


def _grads_of(fn, args, names):
    """{name: d sum(fn(args)) / d arg} with autograd (a tuple result: the sum of its parts)."""
    args = {k: v.clone().requires_grad_(k in names) if isinstance(v, torch.Tensor) else v for k, v in args}
    out = fn(*args.values())
    parts = out if isinstance(out, tuple) else (out,)
    grads = torch.autograd.grad(sum(p.sum() for p in parts), [args[n] for n in names], allow_unused=True)
    return {n: (gr if gr is not None else torch.zeros_like(args[n])).detach() for n, gr in zip(names, grads)}


def _bands(g: torch.Generator, bands: list[tuple[float, float]], *shape: int) -> torch.Tensor:
    """Values drawn from one of ``bands`` each (a band drawn per value, then a value in it)."""
    which = torch.randint(0, len(bands), shape, generator=g)
    low, high = (torch.tensor([b[i] for b in bands], dtype=F64)[which] for i in (0, 1))
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=F64)).round(decimals=3)


# The builders: {graded function: its builder}, as the book modules register them when they are imported.
# A builder is ``builder(key, g, fresh) -> list[dict]``: the cases of its function, drawn from ``g``.
Builder = Callable[..., list]
_BUILDERS: dict[str, Builder] = {}


def cases_of(function: str) -> Callable[[Builder], Builder]:
    """Register the decorated builder as the one that makes the cases of the graded ``function``; it is
    written in the book module of the function's student file (instructor/book/<module>)."""
    book = f"{BOOK}.{module_of(function)}"

    def register(builder: Builder) -> Builder:
        if builder.__module__ != book and not builder.__module__.startswith(book + "."):
            raise ValueError(f"the builder of {function}'s cases belongs in {book}, not {builder.__module__}")
        if function in _BUILDERS:
            raise ValueError(f"two builders for {function}: {_BUILDERS[function].__name__} and {builder.__name__}")
        _BUILDERS[function] = builder
        return builder

    return register


def builder_of(function: str) -> Builder:
    """The builder of ``function``'s cases; imports its book module (only that one)."""
    load_book(function)
    if function not in _BUILDERS:
        raise LookupError(f"no builder for {function}: register one with @cases_of({function!r}) in {BOOK}")
    return _BUILDERS[function]


FIXTURE_SEED = 2024
_DIAGNOSES = ContextVar("diagnoses", default=True)  # False: build_cases(diagnoses=False) is under way


def build_cases(seed: int | None = None, function: str | None = None, diagnoses: bool = True) -> list[dict]:
    """The committed cases (``seed=None``), or fresh ones (hidden cases for the grader: random inputs, and
    a fresh variant of every fixed case, drawn from ``seed``); of one graded function if ``function`` is given.

    The committed cases draw from one generator, in the order of :data:`~rlhf_practice.course.GRADED`: one
    function's cases need the builders before it to run (and the book modules they are written in). Fresh
    ones draw from a generator per function, seeded with ``seed``: a function's hidden cases are the same
    whether they are built alone (``function=``, e.g. for one selected test, which imports only its own book
    module) or with all the others. ``diagnoses=False`` leaves out what the catalog's mistakes return (their
    ``mistakes`` are empty; the inputs and expected results are the same): a check that only needs to know
    whether a function passes, and builds them again to name a mistake when it does not.
    """
    token = _DIAGNOSES.set(diagnoses)
    try:
        return _build(seed, function)
    finally:
        _DIAGNOSES.reset(token)


def _build(seed: int | None, function: str | None) -> list[dict]:
    key = load_impl("answer")
    shared = torch.Generator().manual_seed(FIXTURE_SEED)
    cases = []
    for name in (g.function for g in GRADED):
        if function is None or name == function:
            g = shared if seed is None else torch.Generator().manual_seed(seed)
            cases += builder_of(name)(key, g, fresh=seed is not None)
        elif seed is None:  # its draws move the shared generator on: the next function's stay
            builder_of(name)(key, shared, fresh=False)
        if name == function:
            break  # the builders after it draw after it
    if seed is not None:
        for case in cases:
            case["id"] = "hidden_" + case["id"]
    return cases
