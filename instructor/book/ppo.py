"""The grading book of rlhf_practice/rl/ppo.py: compute_advantages (TASKS.md §1.2) and ppo_clip_loss (§2.2).

For each graded function, in the order of the course table (rlhf_practice.course.GRADED): the builder of its
cases (registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`), so that a function's whole grading
story is in one place. Written once, read by :func:`instructor.cases.build_cases` and
:data:`instructor.mistakes.CATALOG`, which import this module only when they need its functions.
"""

from __future__ import annotations

import torch

from instructor.cases import (
    DTYPES,
    F64,
    TIE_TOLERANCE,
    _adder,
    _grad,
    _grads_of,
    _name,
    _perm,
    _show,
    _signs,
    _tie_value,
    _uniform,
    cases_of,
)
from instructor.mistakes import right, tie_zeroed, wrong

# ================ compute_advantages (TASKS.md §1.2) ================================================================

# --- its cases


@cases_of("compute_advantages")
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
    row = [0.3, -0.2, 0.9, 0.1]  # a tie is every element equal, not every row equal to the first
    if fresh:
        row = _uniform(g, -1, 1, 4).tolist()
    add(
        "identical_rows_not_a_tie",
        f"compute_advantages on two identical rows of rewards {row} (values 0), normalize=True: not a tie",
        [("rewards", torch.tensor([row, row])), ("values", torch.zeros(2, 4))],
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


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_advantages")
def no_grad_block(rewards, values, normalize=True, eps=1e-8):
    with torch.no_grad():
        a = rewards - values
    if normalize:
        tie = bool((a == a.flatten()[0]).all())
        a = torch.zeros_like(a) if tie else (a - a.mean()) / (a.std() + eps)
    return a


@right("compute_advantages")
def std_mean(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if not normalize:
        return a
    std, mean = torch.std_mean(a.double())  # in float64: a float32 tie is then 0 to within ~1e-8
    return ((a - mean) / (std + eps)).to(a.dtype)


@wrong(
    "compute_advantages",
    "a tie is every advantage equal (each element against the first one, advantages.flatten()[0]), "
    "not every row equal to the first row",
)
def tie_by_first_row(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        tie = bool((a == a[:1]).all())
        a = torch.zeros_like(a) if tie else (a - a.mean()) / (a.std() + eps)
    return a


@wrong(
    "compute_advantages",
    "all advantages equal but not 0: rounding puts the float32 mean ~1e-7 off and the std ~1e-7, far above eps, and "
    "(A - mean) / (std + eps) makes that noise about +-0.9; when every advantage is the same, return 0s",
)
def equal_advantages_not_zero(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "normalize flag ignored (with normalize=False return rewards - values unchanged)")
@tie_zeroed
def always_normalizes(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    return (a - a.mean()) / (a.std() + eps)


@wrong("compute_advantages", "normalize flag ignored (with normalize=False return rewards - values unchanged)")
def never_normalizes(rewards, values, normalize=True, eps=1e-8):
    return rewards - values.detach()


@wrong("compute_advantages", "wrong sign (A = rewards - values, not values - rewards)")
def values_minus_rewards(rewards, values, normalize=True, eps=1e-8):
    a = values.detach() - rewards
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "population std (use torch's default unbiased std, as a.std())")
def population_std(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / (a.std(unbiased=False) + eps)
    return a


@wrong("compute_advantages", "divided by the std without subtracting the mean first")
def no_mean_subtraction(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = a / (a.std() + eps)
    return a


@wrong("compute_advantages", "subtracted the mean but did not divide by the std")
def mean_subtracted_no_std(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = a - a.mean()
    return a


@wrong("compute_advantages", "rewards alone (the value baseline V(s) was not subtracted)")
@tie_zeroed
def no_value_baseline(rewards, values, normalize=True, eps=1e-8):
    a = rewards
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "missing detach")
@tie_zeroed
def values_not_detached(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "NaN from a zero std: divide by (std + eps), with the eps argument")
def no_eps(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / a.std()
    return a


@wrong("compute_advantages", "in place")
@tie_zeroed
def rewards_in_place(rewards, values, normalize=True, eps=1e-8):
    rewards -= values.detach()
    if normalize:
        rewards -= rewards.mean()
        rewards /= rewards.std() + eps
    return rewards


@wrong("compute_advantages", "dtype")
@tie_zeroed
def float32_cast(rewards, values, normalize=True, eps=1e-8):
    a = (rewards - values.detach()).float()
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


# ================ ppo_clip_loss (TASKS.md §2.2) =====================================================================

# --- its cases


BOOK_RATIOS = [1.5, 0.5, 0.5, 1.5]  # TASKS.md §2.1, the four rows of the table
BOOK_ADVANTAGES = [1.0, 1.0, -1.0, -1.0]


def _clip_inputs(new, old, adv, clip_range=0.2) -> list:
    return [("new_logprobs", new), ("old_logprobs", old), ("advantages", adv), ("clip_range", clip_range)]


@cases_of("ppo_clip_loss")
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


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("ppo_clip_loss")
def max_of_negatives(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = (new_logprobs - old_logprobs.detach()).exp()
    a = advantages.detach()
    return torch.max(-ratio * a, -torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def where_form(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    clipped = torch.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
    obj = torch.where(ratio * a < clipped * a, ratio * a, clipped * a)
    return -obj.sum() / obj.numel()


@right("ppo_clip_loss")
def advantages_not_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def old_not_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs)
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def cleanrl_form_nothing_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = (new_logprobs - old_logprobs).exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    return torch.max(pg_loss1, pg_loss2).mean()


@wrong("ppo_clip_loss", "wrong sign (the loss is MINUS the mean of the clipped objective)")
def objective_not_negated(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "max instead of min (PPO keeps the smaller, pessimistic objective)")
def max_instead_of_min(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.max(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "no clipping (the ratio must be clamped to [1 - clip_range, 1 + clip_range])")
def no_clip(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    return -(ratio * advantages.detach()).mean()


@wrong("ppo_clip_loss", "only the clipped term (take the min of the clipped and unclipped terms)")
def only_the_clipped_term(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    return -(ratio.clamp(1 - clip_range, 1 + clip_range) * advantages.detach()).mean()


@wrong("ppo_clip_loss", "sum instead of mean over the batch")
def sum_over_batch(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).sum()


@wrong("ppo_clip_loss", "ratio inverted (ratio = exp(new_logprobs - old_logprobs), not old - new)")
def inverted_ratio(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(old_logprobs.detach() - new_logprobs)
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "ratio without exp (ratio = exp(new - old); the log-probs are logs)")
def ratio_without_exp(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = new_logprobs - old_logprobs.detach()
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "clamp range is [-clip_range, clip_range] instead of [1 - clip_range, 1 + clip_range]")
def clamp_around_0(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(-clip_range, clip_range) * a).mean()


@wrong("ppo_clip_loss", "clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)")
def clip_range_fixed_at_0_2(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()


@wrong(
    "ppo_clip_loss",
    "min of the two ratios times A (take the min of the two products ratio * A and clamp(ratio, 1 - clip_range, 1 + clip_range) * A)",
)
def min_of_ratios(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -(torch.min(ratio, ratio.clamp(1 - clip_range, 1 + clip_range)) * a).mean()


@wrong(
    "ppo_clip_loss",
    "ratio = exp(new_logprobs) / exp(old_logprobs) is 0 / 0 for log-probs around -300 (compute exp(new_logprobs - old_logprobs))",
)
def exp_ratio_of_probs(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong(
    "ppo_clip_loss",
    "the clipped ratio was detached (clamp the ratio itself: inside [1 - clip_range, 1 + clip_range] the clipped term passes gradient too)",
)
def clipped_ratio_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.detach().clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "do not detach new_logprobs")
def new_logprobs_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs.detach() - old_logprobs)
    return -torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages).mean()


@wrong("ppo_clip_loss", "wrong output shape")
def no_mean(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
