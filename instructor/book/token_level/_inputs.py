"""The inputs that several token-level case builders draw (instructor.book.token_level)."""

from __future__ import annotations

import torch

from instructor.cases import F64, _uniform

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


def _very_unlikely(g: torch.Generator, fresh: bool) -> torch.Tensor:
    """(2, 3) float32 old log-probs of very unlikely tokens, -200 to -120: exp() of them underflows to 0."""
    if fresh:
        return _uniform(g, -200, -120, 2, 3, dtype=torch.float32)
    return torch.tensor([[-150.0, -180.0, -125.0], [-200.0, -140.0, -160.0]])


# Ratios below, inside and above the clip ranges 0.1 and 0.2, away from their edges (where the loss has a kink).
RATIO_BANDS = [(0.4, 0.65), (0.93, 1.07), (1.35, 1.7)]
