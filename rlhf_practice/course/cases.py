"""Instructor only: build the graded cases from the answer key (see :mod:`rlhf_practice.checks`).

    python -m rlhf_practice.course fixtures      # rewrite tests/fixtures/graded_cases.pt from the key

:func:`build_cases` with ``seed=None`` gives the committed cases (fixed inputs: the task book's
examples, edge cases and seeded random inputs); with a seed it gives only fresh random inputs, which
the grader uses as hidden cases. Expected values come from the key; each case also records what
common mistakes would return on its inputs, so that a failure can name the mistake without the key.
This module is not part of the student release: its mistake formulas give the right ones away.
"""

from __future__ import annotations

import torch

from rlhf_practice.course import load_impl

DTYPES = (torch.float32, torch.float64)


def _case(function, section, id, what, args, *, kwargs=None, key, mistakes=None, hint="", grads=None, **extra):
    """One case dict; ``expected`` is what the key returns on ``args``: every case checks the value."""
    fn = getattr(key.ppo if function in ("compute_advantages", "ppo_clip_loss") else key.grpo, function)
    kwargs = kwargs or {}
    expected = fn(*[v.clone() if isinstance(v, torch.Tensor) else v for _, v in args], **kwargs).detach()
    tol = 1e-6 if expected.dtype == torch.float32 else 1e-12
    # A "mistake" that gives the right answer on these inputs names nothing.
    mistakes = {k: v.to(expected.dtype) for k, v in (mistakes or {}).items()}
    mistakes = {
        k: v for k, v in mistakes.items() if v.shape != expected.shape or not torch.allclose(v, expected, atol=tol)
    }
    grads = grads or {}
    return {
        "id": id,
        "function": function,
        "section": section,
        "what": what,
        "args": list(args),
        "kwargs": kwargs,
        "expected": expected,
        "mistakes": mistakes,
        "hint": hint,
        "grad_of": extra.pop("grad_of", list(grads)),
        "grad_weights": extra.pop("grad_weights", None),
        "grads": grads,
        "unmodified": extra.pop("unmodified", False),
        "book": extra.pop("book", ""),
    }


def _grad(expected, message="", mistakes=None):
    return {"expected": expected, "message": message, "mistakes": mistakes or {}}


# ----------------------------------------------------------------------------- compute_advantages (§1.2)

ADV = "§1.2"


def _ref_advantages(rewards, values, normalize=True, eps=1e-8, unbiased=True):
    a = rewards.double() - values.double()
    return (a - a.mean()) / (a.std(unbiased=unbiased) + eps) if normalize else a


def adv_mistakes(rewards, values, normalize=True, eps=1e-8):
    a = rewards.double() - values.double()
    mistakes = {
        "normalize flag ignored (with normalize=False return rewards - values unchanged)": _ref_advantages(
            rewards, values, not normalize, eps
        ),
        "wrong sign (A = rewards - values, not values - rewards)": _ref_advantages(values, rewards, normalize, eps),
    }
    if normalize:
        mistakes |= {
            "population std (use torch's default unbiased std, as a.std())": _ref_advantages(
                rewards, values, normalize, eps, unbiased=False
            ),
            "divided by the std without subtracting the mean first": a / (a.std() + eps),
            "subtracted the mean but did not divide by the std": a - a.mean(),
            "rewards alone (the value baseline V(s) was not subtracted)": (rewards.double() - rewards.double().mean())
            / (rewards.double().std() + eps),
        }
    return mistakes


