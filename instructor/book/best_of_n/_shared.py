"""What the case builders of task 15's three graded functions share (instructor.book.best_of_n): float32, the
published cases' own generators and a draw of distinct whole numbers.

The published cases use hard-coded numbers or their own generators (:func:`_own`), never the shared ``g``: drawing
from it would change the recorded cases of other functions. The grader's hidden cases (``fresh=True``) draw from
``g``.
"""

from __future__ import annotations

import torch

from instructor.cases import _own  # noqa: F401 - the builders import it from here

F32 = torch.float32


def _ints(g: torch.Generator, low: int, high: int, count: int) -> list[int]:
    """``count`` distinct whole numbers drawn from [low, high), in increasing order."""
    return sorted((low + torch.randperm(high - low, generator=g)[:count]).tolist())
