"""Instructor only: build the graded cases from the answer key (see :mod:`rlhf_practice.checks`).

    python -m instructor fixtures      # record tests/fixtures/graded_cases.pt from the key

:func:`build_cases` with ``seed=None`` gives the committed cases (fixed inputs: the task book's
examples, edge cases and seeded random inputs); with a seed it gives fresh inputs, which the grader
uses as hidden cases: other random inputs, and a variant of every fixed case with the same structure
and other values (the §2.1 table with other ratios, in another order; a group of equal rewards at
another value; an all-masked row in another position), so that no published expected value is one
of theirs. Expected values and gradients come from the key. Each case also
records what every wrong variant of :mod:`instructor.mistakes` returns on its inputs, under the
variant's diagnosis, so that a failure can name the mistake without the key: this module writes
inputs, never a mistake. :mod:`instructor.fixtures` compares a recording with the key, with a
tolerance per dtype.
"""

from __future__ import annotations

import warnings

import torch

from instructor.mistakes import wrong_variants
from rlhf_practice.checks import build_model, fresh_inputs, model_data, run_case
from rlhf_practice.course import graded, load_impl, module_of

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
    return any(x.shape != y.shape or not torch.allclose(x, y, **tol) for x, y in zip(a, b))


def _plain_like(got, expected) -> bool:
    """A result of the expected structure, shapes and dtypes: one the generic checks do not stop before
    the values are compared (NaN included: a NaN that a mistake makes is recorded, so that it is named)."""
    if isinstance(expected, float):
        return type(got) is float
    got, expected = (got, expected) if isinstance(expected, list) else ([got], [expected])
    return (
        isinstance(got, list)
        and len(got) == len(expected)
        and all(type(g) is torch.Tensor and g.shape == e.shape and g.dtype == e.dtype for g, e in zip(got, expected))
    )