def advantage_cases(key, g: torch.Generator, fixed: bool) -> list[dict]:
    cases = []
    if fixed:
        rewards, values = torch.tensor([1.0, 0.0, 0.5, -0.5]), torch.tensor([0.5, 0.5, 0.0, 0.0])
        for normalize in (True, False):
            cases.append(
                _case(
                    "compute_advantages",
                    ADV,
                    "book_example" + ("" if normalize else "_without_normalize"),
                    f"compute_advantages on the §1.2 example (rewards = [1.0, 0.0, 0.5, -0.5], normalize={normalize})",
                    [("rewards", rewards), ("values", values)],
                    kwargs={"normalize": normalize},
                    key=key,
                    mistakes=adv_mistakes(rewards, values, normalize),
                    book=ADV,
                )
            )
        for normalize in (True, False):
            cases.append(
                _case(
                    "compute_advantages",
                    ADV,
                    f"no_gradient_to_values_normalize_{normalize}",
                    f"compute_advantages with values that carry gradient (normalize={normalize})",
                    [
                        ("rewards", torch.tensor([1.0, -0.5, 0.25, 0.0, 0.75])),
                        ("values", torch.tensor([0.1, 0.2, -0.3, 0.4, 0.0])),
                    ],
                    kwargs={"normalize": normalize},
                    key=key,
                    grad_weights=torch.arange(1.0, 6.0),
                    grads={
                        "values": _grad(
                            torch.zeros(5),
                            "missing detach: use values.detach(), the advantages are constants for the policy update",
                        )
                    },
                )
            )
        cases.append(
            _case(
                "compute_advantages",
                ADV,
                "inputs_unmodified",
                "compute_advantages",
                [("rewards", torch.tensor([1.0, -0.5, 0.25, 0.0])), ("values", torch.tensor([0.1, 0.2, -0.3, 0.4]))],
                key=key,
                unmodified=True,
            )
        )
        cases.append(
            _case(
                "compute_advantages",
                ADV,
                "constant_gives_zeros_not_nan",
                "compute_advantages with all advantages equal",
                [("rewards", torch.full((4,), 0.7)), ("values", torch.zeros(4))],
                key=key,
                hint="NaN from a zero std: divide by (std + eps), with the eps argument.",
            )
        )
    for dtype in DTYPES:
        for shape in ((5,), (64,), (257,), (4, 8)):
            for normalize in (True, False):
                rewards = torch.rand(shape, generator=g, dtype=torch.float64).mul(2).sub(1).to(dtype)
                values = torch.randn(shape, generator=g, dtype=torch.float64).mul(0.5).to(dtype)
                dims = "x".join(map(str, shape))
                cases.append(
                    _case(
                        "compute_advantages",
                        ADV,
                        f"random_{str(dtype)[6:]}_{dims}_normalize_{normalize}",
                        f"compute_advantages on random {dtype} inputs of shape {shape}, normalize={normalize}",
                        [("rewards", rewards), ("values", values)],
                        kwargs={"normalize": normalize},
                        key=key,
                        mistakes=adv_mistakes(rewards, values, normalize),
                    )
                )
    return cases


# ----------------------------------------------------------------------------- ppo_clip_loss (§2.2)

CLIP = "§2.2"


def clip_loss_mistakes(new, old, adv, clip_range):
    ratio = torch.exp(new.double() - old.double())
    a = adv.double()
    unclipped, clipped = ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a
    inv = torch.exp(old.double() - new.double())
    log_ratio = new.double() - old.double()
    mistakes = {
        "wrong sign (the loss is MINUS the mean of the clipped objective)": torch.min(unclipped, clipped).mean(),
        "max instead of min (PPO keeps the smaller, pessimistic objective)": -torch.max(unclipped, clipped).mean(),
        "no clipping (the ratio must be clamped to [1 - clip_range, 1 + clip_range])": -unclipped.mean(),
        "only the clipped term (take the min of the clipped and unclipped terms)": -clipped.mean(),
        "sum instead of mean over the batch": -torch.min(unclipped, clipped).sum(),
        "ratio inverted (ratio = exp(new_logprobs - old_logprobs), not old - new)": -torch.min(
            inv * a, inv.clamp(1 - clip_range, 1 + clip_range) * a
        ).mean(),
        "ratio without exp (ratio = exp(new - old); the log-probs are logs)": -torch.min(
            log_ratio * a, log_ratio.clamp(1 - clip_range, 1 + clip_range) * a
        ).mean(),
        "clamp range is [-clip_range, clip_range] instead of [1 - clip_range, 1 + clip_range]": -torch.min(
            unclipped, ratio.clamp(-clip_range, clip_range) * a
        ).mean(),
    }
    if clip_range != 0.2:
        fixed = ratio.clamp(0.8, 1.2) * a
        mistakes["clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)"] = -torch.min(
            unclipped, fixed
        ).mean()
    return mistakes


