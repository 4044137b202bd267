"""The one catalog of student mistakes, and of right answers written differently: its machinery.

The variants are written in the grading book (:mod:`instructor.book`), the only place a mistake is
written: each in the book module of its function's student file (instructor/book/<module>.py, or a module
of the package instructor/book/<module>/), beside the builder of the function's cases. Each variant is a
graded function as a student might write it: a plain function with the graded function's parameters
(names, order and defaults, checked against the answer key's when it is registered; a mistake in a stated
default declares its wrong one), marked with its verdict. ``@wrong(function, diagnosis)``: the variant
must fail the graded cases with a message that contains ``diagnosis``; ``@right(function)``: it must pass
them all. :mod:`instructor.mutations` runs every variant in-process, in place of the key's function. A
variant may call the key's ``masked_mean`` and ``per_token_kl`` (its book module takes them from
:data:`KEY`, never from the student's files). Its name in reports is its function's name, unique in the
whole catalog.

The graded cases record what each wrong variant returns on their inputs (:mod:`instructor.cases`),
NaN included, so a student's function that returns the same is told the variant's ``diagnosis``: the
whole sentence the student reads after "This matches a common mistake:". A diagnosis the generic
checks already give (shape, dtype, gradient, in-place) is a few words of their message instead.

A result that matches several recorded mistakes (two variants can agree on one input: ``max`` for
``min`` and a flipped sign agree on the §2.1 table) is told all of them, in the order they are written
in their book module; a diagnosis is never given alone where another mistake returns the same. So the
order is only the order a student reads them in: the most specific first; for a function returning a
tuple, mistakes in a later part (e.g. only the returns of ``compute_gae``) first. A wrong variant's
failures must name it, and no failure may name other mistakes without it (:mod:`instructor.mutations`).

Importing this module registers no variant: a book module registers its own when it is imported.
:func:`wrong_variants` imports only its function's book module; :data:`CATALOG` imports them all.

To catalogue a new mistake: write its function in its graded function's section of the book module of
its student file (e.g. instructor/book/ppo.py for ``compute_advantages``), then
``python -m instructor fixtures`` and ``python -m instructor mutations``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType

import torch

from rlhf_practice.course import GRADED, MODULES, load_impl, module_of

KEY = load_impl("answer")
BOOK = "instructor.book"  # the grading book: a module (or package) per student file


@dataclass(frozen=True)
class Variant:
    function: str  # the graded function it replaces
    verdict: str  # "wrong" or "right"
    name: str  # its Python function's name
    fn: Callable  # the variant itself, called in place of the key's function
    diagnosis: str = ""  # wrong only: words the failure message must contain
    # wrong only: the mistake leaves nothing that trains (the gradient the loss exists for is lost) although its
    # result has a gradient and finite values: the grader caps the function's points (instructor.grading.STOPPED)
    stops_training: bool = False


_VARIANTS: list[Variant] = []  # as registered: a book module registers its variants when it is imported


def load_book(function: str) -> ModuleType:
    """The book module of ``function``'s student file, imported (it registers its cases and variants)."""
    return importlib.import_module(f"{BOOK}.{module_of(function)}")


class _Catalog(Sequence):
    """Every variant of the grading book, in the order of the course table and, within a function, in the
    order its book module writes them (the precedence of diagnoses). Reading it imports every book module."""

    def _all(self) -> list[Variant]:
        for module in MODULES:
            importlib.import_module(f"{BOOK}.{module}")
        rank = {g.function: i for i, g in enumerate(GRADED)}
        return sorted(_VARIANTS, key=lambda v: rank[v.function])  # stable: each function's own order stays

    def __getitem__(self, index):
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[Variant]:
        return iter(self._all())


CATALOG: Sequence[Variant] = _Catalog()


def _parameters(fn: Callable) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _register(
    function: str, verdict: str, diagnosis: str = "", defaults: dict | None = None, stops_training: bool = False
) -> Callable:
    def register(fn: Callable) -> Callable:
        key = getattr(KEY.module(module_of(function)), function)
        expected = [(n, k, (defaults or {}).get(n, d)) for n, k, d in _parameters(key)]
        if _parameters(fn) != expected:
            raise TypeError(
                f"variant {fn.__name__}{inspect.signature(fn)}: give it the parameters of the key's "
                f"{function}{inspect.signature(key)} (names, order and defaults; other defaults only as "
                f"declared in defaults={defaults})"
            )
        book = f"{BOOK}.{module_of(function)}"
        if fn.__module__ != book and not fn.__module__.startswith(book + "."):
            raise ValueError(f"variant {fn.__name__} of {function} belongs in {book}, not {fn.__module__}")
        if any(v.name == fn.__name__ for v in _VARIANTS):
            raise ValueError(f"two variants are named {fn.__name__}")
        _VARIANTS.append(Variant(function, verdict, fn.__name__, fn, diagnosis, stops_training))
        return fn

    return register


def wrong(
    function: str, diagnosis: str, defaults: dict | None = None, stops_training: bool = False
) -> Callable[[Callable], Callable]:
    """Catalogue a mistake in ``function``: the graded cases must fail it, naming ``diagnosis``.
    ``defaults``: {parameter: the wrong default the variant declares} for a mistake in a stated default;
    every other parameter as the key's. ``stops_training``: what it returns cannot train the model although it
    is finite and carries a gradient (a result that matches it on a hidden case caps the function's points, as
    the generic failures that stop training do: :func:`instructor.grading.stops_training`)."""
    return _register(function, "wrong", diagnosis, defaults, stops_training)


def right(function: str) -> Callable[[Callable], Callable]:
    """Catalogue a right answer to ``function`` written differently: it must pass every graded case."""
    return _register(function, "right")


def wrong_variants(function: str) -> list[Variant]:
    """The wrong variants of ``function``, in their order; imports its book module (only that one)."""
    load_book(function)
    return [v for v in _VARIANTS if v.function == function and v.verdict == "wrong"]


def tie_zeroed(fn: Callable) -> Callable:
    """``fn`` with a tie handled as the key handles it: the advantages of a tied group (compute_group_advantages),
    of equal advantages (compute_advantages, normalized) or the deltas of a tied row (compute_deltas, centered and
    normalized) are 0. For the variants whose one mistake is elsewhere: their results on a tie case then do not
    coincide with the tie mistake's, which would name their mistake for it."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def variant(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        x, rewards = call.arguments, call.arguments["rewards"]
        if "group_size" in x:  # (N,): each reply, whether its group is tied
            grouped = rewards.detach().view(-1, x["group_size"])
            tied = (grouped == grouped[:, :1]).all(dim=1, keepdim=True).expand_as(grouped).reshape(-1)
        elif "values" in x:  # 0-dim: whether every advantage is the same
            a = (rewards - x["values"]).detach()
            tied = (a == a.flatten()[0]).all() & x["normalize"]
        else:  # (batch, 1): whether a row is tied, in the two modes that centre it
            tied = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
            tied &= x["mode"] in ("centered_rewards", "normalized_rewards")
        out = fn(*args, **kwargs)
        if isinstance(out, torch.Tensor) and (
            tied.dim() == 0 or tied.numel() == out.numel() or tied.dim() == out.dim()
        ):
            return out.masked_fill(tied.view(out.shape) if tied.numel() == out.numel() else tied, 0.0)
        return out

    return variant