def _case(key, function, section, id, what, args, *, kwargs=None, grads=None, **extra) -> dict:
    """One case dict; ``expected`` is what the key returns on ``args``: every case checks the value.

    A function that returns a tuple gets ``outputs`` (the names of its parts); its ``expected`` and
    each mistake are then lists of tensors. ``raises="ValueError"``: the key raises it on ``args``, and
    so must the function under test (``expected`` is None).
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
    assert not extra, extra
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
        if result["error"] or not _plain_like(got, case["expected"]) or result["modes"] != case["modes"]:
            continue  # the generic checks tell these (a model left in another mode: whatever its dropout drew)
        if _differs(got, case["expected"]):
            case["mistakes"].setdefault(variant.diagnosis, got)
            continue
        for name, grad in case["grads"].items():
            wrong = result["grads"].get(name)
            if grad["expected"].any() and _plain_like(wrong, grad["expected"]) and _differs(wrong, grad["expected"]):
                grad["mistakes"].setdefault(variant.diagnosis, wrong)


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


# ----------------------------------------------------------------------------- compute_advantages (§1.2)


def advantage_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_advantages", fresh)
    rewards, values = torch.tensor([1.0, 0.0, 0.5, -0.5]), torch.tensor([0.5, 0.5, 0.0, 0.0])
    example = "the §1.2 example (rewards = [1.0, 0.0, 0.5, -0.5]"
    if fresh:
        rewards, values = _uniform(g, -1, 1, 4, dtype=torch.float32), _uniform(g, -0.5, 1, 4, dtype=torch.float32)
        example = f"a fresh variant of the §1.2 example (rewards = {_show(rewards)}, values = {_show(values)}"
    for normalize in (True, False):
        add(
            "book_example" + ("" if normalize else "_without_normalize"),
            f"compute_advantages on {example}, normalize={normalize})",
            [("rewards", rewards), ("values", values)],
            kwargs={"normalize": normalize},
            book="§1.2",
        )
    rewards, values = torch.tensor([1.0, -0.5, 0.25, 0.0, 0.75]), torch.tensor([0.1, 0.2, -0.3, 0.4, 0.0])
    weights = torch.arange(1.0, 6.0)
    if fresh:
        rewards, values = _uniform(g, -1, 1, 5, dtype=torch.float32), _uniform(g, -0.5, 0.5, 5, dtype=torch.float32)
        weights = _uniform(g, 0.5, 5, 5, dtype=torch.float32)
    for normalize in (True, False):
        add(
            f"no_gradient_to_values_normalize_{normalize}",
            f"compute_advantages with values that carry gradient (normalize={normalize})",
            [("rewards", rewards), ("values", values)],
            kwargs={"normalize": normalize},
            grad_weights=weights,
            grads={
                "values": _grad(
                    torch.zeros(5),
                    "missing detach: use values.detach(), the advantages are constants for the policy update",
                )
            },
        )
    rewards, values = torch.tensor([1.0, -0.5, 0.25, 0.0]), torch.tensor([0.1, 0.2, -0.3, 0.4])
    if fresh:
        rewards, values = _uniform(g, -1, 1, 4, dtype=torch.float32), _uniform(g, -0.5, 0.5, 4, dtype=torch.float32)
    add("inputs_unmodified", "compute_advantages", [("rewards", rewards), ("values", values)], unmodified=True)
    rewards, values = torch.full((4,), 0.7), torch.zeros(4)
    if fresh:  # rewards - values: one value, drawn; the values too (eighths: the differences are exact)
        values = torch.randint(-8, 9, (4,), generator=g) / 8
        rewards = values + (torch.randint(1, 9, (), generator=g) * _signs(g, 1, dtype=torch.float32)) / 8
    add(
        "constant_gives_zeros_not_nan",
        "compute_advantages with all advantages equal",
        [("rewards", rewards), ("values", values)],
    )
    for dtype in DTYPES:  # equal advantages whose float32 mean is off by an ulp: 0 all the same (to within 0.01)
        rewards, values = torch.full((8,), 1.4, dtype=dtype), torch.zeros(8, dtype=dtype)
        if fresh:
            n, value = int(torch.randint(5, 65, (), generator=g)), _uniform(g, -0.5, 0.5, 1).item()
            rewards = torch.full((n,), _tie_value(g, n, value), dtype=dtype)
            values = torch.full_like(rewards, value)
        add(
            f"equal_advantages_non_dyadic_{_name(dtype)}",
            f"compute_advantages on {len(rewards)} replies with rewards - values all equal to "
            f"{(rewards - values)[0].item():.4g} ({dtype}), normalize=True: the advantages are 0 (to within 0.01)",
            [("rewards", rewards), ("values", values)],
            atol=TIE_TOLERANCE,
        )
    for dtype in DTYPES:
        for shape in ((5,), (64,), (257,), (4, 8)):
            for normalize in (True, False):
                rewards = torch.rand(shape, generator=g, dtype=F64).mul(2).sub(1).to(dtype)
                values = torch.randn(shape, generator=g, dtype=F64).mul(0.5).to(dtype)
                add(
                    f"random_{_name(dtype)}_{'x'.join(map(str, shape))}_normalize_{normalize}",
                    f"compute_advantages on random {dtype} inputs of shape {shape}, normalize={normalize}",
                    [("rewards", rewards), ("values", values)],
                    kwargs={"normalize": normalize},
                )
    return cases


# ----------------------------------------------------------------------------- ppo_clip_loss (§2.2)

BOOK_RATIOS = [1.5, 0.5, 0.5, 1.5]  # TASKS.md §2.1, the four rows of the table
BOOK_ADVANTAGES = [1.0, 1.0, -1.0, -1.0]


def _clip_inputs(new, old, adv, clip_range=0.2) -> list:
    return [("new_logprobs", new), ("old_logprobs", old), ("advantages", adv), ("clip_range", clip_range)]


def clip_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "ppo_clip_loss", fresh)
    old = torch.tensor([-3.0, -2.0, -4.0, -1.0], dtype=F64)
    ratios, adv = torch.tensor(BOOK_RATIOS, dtype=F64), torch.tensor(BOOK_ADVANTAGES, dtype=F64)
    table = "the §2.1 table (ratios 1.5, 0.5, 0.5, 1.5; A = +1, +1, -1, -1"
    if fresh:  # the table's four rows, each outside every clip range (0.1-0.3) on its side, in another order
        ratios = torch.cat([_uniform(g, 1.35, 2.0, 1), _uniform(g, 0.3, 0.65, 2), _uniform(g, 1.35, 2.0, 1)])
        adv = torch.tensor(BOOK_ADVANTAGES, dtype=F64) * _uniform(g, 0.3, 2.0, 4)
        order = _perm(g, 4)
        ratios, adv, old = ratios[order], adv[order], _uniform(g, -6, -0.5, 4)
        table = f"a fresh variant of the §2.1 table (ratios {_show(ratios)}; A = {_show(adv)}"
    new = old + torch.log(ratios)
    book = (new, old, adv)
    for clip_range in (0.2, 0.1, 0.3):
        add(
            "book_example" + ("" if clip_range == 0.2 else f"_clip_range_{clip_range}"),
            f"ppo_clip_loss on {table}; clip_range={clip_range})",
            _clip_inputs(*book, clip_range),
            book="§2.2" if clip_range == 0.2 else "",
        )
    # d loss / d new = -(1/N) ratio A where the unclipped term is the min, else 0 (rows 2 and 4 of the table).
    expected = torch.tensor([0.0, -0.125, 0.0, 0.375], dtype=F64)
    if fresh:
        expected = _grads_of(key.ppo.ppo_clip_loss, _clip_inputs(*book), ["new_logprobs"])["new_logprobs"]
    add(
        "book_example_gradient",
        f"ppo_clip_loss on {table.split(' (')[0] if not fresh else table + ')'} (clipped samples must get gradient 0)",
        _clip_inputs(*book),
        grads={"new_logprobs": _grad(expected)},
    )
    # Ratios inside the clip range (1.1) tie the two terms: the gradient must still flow there.
    old2 = torch.tensor([-3.0, -2.0, -4.0, -1.0], dtype=F64)
    ratios2, adv2 = torch.tensor([1.5, 0.5, 1.1, 0.7], dtype=F64), torch.tensor([2.0, 1.0, -1.0, -0.5], dtype=F64)
    expected2 = torch.tensor([0.0, -0.125, 0.275, 0.0], dtype=F64)
    if fresh:  # clipped with A > 0, unclipped with A > 0, inside the range, clipped with A < 0: in another order
        ratios2 = torch.cat([_uniform(g, 1.3, 2.0, 1), _uniform(g, 0.3, 0.75, 1), _uniform(g, 0.85, 1.15, 1)])
        ratios2 = torch.cat([ratios2, _uniform(g, 0.3, 0.75, 1)])
        adv2 = _uniform(g, 0.3, 2.5, 4) * torch.cat([torch.ones(2, dtype=F64), _signs(g, 1), -torch.ones(1, dtype=F64)])
        order = _perm(g, 4)
        ratios2, adv2, old2 = ratios2[order], adv2[order], _uniform(g, -6, -0.5, 4)
        args = _clip_inputs(old2 + torch.log(ratios2), old2, adv2)
        expected2 = _grads_of(key.ppo.ppo_clip_loss, args, ["new_logprobs"])["new_logprobs"]
    add(
        "gradient_inside_and_outside_the_clip_range",
        f"ppo_clip_loss with ratios {', '.join(f'{r:g}' for r in ratios2.tolist())} and A = "
        + ", ".join(f"{a:g}" for a in adv2.tolist()),
        _clip_inputs(old2 + torch.log(ratios2), old2, adv2),
        grads={"new_logprobs": _grad(expected2)},
    )
    # The standard form (no .detach() on old_logprobs/advantages) is right: only new_logprobs' gradient counts.
    add(
        "gradient_when_every_input_requires_grad",
        "ppo_clip_loss when every input requires grad",
        _clip_inputs(*book),
        grad_of=["new_logprobs", "old_logprobs", "advantages"],
        grads={"new_logprobs": _grad(expected)},
    )
    old, step = torch.tensor([-300.0, -310.0, -295.5, -305.0]), torch.tensor([0.05, -0.3, 0.4, 0.0])
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    if fresh:
        old, step = _uniform(g, -320, -280, 4, dtype=torch.float32), _uniform(g, -0.4, 0.4, 4, dtype=torch.float32)
        adv = _uniform(g, -1.5, 1.5, 4, dtype=torch.float32)
    add(
        "sequence_level_logprobs_stay_finite",
        "ppo_clip_loss with log-probs around -300",
        _clip_inputs(old + step, old, adv),
    )
    old = torch.tensor([-5.0, -6.0, -7.0, -8.0, -9.0])
    ratios, constants = torch.tensor([0.6, 0.9, 1.0, 1.1, 1.4]), (1.0, -2.0)
    if fresh:
        old = _uniform(g, -10, -3, 5, dtype=torch.float32)
        ratios = _uniform(g, 0.5, 1.5, 5, dtype=torch.float32).sort().values
        constants = (_uniform(g, 0.5, 2.5, 1).item(), _uniform(g, -3, -0.5, 1).item())
    new = old + torch.log(ratios)
    for value, sign in zip(constants, ("positive", "negative")):
        add(
            f"constant_advantages_{sign if fresh else f'{value:g}'}",
            f"ppo_clip_loss with every advantage = {value:g}",
            _clip_inputs(new, old, torch.full((5,), value)),
        )
    old, adv = torch.tensor([-12.0, -40.0, -7.5]), torch.tensor([0.5, -1.5, 2.5])
    if fresh:
        old, adv = _uniform(g, -50, -5, 3, dtype=torch.float32), _uniform(g, -3, 3, 3, dtype=torch.float32)
    add(
        "ratio_one_gives_minus_mean_advantage",
        "ppo_clip_loss with new_logprobs == old_logprobs (ratio 1, so loss = -mean(A))",
        _clip_inputs(old.clone(), old, adv),
    )
    add("inputs_unmodified", "ppo_clip_loss", _clip_inputs(*book), unmodified=True)
    for dtype in DTYPES:
        for n in (3, 64, 500):
            for clip_range in (0.1, 0.2, 0.3):
                old = (torch.rand(n, generator=g, dtype=F64) * -30).to(dtype)
                new = (old.double() + torch.randn(n, generator=g, dtype=F64) * 0.3).to(dtype)
                adv = torch.randn(n, generator=g, dtype=F64).to(dtype)
                add(
                    f"random_{_name(dtype)}_n{n}_clip_range_{clip_range}",
                    f"ppo_clip_loss on random {dtype} inputs, N={n}, clip_range={clip_range}",
                    _clip_inputs(new, old, adv, clip_range),
                )
    return cases


# ----------------------------------------------------------------------------- compute_group_advantages (§3.2)

BOOK_GROUP_REWARDS = [1.0, 0.0, -1.0, 0.2, 0.4, 0.9]  # TASKS.md §3.1: B = 2 prompts x K = 3 replies


def group_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_group_advantages", fresh)
    rewards, example = torch.tensor(BOOK_GROUP_REWARDS), "the 2 x 3 task-book example"
    if fresh:
        rewards = _uniform(g, -1, 1, 6, dtype=torch.float32)
        example = f"a fresh variant of the 2 x 3 task-book example (rewards = {_show(rewards)})"
    for normalize in (True, False):
        add(
            "book_example" + ("" if normalize else "_without_normalize"),
            f"compute_group_advantages on {example}" + ("" if normalize else " (normalize=False)"),
            [("rewards", rewards), ("group_size", 3)],
            kwargs={"normalize": normalize},
            book="§3.1",
        )
    rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0, -1.0, 0.0, 0.0, -0.25, -0.25, -0.25, -0.25])
    if fresh:  # two groups of equal rewards at other values, one group of different ones, in another order
        groups = [_uniform(g, -1, 1, 1).expand(4), _uniform(g, -1, 1, 4), _uniform(g, -1, 1, 1).expand(4)]
        rewards = torch.cat([groups[i] for i in _perm(g, 3).tolist()]).float()
    for normalize in (True, False):
        add(
            f"equal_rewards_give_zero_normalize_{normalize}",
            f"compute_group_advantages with groups of equal rewards (normalize={normalize})",
            [("rewards", rewards), ("group_size", 4)],
            kwargs={"normalize": normalize},
        )
    for dtype in DTYPES:  # ties at values whose float32 mean is off by an ulp, beside a group that is not tied
        values, spread = [1.4, 0.4, 1 / 3], torch.tensor([0.0, 1.0, 0.5, 0.2, 0.9, 0.4, 0.7, 0.6])
        if fresh:
            values, spread = [_tie_value(g) for _ in range(3)], _uniform(g, -1, 1, 8)
        groups = [torch.full((8,), v, dtype=F64) for v in values] + [spread]
        rewards = torch.cat([groups[i] for i in (_perm(g, 4).tolist() if fresh else range(4))]).to(dtype)
        tied = ", ".join(f"{v:.4g}" for v in values)
        for normalize in (True, False):
            add(
                f"tied_groups_non_dyadic_{_name(dtype)}_normalize_{normalize}",
                f"compute_group_advantages on 4 groups of 8 ({dtype}), three tied (all 8 rewards {tied}) and one "
                f"not, normalize={normalize}: a tied group's advantages are 0 (to within 0.01)",
                [("rewards", rewards), ("group_size", 8)],
                kwargs={"normalize": normalize},
                atol=TIE_TOLERANCE,
            )
    rewards = torch.tensor(BOOK_GROUP_REWARDS)
    if fresh:
        rewards = _uniform(g, -1, 1, 6, dtype=torch.float32)
    add("inputs_unmodified", "compute_group_advantages", [("rewards", rewards), ("group_size", 3)], unmodified=True)
    for dtype in DTYPES:
        for num_prompts, group_size in ((1, 4), (2, 3), (3, 2), (8, 4), (5, 8)):
            for normalize in (True, False):
                rewards = (torch.rand(num_prompts * group_size, generator=g, dtype=F64) * 2 - 1).to(dtype)
                # Give groups different offsets so that group and batch statistics differ clearly.
                rewards = rewards + torch.arange(num_prompts, dtype=dtype).repeat_interleave(group_size) * 0.5
                add(
                    f"random_{_name(dtype)}_B{num_prompts}_K{group_size}_normalize_{normalize}",
                    f"compute_group_advantages on random {dtype} rewards, B={num_prompts}, group_size={group_size}, normalize={normalize}",
                    [("rewards", rewards), ("group_size", group_size)],
                    kwargs={"normalize": normalize},
                )
    return cases


# ----------------------------------------------------------------------------- grpo_loss (§3.3)


def grpo_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "grpo_loss", fresh)
    args = [
        ("logprobs", torch.tensor([-2.0, -3.0, -1.0, -4.0])),
        ("advantages", torch.tensor([1.0, -1.0, 0.5, -0.5])),
    ]
    call, expected = "grpo_loss(logprobs=[-2, -3, -1, -4], advantages=[1, -1, 0.5, -0.5])", " (= -2.5 / 4)"
    grad = torch.tensor([-0.25, 0.25, -0.125, 0.125])  # d loss / d logprobs = -A / N
    if fresh:
        lp, adv = _uniform(g, -5, -0.5, 4, dtype=torch.float32), _uniform(g, -1.5, 1.5, 4, dtype=torch.float32)
        args = [("logprobs", lp), ("advantages", adv)]
        call, expected = f"grpo_loss(logprobs={_show(lp)}, advantages={_show(adv)})", ""
        grad = _grads_of(key.grpo.grpo_loss, args, ["logprobs"])["logprobs"]
    add("hand_computed", call + expected, args)
    add(
        "gradients",
        call,
        args,
        grads={
            "logprobs": _grad(grad),
            "advantages": _grad(torch.zeros(4), "missing detach: use advantages.detach()"),
        },
    )
    logprobs = torch.tensor([-250.0, -310.0, -120.0])
    if fresh:
        logprobs = _uniform(g, -350, -100, 3, dtype=torch.float32)
    add(
        "zero_advantages_give_zero",
        "grpo_loss with all advantages 0",
        [("logprobs", logprobs), ("advantages", torch.zeros(3))],
    )
    if fresh:
        f32 = torch.float32
        args = [("logprobs", _uniform(g, -5, -0.5, 4, dtype=f32)), ("advantages", _uniform(g, -1, 1, 4, dtype=f32))]
    add("inputs_unmodified", "grpo_loss", args, unmodified=True)
    for dtype in DTYPES:
        for n in (2, 12, 256):
            logprobs = (torch.rand(n, generator=g, dtype=F64) * -300).to(dtype)
            advantages = torch.randn(n, generator=g, dtype=F64).to(dtype)
            add(
                f"random_{_name(dtype)}_n{n}",
                f"grpo_loss on random {dtype} inputs, N={n}",
                [("logprobs", logprobs), ("advantages", advantages)],
            )
    return cases


# ----------------------------------------------------------------------------- token level (tasks 7-9)
#
# Masks are (N, T) rows of ones then zeros. Padding columns hold large junk values on purpose, so that
# using them shows up as a wrong number instead of a lucky zero.


def _mask(lengths, num_tokens, dtype=F64):
    return (torch.arange(num_tokens).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(dtype)


def _random_mask(g, rows, num_tokens, dtype):
    lengths = torch.randint(1, num_tokens + 1, (rows,), generator=g).tolist()
    lengths[0] = num_tokens  # one full-length reply
    if rows > 1:
        lengths[1] = 1  # one reply that is EOS at once
    return _mask(lengths, num_tokens, dtype)


def _junk(values, mask, junk=50.0):
    """``values`` with ``junk`` written into the padding (where mask is 0)."""
    return torch.where(mask > 0, values, torch.full_like(values, junk))


def _grads_of(fn, args, names):
    """{name: d sum(fn(args)) / d arg} with autograd (a tuple result: the sum of its parts)."""
    args = {k: v.clone().requires_grad_(k in names) if isinstance(v, torch.Tensor) else v for k, v in args}
    out = fn(*args.values())
    parts = out if isinstance(out, tuple) else (out,)
    grads = torch.autograd.grad(sum(p.sum() for p in parts), [args[n] for n in names], allow_unused=True)
    return {n: (gr if gr is not None else torch.zeros_like(args[n])).detach() for n, gr in zip(names, grads)}


# masked_mean (§7.2)

MEAN_BOOK_VALUES = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 50.0, 50.0]]  # TASKS.md §7.2
MEAN_BOOK_MASK = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]


def _fresh_mask(g: torch.Generator, full: int, num_tokens: int, dtype=F64) -> torch.Tensor:
    """Rows of a fresh variant of a book mask: one full row, then rows of 1 .. num_tokens - 1 tokens, in a
    drawn order."""
    lengths = [num_tokens] + torch.randint(1, num_tokens, (full - 1,), generator=g).tolist()
    return _mask([lengths[i] for i in _perm(g, full).tolist()], num_tokens, dtype)


def masked_mean_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "masked_mean", fresh)
    values, mask = torch.tensor(MEAN_BOOK_VALUES, dtype=F64), torch.tensor(MEAN_BOOK_MASK, dtype=F64)
    example = f"the §7.2 example (values = {MEAN_BOOK_VALUES}"
    if fresh:
        mask = _fresh_mask(g, 2, 4)
        values = _junk(_uniform(g, -5, 5, 2, 4), mask, _uniform(g, 20, 80, 1).item())
        example = f"a fresh variant of the §7.2 example (values = {_show(values)}, mask = {_show(mask)}"
    book = [("values", values), ("mask", mask)]
    for dim in (None, 1):
        args = [("values", values), ("mask", mask), ("dim", dim)]
        add(
            f"book_example_dim_{dim}",
            f"masked_mean on {example}, dim={dim})",
            args,
            grads={"values": _grad(_grads_of(key.token_level.masked_mean, args, ["values"])["values"])},
            book="§7.2",
        )
    values, mask = torch.tensor([[1.0, 7.0], [3.0, 4.0]], dtype=F64), _mask([1, 0], 2)
    if fresh:  # 2-4 rows of 2-4 tokens; the row with no real token somewhere else
        rows, num_tokens = (int(n) for n in torch.randint(2, 5, (2,), generator=g))
        lengths = torch.randint(1, num_tokens + 1, (rows,), generator=g)
        lengths[int(torch.randint(0, rows, (), generator=g))] = 0
        values, mask = _uniform(g, -5, 5, rows, num_tokens), _mask(lengths.tolist(), num_tokens)
    add(
        "all_masked_row_gives_zero",
        f"masked_mean(values={_show(values)}, mask={_show(mask)}, dim=1) (a row has no real token)"
        if fresh
        else "masked_mean(values=[[1, 7], [3, 4]], mask=[[1, 0], [0, 0]], dim=1) (the second row has no real token)",
        [("values", values), ("mask", mask), ("dim", 1)],
    )
    values, mask = torch.tensor(MEAN_BOOK_VALUES), torch.tensor(MEAN_BOOK_MASK)
    if fresh:
        mask = _fresh_mask(g, 2, 4, torch.float32)
        values = _junk(_uniform(g, -5, 5, 2, 4, dtype=torch.float32), mask)
    add("inputs_unmodified", "masked_mean", [("values", values), ("mask", mask), ("dim", None)], unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((3, 5), (16, 12)):
            for dim in (None, 1):
                mask = _random_mask(g, rows, num_tokens, dtype)
                values = _junk(torch.randn(rows, num_tokens, generator=g, dtype=F64).to(dtype), mask)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_dim_{dim}",
                    f"masked_mean on random {dtype} values of shape ({rows}, {num_tokens}), dim={dim}",
                    [("values", values), ("mask", mask), ("dim", dim)],
                )
    # After the random draws, so that the committed random cases stay as they were recorded.
    add("default_dim", f"masked_mean on {example}) without dim (its default, None: one mean)", book)
    values, mask = torch.tensor([[1.0, 7.0, 2.0], [3.0, 4.0, 5.0], [2.0, -1.0, 6.0]], dtype=F64), _mask([2, 0, 3], 3)
    if fresh:  # the row with no real token in a drawn position, real tokens in the others
        lengths = torch.randint(1, 4, (3,), generator=g)
        lengths[int(torch.randint(0, 3, (), generator=g))] = 0
        mask = _mask(lengths.tolist(), 3)
        values = _junk(_uniform(g, -5, 5, 3, 3), mask, _uniform(g, 20, 80, 1).item())
    args = [("values", values), ("mask", mask), ("dim", 1)]
    add(
        "all_masked_row_gradient",
        f"masked_mean(values={_show(values)}, mask={_show(mask)}, dim=1): the gradient w.r.t. values, finite "
        "(0) on the row with no real token",
        args,
        grads={"values": _grad(_grads_of(key.token_level.masked_mean, args, ["values"])["values"])},
    )
    return cases


# per_token_kl (§7.3)

KL_BOOK = ([[-1.0, -2.0, -0.5]], [[-1.5, -1.0, -0.5]], [[1.0, 1.0, 0.0]])  # TASKS.md §7.3


def kl_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "per_token_kl", fresh)
    logprobs, ref_logprobs, mask = (torch.tensor(x, dtype=F64) for x in KL_BOOK)
    ref_logprobs = _junk(ref_logprobs, mask, -9.0)
    example = f"the §7.3 example (logprobs = {KL_BOOK[0]}, ref_logprobs = {KL_BOOK[1]}, last token masked"
    if fresh:
        logprobs, ref_logprobs = _uniform(g, -3, -0.1, 1, 3), _uniform(g, -3, -0.1, 1, 3)
        ref_logprobs = _junk(ref_logprobs, mask, _uniform(g, -12, -6, 1).item())
        example = f"a fresh variant of the §7.3 example (logprobs = {_show(logprobs)}, ref_logprobs = "
        example += f"{_show(ref_logprobs)}, last token masked"
    book = [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask)]
    for estimator in ("k1", "k3"):
        args = [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask), ("estimator", estimator)]
        add(
            f"book_example_{estimator}",
            f"per_token_kl on {example}, estimator={estimator!r})",
            args,
            book="§7.3",
        )
        expected = _grads_of(key.token_level.per_token_kl, args, ["logprobs"])["logprobs"]
        add(
            f"gradient_{estimator}",
            f"per_token_kl on {example.split(' (')[0]} (estimator={estimator!r})",
            args,
            grads={"logprobs": _grad(expected)},
        )
    add(
        "inputs_unmodified",
        "per_token_kl",
        [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask), ("estimator", "k3")],
        unmodified=True,
    )
    for dtype in DTYPES:
        for rows, num_tokens in ((2, 4), (16, 12)):
            for estimator in ("k1", "k3"):
                mask = _random_mask(g, rows, num_tokens, dtype)
                ref_logprobs = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 6
                logprobs = ref_logprobs + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.7
                ref_logprobs = _junk(ref_logprobs, mask, -30.0)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_{estimator}",
                    f"per_token_kl on random {dtype} log-probs of shape ({rows}, {num_tokens}), estimator={estimator!r}",
                    [
                        ("logprobs", logprobs.to(dtype)),
                        ("ref_logprobs", ref_logprobs.to(dtype)),
                        ("mask", mask),
                        ("estimator", estimator),
                    ],
                )
    add("default_estimator", f"per_token_kl on {example}) without estimator (its default is 'k3')", book)
    for estimator in ("k2", "K3"):
        add(
            f"unknown_estimator_{estimator}",
            f"per_token_kl with estimator={estimator!r} (only 'k1' and 'k3' are known: any other raises ValueError)",
            [*book, ("estimator", estimator)],
            raises="ValueError",
        )
    return cases


# compute_gae (§8.2)

GAE_BOOK = ([[0.0, 0.0, 1.0, 0.0], [0.7, 0.0, 0.0, 0.0]], [[0.5, 0.6, 0.8, 9.0], [0.2, 5.0, 5.0, 5.0]], [3, 1])  # §8.2


def gae_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_gae", fresh, outputs=["advantages", "returns"])

    def inputs(rewards, values, mask, gamma, lam):
        return [("rewards", rewards), ("values", values), ("mask", mask), ("gamma", gamma), ("lam", lam)]

    book = torch.tensor(GAE_BOOK[0], dtype=F64), torch.tensor(GAE_BOOK[1], dtype=F64), _mask(GAE_BOOK[2], 4)
    example, replies, lam, gamma = "the §8.2 example", "a 3-token reply and a reply that is EOS at once", 0.9, 0.8
    if fresh:  # a reply of 2-4 tokens and one that is EOS at once, in a drawn order; a reward on each last token
        lengths = [int(torch.randint(2, 5, (), generator=g)), 1]
        lengths = [lengths[i] for i in _perm(g, 2).tolist()]
        mask = _mask(lengths, 4)
        last = torch.nn.functional.one_hot(torch.tensor(lengths) - 1, 4).to(F64)
        rewards = last * _uniform(g, -1, 1, 2, 1)
        values = _junk(_uniform(g, 0, 1, 2, 4), mask, _uniform(g, 3, 10, 1).item())
        book = rewards, values, mask
        example, replies = "a fresh variant of the §8.2 example", f"replies of {lengths[0]} and {lengths[1]} tokens"
        lam, gamma = _uniform(g, 0.8, 0.97, 1).item(), _uniform(g, 0.7, 0.95, 1).item()
    add(
        "book_example",
        f"compute_gae on {example} ({replies}; gamma=1, lam={lam})",
        inputs(*book, 1.0, lam),
        book="§8.2",
    )
    add(
        f"book_example_gamma_{gamma}",
        f"compute_gae on {example} with gamma={gamma}, lam={lam}",
        inputs(*book, gamma, lam),
    )
    add(
        "lam_0_is_one_step_td",
        f"compute_gae on {example} with gamma=1, lam=0 (A_t = delta_t)",
        inputs(*book, 1.0, 0.0),
    )
    rewards = torch.tensor([[0.1, 1.0, 3.0], [2.0, 2.0, 2.0]], dtype=F64)
    values, mask, where = torch.tensor([[0.3, 0.4, 4.0], [1.0, 1.0, 1.0]], dtype=F64), _mask([2, 0], 3), "a second row"
    if fresh:  # 2-4 rows of 3 tokens; the row whose mask is all 0 somewhere else
        rows = int(torch.randint(2, 5, (), generator=g))
        lengths = torch.randint(1, 4, (rows,), generator=g)
        empty = int(torch.randint(0, rows, (), generator=g))
        lengths[empty] = 0
        mask, where = _mask(lengths.tolist(), 3), f"row {empty}"
        rewards, values = _uniform(g, -1, 3, rows, 3), _uniform(g, -1, 4, rows, 3)
    add(
        "all_masked_row_gives_zeros",
        f"compute_gae with {where} whose mask is all 0",
        inputs(rewards, values, mask, 1.0, 0.95),
    )
    add(
        "no_gradient_to_values",
        "compute_gae with values that carry gradient",
        inputs(*book, 1.0, lam),
        grads={
            "values": _grad(torch.zeros(2, 4, dtype=F64), "missing detach: use values.detach(); A and R are constants")
        },
    )
    padded = (_junk(book[0], book[2], 2.5), *book[1:])  # rewards and values hold values in the padding
    add("inputs_unmodified", "compute_gae", inputs(*padded, 1.0, lam), unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((3, 5), (16, 12)):
            for gamma, lam in ((1.0, 0.95), (0.9, 0.8)):
                mask = _random_mask(g, rows, num_tokens, dtype)
                rewards = _junk((torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.1).to(dtype), mask, 7.0)
                values = _junk(torch.randn(rows, num_tokens, generator=g, dtype=F64).to(dtype), mask, 9.0)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_gamma_{gamma}_lam_{lam}",
                    f"compute_gae on random {dtype} inputs of shape ({rows}, {num_tokens}), gamma={gamma}, lam={lam}",
                    inputs(rewards, values, mask, gamma, lam),
                )
    return cases


# token_ppo_loss (§8.3)

TOKEN_PPO_NAMES = ("new_logprobs", "old_logprobs", "advantages", "new_values", "old_values", "returns", "mask")


def _very_unlikely(g: torch.Generator, fresh: bool) -> torch.Tensor:
    """(2, 3) float32 old log-probs of very unlikely tokens, -200 to -120: exp() of them underflows to 0."""
    if fresh:
        return _uniform(g, -200, -120, 2, 3, dtype=torch.float32)
    return torch.tensor([[-150.0, -180.0, -125.0], [-200.0, -140.0, -160.0]])


def _token_ppo_book():
    """TASKS.md §8.3: two replies of 3 and 2 tokens (the third column of reply 2 is padding)."""
    mask = _mask([3, 2], 3)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.5, -2.0]], dtype=F64)
    new = old + torch.log(torch.tensor([[1.5, 0.5, 1.0], [0.5, 1.5, 9.0]], dtype=F64))
    adv = torch.tensor([[1.0, 1.0, 0.5], [-1.0, -1.0, 5.0]], dtype=F64)
    new_v = torch.tensor([[0.5, 0.0, 1.0], [0.3, 0.2, 7.0]], dtype=F64)
    old_v = torch.tensor([[0.2, 0.1, 0.9], [0.3, 0.5, 7.0]], dtype=F64)
    ret = torch.tensor([[1.0, -1.0, 1.0], [0.0, 0.5, 3.0]], dtype=F64)
    return new, old, adv, new_v, old_v, ret, mask


def _bands(g: torch.Generator, bands: list[tuple[float, float]], *shape: int) -> torch.Tensor:
    """Values drawn from one of ``bands`` each (a band drawn per value, then a value in it)."""
    which = torch.randint(0, len(bands), shape, generator=g)
    low, high = (torch.tensor([b[i] for b in bands], dtype=F64)[which] for i in (0, 1))
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=F64)).round(decimals=3)


# Ratios below, inside and above the clip ranges 0.1 and 0.2, away from their edges (where the loss has a kink).
RATIO_BANDS = [(0.4, 0.65), (0.93, 1.07), (1.35, 1.7)]


def _token_ppo_fresh(g: torch.Generator):
    """A fresh variant of the §8.3 example: two replies of 3 and 2 tokens, in a drawn order, ratios below,
    inside and above the clip range, value changes inside and outside both value clip ranges (0.2, 0.5),
    junk in the padding."""
    mask = _mask([[3, 2], [2, 3]][int(torch.randint(0, 2, (), generator=g))], 3)
    old = _uniform(g, -4, -0.2, 2, 3)
    new = old + torch.log(_junk(_bands(g, RATIO_BANDS, 2, 3), mask, _uniform(g, 5, 10, 1).item()))
    adv = _junk(_uniform(g, -1.5, 1.5, 2, 3), mask, 5.0)
    old_v = _uniform(g, -1, 1, 2, 3)
    new_v = old_v + _bands(g, [(-0.9, -0.6), (-0.45, -0.25), (-0.15, 0.15), (0.25, 0.45), (0.6, 0.9)], 2, 3)
    ret = _junk(_uniform(g, -1, 1, 2, 3), mask, _uniform(g, 2, 5, 1).item())
    return new, old, adv, new_v, old_v, ret, mask


def token_ppo_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "token_ppo_loss", fresh, outputs=["policy_loss", "value_loss"])

    def inputs(tensors, clip, clip_v):
        return [*zip(TOKEN_PPO_NAMES, tensors), ("clip_range", clip), ("clip_range_value", clip_v)]

    book, example = _token_ppo_book(), "the §8.3 example"
    if fresh:
        book, example = _token_ppo_fresh(g), "a fresh variant of the §8.3 example"
    add(
        "book_example",
        f"token_ppo_loss on {example} (clip_range=0.2, clip_range_value=0.2)",
        inputs(book, 0.2, 0.2),
        book="§8.3",
    )
    add(
        "book_example_clip_0.1_0.5",
        f"token_ppo_loss on {example} (clip_range=0.1, clip_range_value=0.5)",
        inputs(book, 0.1, 0.5),
    )
    names = ["new_logprobs", "new_values", "old_logprobs", "old_values", "advantages", "returns"]
    right = _grads_of(key.token_level.token_ppo_loss, inputs(book, 0.2, 0.2), names)
    add(
        "gradients",
        f"token_ppo_loss on {example}, every input requiring grad",
        inputs(book, 0.2, 0.2),
        grad_of=names,
        grads={"new_logprobs": _grad(right["new_logprobs"]), "new_values": _grad(right["new_values"])},
    )
    add("inputs_unmodified", "token_ppo_loss", inputs(book, 0.2, 0.2), unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((3, 4), (16, 12)):
            mask = _random_mask(g, rows, num_tokens, F64)
            old = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 5
            new = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
            adv = torch.randn(rows, num_tokens, generator=g, dtype=F64)
            old_v = torch.randn(rows, num_tokens, generator=g, dtype=F64)
            new_v = old_v + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
            ret = _junk(torch.randn(rows, num_tokens, generator=g, dtype=F64), mask, 9.0)
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}",
                f"token_ppo_loss on random {dtype} inputs of shape ({rows}, {num_tokens})",
                inputs([t.to(dtype) for t in (new, old, adv, new_v, old_v, ret, mask)], 0.2, 0.2),
            )
    new, old, adv, new_v, old_v, ret, mask = (t.float() for t in book)
    old = _very_unlikely(g, fresh)
    add(
        "very_unlikely_tokens_stay_finite",
        f"token_ppo_loss in float32 on {example} with old log-probs from -200 to -120 (very unlikely tokens)",
        inputs((old + (new - book[1].float()), old, adv, new_v, old_v, ret, mask), 0.2, 0.2),
    )
    add(
        "no_real_token",
        f"token_ppo_loss on {example} with every position masked (no real token): both losses 0, not NaN",
        inputs((*book[:6], torch.zeros_like(book[6])), 0.2, 0.2),
    )
    return cases


# grpo_clip_loss (§9.2)

GRPO_CLIP_NAMES = ("logprobs", "old_logprobs", "ref_logprobs", "advantages", "mask")


def _grpo_clip_book():
    """TASKS.md §9.2: two replies (3 tokens and 1 token) of one group, max_new_tokens = 4."""
    mask = _mask([3, 1], 3)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.2, -4.0, -4.0]], dtype=F64)
    lp = old + torch.log(torch.tensor([[1.5, 0.9, 1.0], [0.7, 1.0, 1.0]], dtype=F64))
    ref = torch.tensor([[-1.0, -1.5, -0.5], [-1.0, -9.0, -9.0]], dtype=F64)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    return lp, old, ref, adv, mask


def _grpo_clip_fresh(g: torch.Generator):
    """A fresh variant of the §9.2 example: replies of 3 tokens and 1 token in a drawn order, ratios below,
    inside and above the clip range, advantages +a and -a, junk in the padding."""
    mask = _mask([[3, 1], [1, 3]][int(torch.randint(0, 2, (), generator=g))], 3)
    old = _uniform(g, -4, -0.2, 2, 3)
    lp = old + torch.log(_bands(g, RATIO_BANDS, 2, 3))
    ref = _junk(old + _uniform(g, -1, 1, 2, 3), mask, _uniform(g, -12, -6, 1).item())
    adv = _uniform(g, 0.3, 1.5, 1) * torch.tensor([1.0, -1.0], dtype=F64)[_perm(g, 2)]
    return lp, old, ref, adv, mask


def grpo_clip_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "grpo_clip_loss", fresh)

    def inputs(tensors, clip, beta, loss_type, max_tokens):
        return [
            *zip(GRPO_CLIP_NAMES, tensors),
            ("clip_range", clip),
            ("beta", beta),
            ("loss_type", loss_type),
            ("max_tokens", max_tokens),
        ]

    book, example = _grpo_clip_book(), "the §9.2 example"
    if fresh:
        book, example = _grpo_clip_fresh(g), "a fresh variant of the §9.2 example"
    for loss_type in ("grpo", "dapo", "dr_grpo"):
        args = inputs(book, 0.2, 0.1, loss_type, 4)
        add(
            f"book_example_{loss_type}",
            f"grpo_clip_loss on {example} (clip_range=0.2, beta=0.1, loss_type={loss_type!r}, max_tokens=4)",
            args,
            book="§9.2",
        )
        names = ["logprobs", "old_logprobs", "ref_logprobs", "advantages"]
        add(
            f"gradient_{loss_type}",
            f"grpo_clip_loss on {example} (loss_type={loss_type!r}), every input requiring grad",
            args,
            grad_of=names,
            grads={"logprobs": _grad(_grads_of(key.token_level.grpo_clip_loss, args, names)["logprobs"])},
        )
    square = [
        torch.cat([t, t[:1] - 0.25 * (i != 3)]) if t.dim() == 1 else torch.cat([t, t[1:] + 0.3 * (i < 3)])
        for i, t in enumerate(book)
    ]
    square[4] = _mask([3, 1, 2], 3)
    square[3] = torch.tensor([1.0, -1.0, 0.5], dtype=F64)
    if fresh:
        square[4] = _mask(torch.randint(1, 4, (3,), generator=g).tolist(), 3)
        square[3] = _uniform(g, -1.5, 1.5, 3)
    add(
        "square_batch",
        "grpo_clip_loss with 3 replies of 3 columns (N == T), loss_type='grpo'",
        inputs(square, 0.2, 0.1, "grpo", 3),
    )
    add(
        "beta_0",
        f"grpo_clip_loss on {example} with beta=0 (no KL term)",
        inputs(book, 0.2, 0.0, "dapo", 4),
    )
    add("inputs_unmodified", "grpo_clip_loss", inputs(book, 0.2, 0.1, "grpo", 4), unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((4, 6), (16, 12)):
            for loss_type in ("grpo", "dapo", "dr_grpo"):
                mask = _random_mask(g, rows, num_tokens, F64)
                old = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 5
                lp = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
                ref = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.5
                adv = torch.randn(rows, generator=g, dtype=F64)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_{loss_type}",
                    f"grpo_clip_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), loss_type={loss_type!r}",
                    inputs(
                        [t.to(dtype) for t in (lp, old, _junk(ref, mask, -30.0), adv, mask)],
                        0.2,
                        0.04,
                        loss_type,
                        num_tokens + 4,
                    ),
                )
    lp, old, ref, adv, mask = (t.float() for t in book)
    low = _very_unlikely(g, fresh)
    add(
        "very_unlikely_tokens_stay_finite",
        f"grpo_clip_loss in float32 on {example} with old log-probs from -200 to -120 (very unlikely tokens)",
        inputs((low + (lp - old), low, low + (ref - old), adv, mask), 0.2, 0.1, "grpo", 4),
    )
    for loss_type in ("dr-grpo", "GRPO"):
        add(
            f"unknown_loss_type_{loss_type}",
            f"grpo_clip_loss with loss_type={loss_type!r} (only 'grpo', 'dapo' and 'dr_grpo' are known: any other "
            "raises ValueError)",
            inputs(book, 0.2, 0.1, loss_type, 4),
            raises="ValueError",
        )
    # A reply with no real token (a third row, all padding): its mean is 0 and the gradient stays finite.
    lp, old, ref, adv, mask = book
    three = [torch.cat([lp, lp[:1] - 0.3]), torch.cat([old, old[:1]]), torch.cat([ref, ref[:1] - 0.2])]
    three += [torch.cat([adv, torch.tensor([0.8], dtype=F64)]), torch.cat([mask, torch.zeros(1, 3, dtype=F64)])]
    where = "the last"
    if fresh:  # the empty reply in a drawn position
        order = _perm(g, 3)
        three = [t[order] for t in three]
        where = f"reply {int((order == 2).nonzero())}"
    args = inputs(three, 0.2, 0.1, "grpo", 4)
    names = ["logprobs", "old_logprobs", "ref_logprobs", "advantages"]
    add(
        "all_masked_reply_gradient",
        f"grpo_clip_loss (loss_type='grpo') on {example} with a third reply, {where}, that has no real token: "
        "its gradient is finite (0 there)",
        args,
        grad_of=names,
        grads={"logprobs": _grad(_grads_of(key.token_level.grpo_clip_loss, args, names)["logprobs"])},
    )
    return cases


# ----------------------------------------------------------------------------- the lecture (task 10)
#
# Shapes follow the lecture: [batch, trial, pos] = prompts, replies sampled per prompt, positions of a reply.

SORT_BOOK_PROMPT = [3, 1, 0, 2]  # TASKS.md §10.1: three replies to one prompt
SORT_BOOK_REPLIES = ([0, 1, 2, 3], [7, 2, 2, 5], [0, 3, 1, 2])
# Numbers that occur twice in the prompt: inclusion counts each prompt entry that occurs anywhere in the
# response; these pairs tell it from counting the response's entries, distinct numbers, or copy for copy.
SORT_DUPLICATES = (
    ([2, 0, 2, 1], [0, 1, 2, 2]),
    ([2, 0, 2, 1], [2, 2, 2, 2]),
    ([2, 0, 2, 1], [0, 1, 2, 5]),
    ([2, 0, 2, 1], [0, 2, 1, 2]),
    ([2, 2, 1, 1], [2, 2, 2, 1]),
)


def _sort_cases(function: str):
    """The case builder of one of the two sort rewards (they take the same inputs)."""

    def build(key, g: torch.Generator, fresh: bool) -> list[dict]:
        cases: list[dict] = []
        add = _adder(key, cases, function, fresh)

        def pair(prompt, response) -> list:
            return [("prompt", prompt), ("response", response)]

        def tag(numbers) -> str:
            return "".join(map(str, numbers))

        book_prompt, book_replies, duplicates, one = SORT_BOOK_PROMPT, SORT_BOOK_REPLIES, SORT_DUPLICATES, (5, 4)
        example = " (the §10.1 example)"
        if fresh:  # the same kinds of reply (sorted, other numbers with a repeat, shuffled) to another prompt
            digits = SORT_BOOK_PROMPT + [-1]
            while digits[:4] == SORT_BOOK_PROMPT:
                digits = _perm(g, 10).tolist()
            book_prompt, others = digits[:4], digits[4:]
            shuffled = list(book_prompt)
            while shuffled == sorted(book_prompt):
                shuffled = [book_prompt[i] for i in _perm(g, 4).tolist()]
            repeat = book_prompt[int(torch.randint(0, 4, (), generator=g))]
            book_replies = (sorted(book_prompt), [others[0], repeat, repeat, others[1]], shuffled)
            # The duplicates' numbers mapped in order onto other ones: the same ties and orderings.
            numbers = sorted({n for p, r in SORT_DUPLICATES for n in p + r})
            onto = dict(zip(numbers, numbers))
            while list(onto.values()) == numbers:
                onto = dict(zip(numbers, sorted(_perm(g, 10)[: len(numbers)].tolist())))
            duplicates = tuple(([onto[n] for n in p], [onto[n] for n in r]) for p, r in SORT_DUPLICATES)
            one = tuple(_perm(g, 9)[:2].add(6).remainder(10).tolist())  # never 5 first (the book's [5], [5])
            example = " (a fresh variant of the §10.1 example)"
        for reply in book_replies:
            add(
                f"book_example_{tag(reply)}",
                f"{function}(prompt={book_prompt}, response={reply}){example}",
                pair(book_prompt, reply),
                book="§10.1",
            )
            add(
                f"book_example_{tag(reply)}_tensors",
                f"{function}(prompt=torch.tensor({book_prompt}), response=torch.tensor({reply}))",
                pair(torch.tensor(book_prompt), torch.tensor(reply)),
            )
        for prompt, reply in duplicates:
            add(
                f"duplicates_{tag(prompt)}_{tag(reply)}",
                f"{function}(prompt={prompt}, response={reply}) (numbers that occur twice in the prompt)",
                pair(prompt, reply),
            )
        right, wrong = one
        add("one_number", f"{function}(prompt=[{right}], response=[{right}])", pair([right], [right]))
        add("one_wrong_number", f"{function}(prompt=[{right}], response=[{wrong}])", pair([right], [wrong]))
        add(
            "inputs_unmodified",
            f"{function}(prompt={book_prompt}, response={book_replies[2]})",
            pair(list(book_prompt), list(book_replies[2])),
            unmodified=True,
        )
        for n in (3, 5, 8):
            prompt = torch.randint(0, 10, (n,), generator=g)
            replies = {
                "random": torch.randint(0, 10, (n,), generator=g),
                "shuffled": prompt[torch.randperm(n, generator=g)],
                "sorted": prompt.sort().values,
                "nearly_sorted": torch.cat([prompt.sort().values[1:], prompt.sort().values[:1]]),
            }
            for name, reply in replies.items():
                as_list = name in ("random", "sorted")  # lists and tensors, as the contract allows both
                args = pair(prompt.tolist(), reply.tolist()) if as_list else pair(prompt, reply)
                add(
                    f"random_n{n}_{name}_{'list' if as_list else 'tensor'}",
                    f"{function}(prompt={prompt.tolist()}, response={reply.tolist()}) as "
                    + ("lists" if as_list else "1-D int64 tensors"),
                    args,
                )
        return cases

    build.__name__ = f"{function}_cases"
    return build


sort_distance_cases = _sort_cases("sort_distance_reward")
sort_inclusion_ordering_cases = _sort_cases("sort_inclusion_ordering_reward")


# compute_deltas (§10.2)

DELTAS_BOOK = [
    [7.0, 3.0, 6.0, 5.0],
    [6.0, 7.0, 7.0, 3.0],
]  # TASKS.md §10.2: row 0 = §10.1's replies + the prompt echoed
DELTA_MODES = ("rewards", "centered_rewards", "normalized_rewards", "max_rewards")


def deltas_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_deltas", fresh)
    book, example = torch.tensor(DELTAS_BOOK, dtype=F64), "the §10.2 example"
    if fresh:  # whole numbers as the sort rewards give: a row of distinct ones, a row whose maximum is tied
        tied = torch.randint(0, 8, (4,), generator=g)
        tied[_perm(g, 4)[:2]] = int(torch.randint(0, 8, (), generator=g)) + 8
        book = torch.stack([_perm(g, 12)[:4], tied])[_perm(g, 2)].to(F64)
        example = "a fresh variant of the §10.2 example"
    for mode in DELTA_MODES:
        add(
            f"book_example_{mode}",
            f"compute_deltas on {example} (rewards = {_show(book) if fresh else DELTAS_BOOK}, mode={mode!r})",
            [("rewards", book), ("mode", mode)],
            book="§10.2",
        )
    equal = torch.tensor([[2.0, 2.0, 2.0, 2.0], [1.0, 3.0, 0.0, 2.0]])
    if fresh:  # the row of equal rewards at another value, in a drawn position
        rows = [torch.full((4,), float(torch.randint(0, 8, (), generator=g))), _perm(g, 8)[:4].float()]
        equal = torch.stack([rows[i] for i in _perm(g, 2).tolist()])
    for mode in DELTA_MODES:
        add(
            f"equal_rewards_{mode}",
            f"compute_deltas(rewards={_show(equal.int())}, mode={mode!r}) (a prompt whose replies "
            "all got the same reward)",
            [("rewards", equal), ("mode", mode)],
        )
    for dtype in DTYPES:  # rows tied at values whose float32 mean is off by an ulp, beside a row that is not tied
        values, spread = [12.4, 1.4], torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
        if fresh:
            values, spread = [_tie_value(g) for _ in range(2)], _uniform(g, 0, 8, 8)
        rows = [torch.full((8,), v, dtype=F64) for v in values] + [spread]
        ties = torch.stack([rows[i] for i in (_perm(g, 3).tolist() if fresh else range(3))]).to(dtype)
        for mode in DELTA_MODES[1:3]:
            add(
                f"tied_rows_non_dyadic_{_name(dtype)}_{mode}",
                f"compute_deltas on 3 rows of 8 trials ({dtype}), two tied (all 8 rewards "
                f"{', '.join(f'{v:.4g}' for v in values)}) and one not, mode={mode!r}: a tied row's deltas are 0 "
                "(to within 0.01)",
                [("rewards", ties), ("mode", mode)],
                atol=TIE_TOLERANCE,
            )
    one = torch.tensor([[3.0, 5.0, 5.0, 1.0, 4.0]])
    if fresh:
        one = torch.randint(0, 8, (1, 5), generator=g).float()
    for mode in DELTA_MODES:
        add(
            f"one_prompt_{mode}",
            f"compute_deltas(rewards={_show(one.int())}, mode={mode!r}) (one prompt, five replies)",
            [("rewards", one), ("mode", mode)],
        )
    rewards = torch.tensor(DELTAS_BOOK)
    if fresh:
        rewards = torch.randint(0, 8, (2, 4), generator=g).float()
    for mode in ("centred_rewards", "advantages"):
        add(
            f"unknown_mode_{mode}",
            f"compute_deltas with mode={mode!r} (not one of the four modes)",
            [("rewards", rewards), ("mode", mode)],
            raises="ValueError",
        )
    for mode in ("centered_rewards", "normalized_rewards"):
        add(
            f"inputs_unmodified_{mode}",
            f"compute_deltas(mode={mode!r})",
            [("rewards", rewards), ("mode", mode)],
            unmodified=True,
        )
    for dtype in DTYPES:
        for batch, trial in ((2, 4), (8, 16)):
            # Whole-number rewards as the sort rewards give (ties, and rows of equal rewards), then real ones.
            whole = torch.randint(0, 2 * 4, (batch, trial), generator=g).to(F64)
            whole[-1] = whole[-1, 0]
            real = torch.rand(batch, trial, generator=g, dtype=F64) * 4 + torch.arange(batch, dtype=F64)[:, None]
            for kind, rewards in (("whole", whole), ("real", real)):
                for mode in DELTA_MODES:
                    add(
                        f"random_{kind}_{_name(dtype)}_{batch}x{trial}_{mode}",
                        f"compute_deltas on random {'whole-number ' if kind == 'whole' else ''}{dtype} rewards "
                        f"of shape ({batch}, {trial}), mode={mode!r}",
                        [("rewards", rewards.to(dtype)), ("mode", mode)],
                    )
    # Rewards that differ by thousandths: the std is near the 1e-5, so where the epsilon goes shows. In float64
    # only: in float32 the centred rewards lose too many digits for any two right answers to agree.
    close = torch.tensor([[0.5, 0.502, 0.499, 0.501], [1.0, 1.004, 0.997, 1.0]], dtype=F64)
    if fresh:
        close = (_uniform(g, 0, 2, 2, 1) + _uniform(g, -0.004, 0.004, 2, 4)).round(decimals=3)
    add(
        "small_spread_normalized_rewards",
        f"compute_deltas(rewards={_show(close)}, mode='normalized_rewards') (rewards that differ by "
        "thousandths: divide by std + 1e-5)",
        [("rewards", close), ("mode", "normalized_rewards")],
    )
    return cases


# compute_loss (§10.3)

LOSS_BOOK_LOG_PROBS = [[[-1.0, -2.0], [-0.5, -1.5]]]  # TASKS.md §10.3: one prompt, two replies of two positions
LOSS_BOOK_OLD = [[[-1.02, -1.995], [-0.48, -1.505]]]
LOSS_BOOK_DELTAS = [[1.0, -1.0]]
LOSS_MODES = ("naive", "unclipped", "clipped")


def _loss_args(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01) -> list:
    return [
        ("log_probs", log_probs),
        ("deltas", deltas),
        ("mode", mode),
        ("old_log_probs", old_log_probs),
        ("clip_range", clip_range),
    ]


def loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_loss", fresh)
    fn = key.lecture.compute_loss

    def add_with_grad(id: str, what: str, args: list, **extra) -> None:
        expected = _grads_of(fn, args, ["log_probs"])["log_probs"]
        add(id, what, args, grads={"log_probs": _grad(expected)}, **extra)

    lp, old = torch.tensor(LOSS_BOOK_LOG_PROBS, dtype=F64), torch.tensor(LOSS_BOOK_OLD, dtype=F64)
    deltas = torch.tensor(LOSS_BOOK_DELTAS, dtype=F64)
    book, example = f"log_probs = {LOSS_BOOK_LOG_PROBS}, deltas = {LOSS_BOOK_DELTAS}", "the §10.3 example"
    old_shown = LOSS_BOOK_OLD
    if fresh:  # old log-probs 0.013-0.03 away (clipped at 0.01) or less than 0.007 away (not clipped)
        lp = _uniform(g, -3, -0.2, 1, 2, 2)
        old = lp + _bands(g, [(-0.03, -0.013), (-0.007, 0.007), (0.013, 0.03)], 1, 2, 2)
        deltas = _signs(g, 1, 2) * _uniform(g, 0.3, 2, 1, 2)
        book, example = f"log_probs = {_show(lp)}, deltas = {_show(deltas)}", "a fresh variant of the §10.3 example"
        old_shown = _show(old)
    on_policy = [("log_probs", lp), ("deltas", deltas)]
    for mode in LOSS_MODES:
        given = None if mode == "naive" else old
        args = _loss_args(lp, deltas, mode, given)
        old_text = "" if mode == "naive" else f", old_log_probs = {old_shown}"
        what = f"compute_loss on {example} ({book}{old_text}, mode={mode!r})"
        add(f"book_example_{mode}", what, args, book="§10.3")
        add_with_grad(
            f"book_example_{mode}_gradient",
            f"compute_loss on {example} (mode={mode!r}{', old_log_probs given' if given is not None else ''})",
            args,
        )
    for mode in ("unclipped", "clipped"):
        add_with_grad(
            f"first_step_gradient_{mode}",
            f"compute_loss on {example} with old_log_probs=None (mode={mode!r}: the first step, "
            "ratio 1, and its gradient is the naive loss's)",
            _loss_args(lp, deltas, mode),
        )
        add_with_grad(
            f"first_step_old_given_gradient_{mode}",
            f"compute_loss on {example} with old_log_probs equal to log_probs (mode={mode!r})",
            _loss_args(lp, deltas, mode, lp.clone()),
        )
        args = _loss_args(lp, deltas, mode, old)
        add(
            f"gradient_when_every_input_requires_grad_{mode}",
            f"compute_loss on {example} when every input requires grad (mode={mode!r})",
            args,
            grad_of=["log_probs", "deltas", "old_log_probs"],
            grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
        )
    add(
        "naive_ignores_old_log_probs",
        f"compute_loss on {example}, mode='naive' with old_log_probs given (naive does not use them)",
        _loss_args(lp, deltas, "naive", old),
    )
    # Ratios 1.1, 0.85, 1.3 and 0.95: clip_range=0.2 keeps the first two, the lecture's 0.01 would clip all.
    lp2 = torch.tensor([[[-1.0, -2.0], [-0.5, -1.5]], [[-0.7, -0.2], [-3.0, -1.1]]], dtype=F64)
    ratios = torch.tensor([[[1.1, 0.85], [1.3, 0.95]], [[1.05, 0.9], [1.25, 0.7]]], dtype=F64)
    deltas2 = torch.tensor([[1.0, -0.5], [2.0, -1.0]], dtype=F64)
    if fresh:  # ratios from 0.7 to 1.3, away from the edges of both clip ranges
        lp2, deltas2 = _uniform(g, -3, -0.1, 2, 2, 2), _uniform(g, -2, 2, 2, 2)
        bands = [(0.7, 0.78), (0.82, 0.88), (0.92, 0.98), (1.02, 1.08), (1.12, 1.18), (1.22, 1.3)]
        ratios = _bands(g, bands, 2, 2, 2)
    for clip_range in (0.2, 0.1):
        add_with_grad(
            f"clip_range_{clip_range}",
            f"compute_loss(mode='clipped', clip_range={clip_range}) with ratios from 0.7 to 1.3",
            _loss_args(lp2, deltas2, "clipped", lp2 - ratios.log(), clip_range),
        )
    # trial == pos: a delta broadcast along the wrong axis gives a number instead of an error.
    square = -torch.rand(2, 3, 3, generator=g, dtype=F64) * 3
    square_deltas = torch.tensor([[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]], dtype=F64)
    if fresh:
        square_deltas = _uniform(g, -2, 2, 2, 3)
    for mode in LOSS_MODES:
        add_with_grad(
            f"trial_equals_pos_{mode}",
            f"compute_loss with 3 replies of 3 positions per prompt (mode={mode!r})",
            _loss_args(square, square_deltas, mode, square + 0.004),
        )
    unlikely = torch.tensor([[[-120.0, -95.5, -130.0], [-110.0, -101.0, -99.0]]])  # float32: exp() underflows
    unlikely_deltas, step = torch.tensor([[1.0, -1.0]]), torch.tensor([0.005, -0.003, 0.0])
    if fresh:
        unlikely = _uniform(g, -130, -95, 1, 2, 3, dtype=torch.float32)
        unlikely_deltas = (_signs(g, 1, 2) * _uniform(g, 0.3, 2, 1, 2)).float()
        step = _uniform(g, -0.006, 0.006, 3, dtype=torch.float32)
    add(
        "very_unlikely_tokens_stay_finite",
        "compute_loss(mode='unclipped') in float32 on log-probs around -110 (very unlikely tokens)",
        _loss_args(unlikely, unlikely_deltas, "unclipped", unlikely + step),
    )
    for mode in ("ppo", "clip"):
        add(
            f"unknown_mode_{mode}",
            f"compute_loss with mode={mode!r} (not one of the three modes)",
            _loss_args(lp, deltas, mode, old),
            raises="ValueError",
        )
    add(
        "inputs_unmodified",
        "compute_loss(mode='clipped')",
        _loss_args(lp, deltas, "clipped", old),
        unmodified=True,
    )
    for dtype in DTYPES:
        for shape in ((2, 3, 4), (4, 8, 6)):
            lp = (-torch.rand(shape, generator=g, dtype=F64) * 4).to(dtype)
            old = (lp.double() + torch.randn(shape, generator=g, dtype=F64) * 0.02).to(dtype)
            deltas = torch.randn(shape[:2], generator=g, dtype=F64).to(dtype)
            for mode in LOSS_MODES:
                for given in (None, old) if mode != "naive" else (None,):
                    for clip_range in (0.01, 0.05) if mode == "clipped" and given is not None else (0.01,):
                        name = "_".join(map(str, shape))
                        add_with_grad(
                            f"random_{_name(dtype)}_{name}_{mode}_old_{'given' if given is not None else 'None'}"
                            + (f"_clip_range_{clip_range}" if clip_range != 0.01 else ""),
                            f"compute_loss on random {dtype} log-probs of shape {shape}, mode={mode!r}, "
                            f"old_log_probs {'given' if given is not None else 'None'}, clip_range={clip_range}",
                            _loss_args(lp, deltas, mode, given, clip_range),
                        )
    # The stated defaults, each left out: old_log_probs=None (on-policy) and the lecture's clip_range=0.01.
    add_with_grad(
        "default_old_log_probs",
        f"compute_loss on {example} with only log_probs, deltas and mode='unclipped' (old_log_probs defaults to None)",
        [*on_policy, ("mode", "unclipped")],
    )
    add_with_grad(
        "default_clip_range",
        "compute_loss(mode='clipped') with ratios from 0.7 to 1.3 and no clip_range (its default is the "
        "lecture's 0.01)",
        _loss_args(lp2, deltas2, "clipped", lp2 - ratios.log())[:4],
    )
    return cases


# compute_kl_penalty (§10.4)

KL_PENALTY_BOOK = ([[[-1.0, -2.0, -0.5], [-0.2, -0.2, -3.0]]], [[[-1.5, -1.0, -0.5], [-0.2, -1.2, -2.0]]])  # §10.4


def kl_penalty_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_kl_penalty", fresh)
    fn = key.lecture.compute_kl_penalty
    lp, ref = (torch.tensor(x, dtype=F64) for x in KL_PENALTY_BOOK)
    example, shown = "the §10.4 example", KL_PENALTY_BOOK
    if fresh:  # as in the book, some positions where the two agree
        lp, ref = _uniform(g, -3, -0.1, 1, 2, 3), _uniform(g, -3, -0.1, 1, 2, 3)
        same = torch.rand(1, 2, 3, generator=g) < 0.3
        ref = torch.where(same, lp, ref)
        example, shown = "a fresh variant of the §10.4 example", (_show(lp), _show(ref))
    args = [("log_probs", lp), ("ref_log_probs", ref)]
    add(
        "book_example",
        f"compute_kl_penalty on {example} (log_probs = {shown[0]}, ref_log_probs = {shown[1]})",
        args,
        book="§10.4",
    )
    add(
        "gradient_on_the_book_example",
        f"compute_kl_penalty on {example}, both inputs requiring grad",
        args,
        grad_of=["log_probs", "ref_log_probs"],
        grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
    )
    add(
        "equal_log_probs_give_zero",
        "compute_kl_penalty with ref_log_probs == log_probs",
        [("log_probs", lp), ("ref_log_probs", lp.clone())],
    )
    add(
        "two_dims",
        "compute_kl_penalty on [reply, pos] inputs (2 replies of 3 positions)",
        [("log_probs", lp[0]), ("ref_log_probs", ref[0])],
    )
    add("inputs_unmodified", "compute_kl_penalty", args, unmodified=True)
    for dtype in DTYPES:
        for shape in ((2, 3, 5), (4, 8, 6), (6, 10)):
            ref = -torch.rand(shape, generator=g, dtype=F64) * 5
            lp = ref + torch.randn(shape, generator=g, dtype=F64) * 0.8
            args = [("log_probs", lp.to(dtype)), ("ref_log_probs", ref.to(dtype))]
            add(
                f"random_{_name(dtype)}_{'x'.join(map(str, shape))}",
                f"compute_kl_penalty on random {dtype} log-probs of shape {shape}",
                args,
                grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
            )
    return cases


# ----------------------------------------------------------------------------- DPO (task 12)
#
# Batches are flush left, as train_dpo.py builds them: each row holds its prompt, its reply (ending with the
# end-of-text token when the reply finished), then padding. Most case models pad with the end-of-text id, as
# GPT-2 does (EOS = pad = 15), so that a function telling padding by the token id gets a wrong number. The
# models are tiny GPT-2s recorded as data (rlhf_practice.checks.model_data): a case costs milliseconds.

VOCAB = 16
EOS = VOCAB - 1


def _tiny_gpt2(g, *, n_layer=1, n_embd=8, dropout=0.0, pad=EOS, training=False) -> dict:
    """A GPT-2 of ``n_layer`` layers as data, its weights drawn from ``g``: large enough that the tokens'
    log-probs differ clearly (GPT-2's own initialisation, std 0.02, puts every token near log 1/16)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_positions=16, n_embd=n_embd, n_layer=n_layer, n_head=2,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=EOS, eos_token_id=EOS, pad_token_id=pad,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=g, dtype=F64)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                param.copy_(1 + 0.1 * noise)
            else:
                param.copy_(noise * (0.5 if name.startswith(("transformer.wte", "transformer.wpe")) else 0.2))
    return model_data(model.train(training))


def _batch(g, rows, seq: int, pad: int = EOS, junk_padding: bool = False) -> list:
    """(input_ids, attention_mask, prompt_lengths) of flush-left rows; ``rows`` = [(prompt length, reply
    length, finished)]: a finished reply's last token is the end-of-text token. Other tokens are drawn from
    0 .. 14 (never EOS); ``junk_padding``: the padding holds random ids instead of ``pad``."""
    ids = torch.full((len(rows), seq), pad)
    mask = torch.zeros(len(rows), seq, dtype=torch.long)
    for i, (prompt, reply, finished) in enumerate(rows):
        n = prompt + reply
        ids[i, :n] = torch.randint(0, EOS, (n,), generator=g)
        ids[i, n - 1] = EOS if finished else ids[i, n - 1]
        mask[i, :n] = 1
        if junk_padding:
            ids[i, n:] = torch.randint(0, EOS, (seq - n,), generator=g)
    lengths = torch.tensor([prompt for prompt, _, _ in rows])
    return [("input_ids", ids), ("attention_mask", mask), ("prompt_lengths", lengths)]


def _random_rows(g, batch: int, seq: int) -> list[tuple]:
    """Random rows for a batch of ``seq`` columns: prompts of 1-4 tokens, replies that fill the row or stop early."""
    rows = []
    for _ in range(batch):
        prompt = int(torch.randint(1, 5, (), generator=g))
        reply = int(torch.randint(1, seq - prompt + 1, (), generator=g))
        rows.append((prompt, reply, bool(torch.rand((), generator=g) < 0.7)))
    return rows


def _padded_more(batch: list, extra: int, pad: int = EOS) -> list:
    """The same rows with ``extra`` more columns of padding."""
    (_, ids), (_, mask), lengths = batch
    ids = torch.cat([ids, torch.full((ids.shape[0], extra), pad)], dim=1)
    mask = torch.cat([mask, torch.zeros(mask.shape[0], extra, dtype=mask.dtype)], dim=1)
    return [("input_ids", ids), ("attention_mask", mask), lengths]


def _parameter_count(model: dict) -> int:
    return sum(p.numel() for p in build_model(model).parameters())


# The rows of the §12.2 table: a finished reply with padding after it, a reply that is only its end-of-text
# token, and an unfinished reply that fills its row.
REPLY_ROWS = [(3, 4, True), (2, 1, True), (4, 5, False)]


def reply_logps_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "reply_logps", fresh)

    def add_model(id: str, what: str, model: dict, batch: list, **extra) -> None:
        add(id, what, [("model", model), *batch], **extra)

    model = _tiny_gpt2(g)
    batch = _batch(g, REPLY_ROWS, 9)
    add_model("eos_is_pad", "reply_logps on 3 rows whose padding has the end-of-text id (as GPT-2 pads)", model, batch)
    padded = _padded_more(batch, 4)
    add_model(
        "more_padding_changes_nothing",
        "reply_logps on the same 3 rows with 4 more columns of padding (the result must not change)",
        model,
        padded,
    )
    same = [key.dpo.reply_logps(build_model(model), *(v for _, v in b)) for b in (batch, padded)]
    assert torch.allclose(same[0], same[1], rtol=0, atol=1e-5), same
    add_model(
        "padding_holds_other_ids",
        "reply_logps on rows whose padding holds random token ids (attention_mask 0 there)",
        model,
        _batch(g, REPLY_ROWS, 10, junk_padding=True),
    )
    zero_pad = _tiny_gpt2(g, pad=0)
    batch = _batch(g, [(2, 5, True), (3, 2, True), (1, 7, False)], 8, pad=0)
    batch[0][1][0, 2:4] = 0  # real reply tokens that happen to have the pad id
    add_model(
        "pad_id_differs_from_eos",
        "reply_logps with pad id 0 (not the end-of-text id 15) and real reply tokens whose id is 0",
        zero_pad,
        batch,
    )
    two_layers = _tiny_gpt2(g, n_layer=2, n_embd=16)
    batch = _batch(g, [(1, 6, True), (4, 2, True), (2, 8, False), (3, 3, False)], 10)
    add_model("two_layers", "reply_logps with a 2-layer model on 4 rows, prompts of 1 to 4 tokens", two_layers, batch)
    add_model(
        "model_in_train_mode",
        "reply_logps with the model in train mode (dropout 0): use it in the mode it comes in",
        _tiny_gpt2(g, training=True),
        _batch(g, REPLY_ROWS, 9),
    )
    add_model(
        "model_with_dropout_in_eval_mode",
        "reply_logps with a model in eval mode whose dropout is 0.2: use it in the mode it comes in",
        _tiny_gpt2(g, dropout=0.2),
        _batch(g, REPLY_ROWS, 9),
    )
    batch = _batch(g, REPLY_ROWS, 9)
    weights = torch.tensor([1.0, -0.5, 2.0])
    if fresh:
        weights = _uniform(g, -2, 2, 3, dtype=torch.float32)
    case = {"args": [("model", model), *batch], "kwargs": {}, "grad_of": ["model"], "grad_weights": weights}
    add_model(
        "gradient_reaches_the_model",
        "reply_logps: the gradient of sum(weights * result) w.r.t. the model's parameters",
        model,
        batch,
        grad_weights=weights,
        grads={"model": _grad(run_case(key.dpo.reply_logps, case)["grads"]["model"])},
    )
    add_model("inputs_unmodified", "reply_logps", model, _batch(g, REPLY_ROWS, 9), unmodified=True)
    for n_layer in (1, 2):
        model = _tiny_gpt2(g, n_layer=n_layer, n_embd=8 * n_layer, dropout=0.1)
        add_model(
            f"random_{n_layer}_layers",
            f"reply_logps with a random {n_layer}-layer model on 5 random rows of 12 tokens",
            model,
            _batch(g, _random_rows(g, 5, 12), 12),
        )
    return cases