BOOK_RATIOS = [1.5, 0.5, 0.5, 1.5]  # TASKS.md §2.1, the four rows of the table
BOOK_ADVANTAGES = [1.0, 1.0, -1.0, -1.0]


def _book_clip_inputs():
    old = torch.tensor([-3.0, -2.0, -4.0, -1.0], dtype=torch.float64)
    new = old + torch.log(torch.tensor(BOOK_RATIOS, dtype=torch.float64))
    return new, old, torch.tensor(BOOK_ADVANTAGES, dtype=torch.float64)


def clip_loss_cases(key, g: torch.Generator, fixed: bool) -> list[dict]:
    fn, cases = "ppo_clip_loss", []

    def inputs(new, old, adv):
        return [("new_logprobs", new), ("old_logprobs", old), ("advantages", adv)]

    if fixed:
        new, old, adv = _book_clip_inputs()
        for clip_range in (0.2, 0.1, 0.3):
            cases.append(
                _case(
                    fn,
                    CLIP,
                    "book_example" + ("" if clip_range == 0.2 else f"_clip_range_{clip_range}"),
                    f"ppo_clip_loss on the §2.1 table (ratios 1.5, 0.5, 0.5, 1.5; A = +1, +1, -1, -1; clip_range={clip_range})",
                    [*inputs(new, old, adv), ("clip_range", clip_range)],
                    key=key,
                    mistakes=clip_loss_mistakes(new, old, adv, clip_range),
                    book=CLIP if clip_range == 0.2 else "",
                )
            )
        # d loss / d new = -(1/N) ratio A where the unclipped term is the min, else 0 (rows 2 and 4 of the table).
        expected = torch.tensor([0.0, -0.125, 0.0, 0.375], dtype=torch.float64)
        no_clip = (
            -torch.tensor(BOOK_RATIOS, dtype=torch.float64) * torch.tensor(BOOK_ADVANTAGES, dtype=torch.float64) / 4
        )
        cases.append(
            _case(
                fn,
                CLIP,
                "book_example_gradient",
                "ppo_clip_loss on the §2.1 table (clipped samples must get gradient 0)",
                [*inputs(new, old, adv), ("clip_range", 0.2)],
                key=key,
                grads={
                    "new_logprobs": _grad(
                        expected,
                        mistakes={"no clipping: clipped samples still pass gradient": no_clip, "wrong sign": -expected},
                    )
                },
            )
        )
        # Ratios inside the clip range (1.1) tie the two terms: the gradient must still flow there.
        old2 = torch.tensor([-3.0, -2.0, -4.0, -1.0], dtype=torch.float64)
        new2 = old2 + torch.log(torch.tensor([1.5, 0.5, 1.1, 0.7], dtype=torch.float64))
        adv2 = torch.tensor([2.0, 1.0, -1.0, -0.5], dtype=torch.float64)
        expected2 = torch.tensor([0.0, -0.125, 0.275, 0.0], dtype=torch.float64)
        cases.append(
            _case(
                fn,
                CLIP,
                "gradient_inside_and_outside_the_clip_range",
                "ppo_clip_loss with ratios 1.5, 0.5, 1.1, 0.7 and A = 2, 1, -1, -0.5",
                [*inputs(new2, old2, adv2), ("clip_range", 0.2)],
                key=key,
                mistakes=clip_loss_mistakes(new2, old2, adv2, 0.2),
                grads={
                    "new_logprobs": _grad(
                        expected2,
                        mistakes={
                            "no clipping: clipped samples still pass gradient": torch.tensor(
                                [-0.75, -0.125, 0.275, -0.0875], dtype=torch.float64
                            ),
                            "wrong sign": -expected2,
                        },
                    )
                },
            )
        )
        # The standard form (no .detach() on old_logprobs/advantages) is right: only new_logprobs' gradient counts.
        cases.append(
            _case(
                fn,
                CLIP,
                "gradient_when_every_input_requires_grad",
                "ppo_clip_loss when every input requires grad",
                [*inputs(new, old, adv), ("clip_range", 0.2)],
                key=key,
                grad_of=["new_logprobs", "old_logprobs", "advantages"],
                grads={"new_logprobs": _grad(expected, mistakes={"wrong sign": -expected})},
            )
        )
        old = torch.tensor([-300.0, -310.0, -295.5, -305.0])
        new = old + torch.tensor([0.05, -0.3, 0.4, 0.0])
        adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
        cases.append(
            _case(
                fn,
                CLIP,
                "sequence_level_logprobs_stay_finite",
                "ppo_clip_loss with log-probs around -300",
                [*inputs(new, old, adv), ("clip_range", 0.2)],
                key=key,
                mistakes=clip_loss_mistakes(new, old, adv, 0.2),
                hint="Compute ratio = exp(new_logprobs - old_logprobs); exp(new) / exp(old) is 0 / 0 here.",
            )
        )
        old = torch.tensor([-5.0, -6.0, -7.0, -8.0, -9.0])
        new = old + torch.log(torch.tensor([0.6, 0.9, 1.0, 1.1, 1.4]))
        for value in (1.0, -2.0):
            adv = torch.full((5,), value)
            cases.append(
                _case(
                    fn,
                    CLIP,
                    f"constant_advantages_{value:g}",
                    f"ppo_clip_loss with every advantage = {value:g}",
                    [*inputs(new, old, adv), ("clip_range", 0.2)],
                    key=key,
                    mistakes=clip_loss_mistakes(new, old, adv, 0.2),
                )
            )
        old, adv = torch.tensor([-12.0, -40.0, -7.5]), torch.tensor([0.5, -1.5, 2.5])
        cases.append(
            _case(
                fn,
                CLIP,
                "ratio_one_gives_minus_mean_advantage",
                "ppo_clip_loss with new_logprobs == old_logprobs (ratio 1, so loss = -mean(A))",
                [*inputs(old.clone(), old, adv), ("clip_range", 0.2)],
                key=key,
                mistakes={"wrong sign": torch.tensor(0.5), "sum instead of mean": torch.tensor(-1.5)},
            )
        )
        new, old, adv = _book_clip_inputs()
        cases.append(
            _case(
                fn,
                CLIP,
                "inputs_unmodified",
                "ppo_clip_loss",
                [*inputs(new, old, adv), ("clip_range", 0.2)],
                key=key,
                unmodified=True,
            )
        )
    for dtype in DTYPES:
        for n in (3, 64, 500):
            for clip_range in (0.1, 0.2, 0.3):
                old = (torch.rand(n, generator=g, dtype=torch.float64) * -30).to(dtype)
                new = (old.double() + torch.randn(n, generator=g, dtype=torch.float64) * 0.3).to(dtype)
                adv = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
                cases.append(
                    _case(
                        fn,
                        CLIP,
                        f"random_{str(dtype)[6:]}_n{n}_clip_range_{clip_range}",
                        f"ppo_clip_loss on random {dtype} inputs, N={n}, clip_range={clip_range}",
                        [*inputs(new, old, adv), ("clip_range", clip_range)],
                        key=key,
                        mistakes=clip_loss_mistakes(new, old, adv, clip_range),
                    )
                )
    return cases


