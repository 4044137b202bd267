"""The grading book of rlhf_practice/rl/token_level.py (tasks 7-9): a package, as one module it would run past
a thousand lines.

One module per graded function of the file, each as a book module (see :mod:`instructor.book`): the builder
of its cases and its catalogued mistakes and right variants. Importing this package imports them all
(the catalog orders their variants by the course table, whatever the order of import).
"""

from instructor.book.token_level import (  # noqa: F401 - importing them registers their cases and mistakes
    compute_gae,
    grpo_clip_loss,
    masked_mean,
    per_token_kl,
    token_ppo_loss,
)
