"""What the case builders of task 16's two graded functions share (instructor.book.online): the published cases'
own generators, float32, and the wrapper that makes every case check its inputs stay unchanged.

The published cases use hard-coded numbers or their own generators (:func:`_own`), never the shared ``g``: drawing
from it would change the recorded cases of other functions. The grader's hidden cases (``fresh=True``) draw from
``g``.
"""

from __future__ import annotations

import torch

from instructor.cases import _own  # noqa: F401 - the builders import it from here

F32 = torch.float32


def _unchanged(add):
    """``add`` whose every case also checks that the function leaves its inputs as they were."""

    def add_unchanged(*args, **extra):
        extra.setdefault("unmodified", True)
        return add(*args, **extra)

    return add_unchanged