# ----------------------------------------------------------------------------- compute_group_advantages (§3.2)

GROUP = "§3.2"
BOOK_GROUP_REWARDS = [1.0, 0.0, -1.0, 0.2, 0.4, 0.9]  # TASKS.md §3.1: B = 2 prompts x K = 3 replies


def _ref_group(rewards, group_size, normalize=True, eps=1e-8, unbiased=True):
    grouped = rewards.double().reshape(-1, group_size)
    a = grouped - grouped.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (grouped.std(dim=1, keepdim=True, unbiased=unbiased) + eps)
    return a.reshape(-1)


def group_mistakes(rewards, group_size, normalize=True, eps=1e-8):
    r = rewards.double()
    strided = r.reshape(group_size, -1)  # wrong: groups taken as every B-th element
    wrong_order = strided - strided.mean(dim=0, keepdim=True)
    if normalize:
        wrong_order = wrong_order / (strided.std(dim=0, keepdim=True) + eps)
    mistakes = {
        "wrong grouping order: the K replies of one prompt are consecutive (reshape to (B, K) = (-1, group_size), "
        "not (group_size, -1))": wrong_order.reshape(-1),
        "normalize flag ignored": _ref_group(rewards, group_size, not normalize, eps),
        "wrong sign (A = r - baseline)": -_ref_group(rewards, group_size, normalize, eps),
        "baseline is the whole batch's mean instead of each group's mean": (
            (r - r.mean()) / (r.std() + eps) if normalize else r - r.mean()
        ),
    }
    if normalize:
        centred = (r.reshape(-1, group_size) - r.reshape(-1, group_size).mean(dim=1, keepdim=True)).reshape(-1)
        mistakes |= {
            "normalized by the batch std instead of each group's own std (GRPO divides by the group's std)": centred
            / (r.std() + eps),
            "normalized the centred advantages over the whole batch instead of per group": (centred - centred.mean())
            / (centred.std() + eps),
            "population std (use torch's default unbiased std)": _ref_group(rewards, group_size, normalize, eps, False),
        }
    return mistakes