def reference_logps_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "reference_logps", fresh)

    def add_ref(id: str, what: str, model: dict, batch: list, **extra) -> None:
        frozen = _grad(
            torch.zeros(_parameter_count(model)),
            "the reference is frozen: compute it under torch.no_grad() (or detach the result), so that DPO's "
            "gradient never trains it",
        )
        add(id, what, [("ref_model", model), *batch], grads={"ref_model": frozen}, **extra)

    model = _tiny_gpt2(g, dropout=0.2, training=True)
    add_ref(
        "arrives_in_train_mode",
        "reference_logps with ref_model in train mode (dropout 0.2), 3 rows padded with the end-of-text id",
        model,
        _batch(g, REPLY_ROWS, 9),
    )
    add_ref(
        "arrives_in_eval_mode",
        "reference_logps with ref_model already in eval mode (dropout 0.2)",
        _tiny_gpt2(g, dropout=0.2),
        _batch(g, REPLY_ROWS, 9),
    )
    add_ref(
        "two_layers",
        "reference_logps with a 2-layer ref_model in train mode (dropout 0.1), 4 rows",
        _tiny_gpt2(g, n_layer=2, n_embd=16, dropout=0.1, training=True),
        _batch(g, [(1, 6, True), (4, 2, True), (2, 8, False), (3, 3, False)], 10),
    )
    add_ref("inputs_unmodified", "reference_logps", model, _batch(g, REPLY_ROWS, 9), unmodified=True)
    model = _tiny_gpt2(g, n_layer=2, n_embd=16, dropout=0.1, training=True)
    add_ref(
        "random_2_layers",
        "reference_logps with a random 2-layer ref_model in train mode (dropout 0.1) on 5 random rows",
        model,
        _batch(g, _random_rows(g, 5, 12), 12),
    )
    return cases


