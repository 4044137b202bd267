"""The grading book of compute_gae (rlhf_practice/rl/token_level.py, TASKS.md §8.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import _junk, _mask, _random_mask
from instructor.cases import DTYPES, F64, _adder, _grad, _name, _perm, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong

# ================ compute_gae (TASKS.md §8.2) =======================================================================

# --- its cases


GAE_BOOK = ([[0.0, 0.0, 1.0, 0.0], [0.7, 0.0, 0.0, 0.0]], [[0.5, 0.6, 0.8, 9.0], [0.2, 5.0, 5.0, 5.0]], [3, 1])  # §8.2


@cases_of("compute_gae")
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


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_gae")
def lists_and_stack(rewards, values, mask, gamma, lam):
    values = values.detach()
    n, t_max = rewards.shape
    adv = [None] * t_max
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max - 1, -1, -1):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[t] = last
    advantages = torch.stack(adv, dim=1)
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "returns = A (the value target is R_t = A_t + V_t)")
def returns_equal_advantages(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, adv


@wrong("compute_gae", "returns = discounted sum of rewards (the value target is R_t = A_t + V_t)")
def monte_carlo_returns(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(last)
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        running = (rewards[:, t] + gamma * running) * mask[:, t]
        adv[:, t] = last
        returns[:, t] = running
    return adv, returns


@wrong("compute_gae", "returns on the padding: R_t = (A_t + V_t) * mask is 0 after a reply's last real token")
def padding_keeps_its_return(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, adv + values


@wrong(
    "compute_gae",
    "GAE run left to right: the previous token's V_{t-1} and A_{t-1} were used as the next ones; A_t needs V_{t+1} and A_{t+1}, so start at the last token and go backwards",
)
def left_to_right_previous_token_as_the_next(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max):
        prev_v = values[:, t - 1] * mask[:, t - 1] if t > 0 else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * prev_v - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae", "GAE ran into the padding: after a reply's last real token, V_{t+1} and A_{t+1} are 0 (use the mask)"
)
def no_mask_at_all(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last
        adv[:, t] = last
    return adv, adv + values


@wrong("compute_gae", "lam left out: A_t = delta_t + gamma * lam * A_{t+1}")
def lambda_missing(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "gamma and lam swapped or gamma left out of the A recursion")
def gamma_and_lam_swapped(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + lam * nv - values[:, t] + lam * gamma * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "no bootstrap: delta_t = r_t + gamma * V_{t+1} - V_t needs the next value")
def no_bootstrap(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        last = (rewards[:, t] - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "GAE run left to right (t = 0, 1, ...): A_t needs A_{t+1}, so go from the last token backwards")
def left_to_right(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE ran into the padding: V_{t+1} and A_{t+1} after a reply's last real token must be 0 (multiply by the mask)",
)
def runs_into_padding(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = delta + gamma * lam * last
        adv[:, t] = last
    return adv * mask, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE bootstrapped from the padding: after a reply's last real token V_{t+1} must be 0 (next_value = V[:, t] * mask[:, t])",
)
def next_value_not_masked(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        next_value = values[:, t]
        advantages[:, t] = next_advantage
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "the padding's advantages leaked into the reply: A_{t+1} after a reply's last real token must be 0 (multiply next_advantage by mask[:, t] inside the loop; masking A at the end is too late)",
)
def advantages_masked_only_at_the_end(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = delta + gamma * lam * next_advantage
        next_value = values[:, t] * mask[:, t]
        advantages[:, t] = next_advantage
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "the padding's rewards leaked into the reply through A_{t+1}: masking the values is not enough (multiply next_advantage by mask[:, t] inside the loop)",
)
def only_values_masked(rewards, values, mask, gamma, lam):
    values = values.detach() * mask
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = delta + gamma * lam * next_advantage
        next_value = values[:, t]
        advantages[:, t] = next_advantage
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "delta_t used V_t in place of V_{t+1}: next_value was overwritten before delta was computed (compute delta first, then next_value = V[:, t] * mask[:, t])",
)
def next_value_overwritten_before_use(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t] * mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        advantages[:, t] = next_advantage
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "delta_t used V_{t-1}, the previous token's value, in place of V_{t+1}")
def previous_value_as_the_next(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        prev_v = values[:, t - 1] * mask[:, t - 1] if t > 0 else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * prev_v - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE run left to right: A_{t+1} was read before it was computed (still 0), so A_t = delta_t; start at the last token and go backwards",
)
def left_to_right_reads_the_next_advantage_too_early(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    for t in range(t_max):
        next_value = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(rewards[:, 0])
        next_advantage = advantages[:, t + 1] if t + 1 < t_max else torch.zeros_like(rewards[:, 0])
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantages[:, t] = (delta + gamma * lam * next_advantage) * mask[:, t]
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "missing detach")
def gae_values_not_detached(rewards, values, mask, gamma, lam):
    t_max = rewards.shape[1]
    adv = []
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv.insert(0, last)
    adv = torch.stack(adv, 1)
    return adv, (adv + values) * mask


@wrong("compute_gae", "changed its input `rewards` in place")
def rewards_masked_in_place(rewards, values, mask, gamma, lam):
    rewards.mul_(mask)  # the padding's rewards set to 0 in the caller's tensor
    return KEY.token_level.compute_gae(rewards, values, mask, gamma, lam)