def group_cases(key, g: torch.Generator, fixed: bool) -> list[dict]:
    fn, cases = "compute_group_advantages", []
    if fixed:
        rewards = torch.tensor(BOOK_GROUP_REWARDS)
        for normalize in (True, False):
            cases.append(
                _case(
                    fn,
                    GROUP,
                    "book_example" + ("" if normalize else "_without_normalize"),
                    "compute_group_advantages on the 2 x 3 task-book example"
                    + ("" if normalize else " (normalize=False)"),
                    [("rewards", rewards), ("group_size", 3)],
                    kwargs={"normalize": normalize},
                    key=key,
                    mistakes=group_mistakes(rewards, 3, normalize),
                    book="§3.1",
                )
            )
        rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0, -1.0, 0.0, 0.0, -0.25, -0.25, -0.25, -0.25])
        for normalize in (True, False):
            cases.append(
                _case(
                    fn,
                    GROUP,
                    f"equal_rewards_give_zero_normalize_{normalize}",
                    f"compute_group_advantages with groups of equal rewards (normalize={normalize})",
                    [("rewards", rewards), ("group_size", 4)],
                    kwargs={"normalize": normalize},
                    key=key,
                    mistakes=group_mistakes(rewards, 4, normalize),
                    hint="NaN from a zero std: divide by (group std + eps).",
                )
            )
        cases.append(
            _case(
                fn,
                GROUP,
                "inputs_unmodified",
                "compute_group_advantages",
                [("rewards", torch.tensor(BOOK_GROUP_REWARDS)), ("group_size", 3)],
                key=key,
                unmodified=True,
            )
        )
    for dtype in DTYPES:
        for num_prompts, group_size in ((1, 4), (2, 3), (3, 2), (8, 4), (5, 8)):
            for normalize in (True, False):
                rewards = (torch.rand(num_prompts * group_size, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
                # Give groups different offsets so that group and batch statistics differ clearly.
                rewards = rewards + torch.arange(num_prompts, dtype=dtype).repeat_interleave(group_size) * 0.5
                mistakes = group_mistakes(rewards, group_size, normalize)
                if num_prompts == 1:  # one group: batch and group statistics coincide
                    mistakes = {k: v for k, v in mistakes.items() if "batch" not in k and "grouping" not in k}
                cases.append(
                    _case(
                        fn,
                        GROUP,
                        f"random_{str(dtype)[6:]}_B{num_prompts}_K{group_size}_normalize_{normalize}",
                        f"compute_group_advantages on random {dtype} rewards, B={num_prompts}, group_size={group_size}, normalize={normalize}",
                        [("rewards", rewards), ("group_size", group_size)],
                        kwargs={"normalize": normalize},
                        key=key,
                        mistakes=mistakes,
                    )
                )
    return cases


# ----------------------------------------------------------------------------- grpo_loss (§3.3)

LOSS = "§3.3"


def grpo_loss_mistakes(logprobs, advantages):
    lp, a = logprobs.double(), advantages.double()
    return {
        "wrong sign (loss = -mean(A * logprobs))": (a * lp).mean(),
        "sum instead of mean over the batch": -(a * lp).sum(),
        "used exp(logprobs) (probabilities) instead of log-probs": -(a * lp.exp()).mean(),
        "advantages left out (plain mean of log-probs)": -lp.mean(),
    }


def grpo_loss_cases(key, g: torch.Generator, fixed: bool) -> list[dict]:
    fn, cases = "grpo_loss", []
    if fixed:
        logprobs, advantages = torch.tensor([-2.0, -3.0, -1.0, -4.0]), torch.tensor([1.0, -1.0, 0.5, -0.5])
        args = [("logprobs", logprobs), ("advantages", advantages)]
        cases.append(
            _case(
                fn,
                LOSS,
                "hand_computed",
                "grpo_loss(logprobs=[-2, -3, -1, -4], advantages=[1, -1, 0.5, -0.5]) (= -2.5 / 4)",
                args,
                key=key,
                mistakes=grpo_loss_mistakes(logprobs, advantages),
            )
        )
        expected = torch.tensor([-0.25, 0.25, -0.125, 0.125])  # d loss / d logprobs = -A / N
        cases.append(
            _case(
                fn,
                LOSS,
                "gradients",
                "grpo_loss(logprobs=[-2, -3, -1, -4], advantages=[1, -1, 0.5, -0.5])",
                args,
                key=key,
                grads={
                    "logprobs": _grad(
                        expected, mistakes={"wrong sign": -expected, "sum instead of mean": 4 * expected}
                    ),
                    "advantages": _grad(torch.zeros(4), "missing detach: use advantages.detach()"),
                },
            )
        )
        cases.append(
            _case(
                fn,
                LOSS,
                "zero_advantages_give_zero",
                "grpo_loss with all advantages 0",
                [("logprobs", torch.tensor([-250.0, -310.0, -120.0])), ("advantages", torch.zeros(3))],
                key=key,
            )
        )
        cases.append(_case(fn, LOSS, "inputs_unmodified", "grpo_loss", args, key=key, unmodified=True))
    for dtype in DTYPES:
        for n in (2, 12, 256):
            logprobs = (torch.rand(n, generator=g, dtype=torch.float64) * -300).to(dtype)
            advantages = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
            cases.append(
                _case(
                    fn,
                    LOSS,
                    f"random_{str(dtype)[6:]}_n{n}",
                    f"grpo_loss on random {dtype} inputs, N={n}",
                    [("logprobs", logprobs), ("advantages", advantages)],
                    key=key,
                    mistakes=grpo_loss_mistakes(logprobs, advantages),
                )
            )
    return cases


BUILDERS = (advantage_cases, clip_loss_cases, group_cases, grpo_loss_cases)
FIXTURE_SEED = 2024


def build_cases(seed: int | None = None) -> list[dict]:
    """The committed cases (``seed=None``), or fresh random ones only (hidden cases for the grader)."""
    key = load_impl("answer")
    g = torch.Generator().manual_seed(FIXTURE_SEED if seed is None else seed)
    cases = [case for builder in BUILDERS for case in builder(key, g, fixed=seed is None)]
    if seed is not None:
        for case in cases:
            case["id"] = "hidden_" + case["id"]
    return cases