# dpo_loss (§12.3). Margins stay within |beta * margin| <= 20, where -log(sigmoid(x)) is as accurate as
# logsigmoid(x) (a right answer too); the docstring asks for logsigmoid, which stays finite beyond.

DPO_BOOK = ([-5.0, -7.0, -3.0], [-9.0, -4.0, -6.0], [-6.0, -6.0, -3.0], [-8.0, -5.0, -6.0])  # TASKS.md §12.3
DPO_NAMES = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _dpo_args(pc, pr, rc, rr, beta=0.1) -> list:
    return [*zip(DPO_NAMES, (pc, pr, rc, rr)), *([("beta", beta)] if beta is not None else [])]


def _dpo_grads(key, args, names=("policy_chosen_logps", "policy_rejected_logps")) -> dict:
    case = {"args": args, "kwargs": {}, "grad_of": list(names), "grad_output": 0}
    return {name: _grad(grad) for name, grad in run_case(key.dpo.dpo_loss, case)["grads"].items()}


def dpo_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "dpo_loss", fresh, outputs=["losses", "chosen_rewards", "rejected_rewards"])

    def add_with_grad(id: str, what: str, args: list, **extra) -> None:
        add(id, what, args, grads=_dpo_grads(key, args), grad_output=0, **extra)

    book, example, shown = [torch.tensor(x, dtype=F64) for x in DPO_BOOK], "the §12.3 example", DPO_BOOK
    if fresh:
        book, example = list(_uniform(g, -10, -2, 4, 3)), "a fresh variant of the §12.3 example"
        shown = [_show(t) for t in book]
    what = f"dpo_loss on {example} (" + ", ".join(f"{n} = {v}" for n, v in zip(DPO_NAMES, shown))
    add("book_example", what + ", beta=0.1)", _dpo_args(*book), book="§12.3")
    add_with_grad(
        "gradient_on_the_book_example",
        f"dpo_loss on {example}: the gradient of the losses",
        _dpo_args(*book),
    )
    add_with_grad(
        "gradient_when_every_input_requires_grad",
        f"dpo_loss on {example} when every input requires grad: the gradient of the losses",
        _dpo_args(*book),
        grad_of=list(DPO_NAMES),
    )
    pc, pr, rc, rr = book
    swapped = _dpo_args(pr, pc, rr, rc)
    add("chosen_and_rejected_swapped", f"dpo_loss on {example} with chosen and rejected swapped", swapped)
    margin = 0.1 * ((pc - rc) - (pr - rr))
    assert torch.allclose(key.dpo.dpo_loss(pr, pc, rr, rc)[0], -torch.nn.functional.logsigmoid(-margin))
    add("default_beta", f"dpo_loss on {example} without beta (its default is 0.1)", _dpo_args(*book, None))
    for beta in (0.5, 0.02):
        add(f"book_example_beta_{beta}", f"dpo_loss on {example}, beta={beta}", _dpo_args(*book, beta))
    for dtype in DTYPES:
        # losses log 2 and rewards 0 whatever the log-probs: a fresh variant has another number of pairs
        pairs = 6 if not fresh else [2, 3, 4, 5, 7, 8, 9][int(torch.randint(0, 7, (), generator=g))]
        policy = (-torch.rand(2, pairs, generator=g, dtype=F64) * 40).to(dtype)
        add(
            f"policy_equals_reference_{_name(dtype)}",
            f"dpo_loss with the policy's log-probs equal to the reference's ({dtype}): losses log 2, rewards 0",
            _dpo_args(policy[0], policy[1], policy[0].clone(), policy[1].clone()),
        )
    ref = -torch.rand(4, generator=g) * 60 - 20
    margins = torch.tensor([30.0, -30.0, 5.0, -36.0])
    if fresh:
        margins = _uniform(g, -36, 30, 4, dtype=torch.float32)
    args = _dpo_args(ref + margins, ref - 6.0, ref, ref - 6.0, 0.5)
    add_with_grad("large_margins_float32", "dpo_loss in float32 with beta * margin from -18 to 15", args)
    add("inputs_unmodified", "dpo_loss", _dpo_args(*book), unmodified=True)
    for dtype in DTYPES:
        for pairs in (1, 7, 64):
            for beta in (0.1, 0.5):
                ref = -torch.rand(2, pairs, generator=g, dtype=F64) * 50 - 5
                policy = ref + torch.randn(2, pairs, generator=g, dtype=F64) * 4
                add_with_grad(
                    f"random_{_name(dtype)}_{pairs}_pairs_beta_{beta}",
                    f"dpo_loss on random {dtype} log-probs of {pairs} pairs, beta={beta}",
                    _dpo_args(*(t.to(dtype) for t in (policy[0], policy[1], ref[0], ref[1])), beta),
                )
    return cases


