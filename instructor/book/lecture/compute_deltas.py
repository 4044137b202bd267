"""The grading book of compute_deltas (rlhf_practice/rl/lecture.py, TASKS.md §10.2): see :mod:`instructor.book`.

Shapes follow the lecture: [batch, trial, pos] = prompts, replies sampled per prompt, positions of a reply.
"""

from __future__ import annotations

import torch

from instructor.cases import DTYPES, F64, TIE_TOLERANCE, _adder, _name, _perm, _show, _tie_value, _uniform, cases_of
from instructor.mistakes import right, tie_zeroed, wrong

# ================ compute_deltas (TASKS.md §10.2) ===================================================================

# --- its cases


DELTAS_BOOK = [
    [7.0, 3.0, 6.0, 5.0],
    [6.0, 7.0, 7.0, 3.0],
]  # TASKS.md §10.2: row 0 = §10.1's replies + the prompt echoed
DELTA_MODES = ("rewards", "centered_rewards", "normalized_rewards", "max_rewards")


@cases_of("compute_deltas")
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


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_deltas")
def std_mean_and_a_mask(rewards, mode):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards", "max_rewards"):
        raise ValueError(mode)
    if mode == "rewards":
        return rewards.clone()
    std, mean = torch.std_mean(rewards, dim=-1, keepdim=True)
    if mode == "centered_rewards":
        return rewards - mean
    if mode == "normalized_rewards":
        return (rewards - mean) / (std + 1e-5)
    return rewards * (rewards == rewards.amax(dim=-1, keepdim=True))


@right("compute_deltas")
def match_statement(rewards, mode):
    match mode:
        case "rewards":
            return rewards
        case "centered_rewards" | "normalized_rewards":
            shifted = rewards - rewards[:, :1]  # exact statistics: a tied row is 0s, then 0 exactly
            centered = shifted - shifted.mean(-1)[:, None]
            if mode == "centered_rewards":
                return centered
            return centered / (shifted.std(-1)[:, None] + 1e-5)
        case "max_rewards":
            best = rewards.max(dim=1).values.unsqueeze(1)
            return torch.where(rewards < best, torch.zeros_like(rewards), rewards)
        case _:
            raise ValueError(f"unknown mode {mode}")


def _deltas(rewards, mode, mean, std, best):
    """The four modes from a mean, a std and a kept-maximum mask: for the variants whose mistake is in one of them.
    A tied row's centered and normalized deltas are 0, as the key's."""
    if mode == "rewards":
        return rewards
    tied = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
    if mode == "centered_rewards":
        return (rewards - mean).masked_fill(tied, 0.0)
    if mode == "normalized_rewards":
        return ((rewards - mean) / (std + 1e-5)).masked_fill(tied, 0.0)
    if mode == "max_rewards":
        return torch.where(best, rewards, torch.zeros_like(rewards))
    raise ValueError(mode)


def _row_stats(rewards):
    return (
        rewards.mean(dim=-1, keepdim=True),
        rewards.std(dim=-1, keepdim=True),
        rewards == rewards.max(dim=-1, keepdim=True).values,
    )


@wrong(
    "compute_deltas",
    "a tied row (all rewards equal) got deltas that are not 0: rounding puts its float32 mean ~1e-6 off and its std "
    "~1e-6, which the 1e-5 does not swamp; set a tied row's deltas to 0",
)
def tied_row_not_zero(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "centered_rewards":
        return rewards - mean
    if mode == "normalized_rewards":
        return (rewards - mean) / (std + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "NaN from a zero std: a prompt whose replies all got the same reward needs (std + 1e-5) in the denominator",
)
def normalized_without_the_epsilon(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return (rewards - mean) / std
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "mean and std over dim 0, across prompts; a prompt's replies are compared with each other: reduce over the trials (dim=-1)",
)
def statistics_over_the_batch_dim(rewards, mode):
    _, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, rewards.mean(dim=0, keepdim=True), rewards.std(dim=0, keepdim=True), best)


@wrong("compute_deltas", "std over dim 0, across prompts; the std is over the trials of one prompt (dim=-1)")
def std_over_the_batch_dim(rewards, mode):
    mean, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, mean, rewards.std(dim=0, keepdim=True), best)


@wrong(
    "compute_deltas",
    "mean (and std) of the whole batch; each prompt's replies are compared with each other: reduce over dim=-1",
)
def statistics_of_the_whole_batch(rewards, mode):
    _, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, rewards.mean(), rewards.std(), best)


@wrong("compute_deltas", "population std (unbiased=False); use torch's default (unbiased) std")
def deltas_population_std(rewards, mode):
    mean, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, mean, rewards.std(dim=-1, keepdim=True, unbiased=False), best)


@wrong("compute_deltas", "normalized_rewards divided by the std without subtracting the mean first")
def normalized_not_centered(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return rewards / (std + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong("compute_deltas", "centered_rewards divided by the std as well; only normalized_rewards divides by it")
def centered_also_divides(rewards, mode):
    mean, std, best = _row_stats(rewards)
    return _deltas(rewards, "normalized_rewards" if mode == "centered_rewards" else mode, mean, std, best)


@wrong("compute_deltas", "max_rewards kept every reward at or above the row's mean; keep only the row's maximum")
def max_keeps_above_the_mean(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, rewards >= mean)


@wrong("compute_deltas", "max_rewards returned the rewards unchanged; set every reward below its row's maximum to 0")
def max_keeps_every_reward(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, torch.ones_like(rewards, dtype=torch.bool))


@wrong("compute_deltas", "max_rewards put 1 at the maximum; keep the reward itself there (0 elsewhere)")
def max_one_hot(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "max_rewards":
        return best.to(rewards.dtype)
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "only the first of tied maxima kept (argmax); every reply that reaches its row's maximum keeps its reward",
)
def max_keeps_only_the_first_tie(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    first = torch.zeros_like(rewards, dtype=torch.bool).scatter(-1, rewards.argmax(dim=-1, keepdim=True), True)
    return _deltas(rewards, mode, mean, std, first)


@wrong("compute_deltas", "the maximum of the whole batch; keep each row's (each prompt's) own maximum")
def max_of_the_whole_batch(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, rewards == rewards.max())


@wrong(
    "compute_deltas",
    "epsilon inside the square root: normalized_rewards divides by std + 1e-5, not by sqrt(var + 1e-5)",
)
def epsilon_inside_the_square_root(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return (rewards - mean) / torch.sqrt(rewards.var(dim=-1, keepdim=True) + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong("compute_deltas", "instead of raising ValueError")
def deltas_unknown_mode_falls_back(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode in ("centered_rewards", "normalized_rewards", "max_rewards"):
        return _deltas(rewards, mode, mean, std, best)
    return rewards


@wrong("compute_deltas", "in place")
@tie_zeroed
def deltas_in_place(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode in ("centered_rewards", "normalized_rewards"):
        rewards -= mean
        if mode == "normalized_rewards":
            rewards /= std + 1e-5
        return rewards
    return _deltas(rewards, mode, mean, std, best)