BUILDERS = {  # {graded function: the builder of its cases}, in the order of the case book
    "compute_advantages": advantage_cases,
    "ppo_clip_loss": clip_loss_cases,
    "compute_group_advantages": group_cases,
    "grpo_loss": grpo_loss_cases,
    "masked_mean": masked_mean_cases,
    "per_token_kl": kl_cases,
    "compute_gae": gae_cases,
    "token_ppo_loss": token_ppo_cases,
    "grpo_clip_loss": grpo_clip_cases,
    "sort_distance_reward": sort_distance_cases,
    "sort_inclusion_ordering_reward": sort_inclusion_ordering_cases,
    "compute_deltas": deltas_cases,
    "compute_loss": loss_cases,
    "compute_kl_penalty": kl_penalty_cases,
    "reply_logps": reply_logps_cases,
    "reference_logps": reference_logps_cases,
    "dpo_loss": dpo_loss_cases,
}
FIXTURE_SEED = 2024


def build_cases(seed: int | None = None, function: str | None = None) -> list[dict]:
    """The committed cases (``seed=None``), or fresh ones (hidden cases for the grader: random inputs, and
    a fresh variant of every fixed case, drawn from ``seed``); of one graded function if ``function`` is given.

    The committed cases draw from one generator, in the order of :data:`BUILDERS`. Fresh ones draw from a
    generator per function, seeded with ``seed``: a function's hidden cases are the same whether they are
    built alone (``function=``, e.g. for one selected test) or with all the others.
    """
    key = load_impl("answer")
    shared = torch.Generator().manual_seed(FIXTURE_SEED)
    cases = []
    for name, builder in BUILDERS.items():
        g = shared if seed is None else torch.Generator().manual_seed(seed)
        if function is None or name == function:
            cases += builder(key, g, fresh=seed is not None)
        elif seed is None:
            builder(key, g, fresh=False)  # its draws move the shared generator on: the next function's stay
    if seed is not None:
        for case in cases:
            case["id"] = "hidden_" + case["id"]
    return cases
