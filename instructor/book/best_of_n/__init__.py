"""The grading book of rlhf_practice/rl/best_of_n.py (task 15): a package, one module per graded function, in the
order of the course table: best_of_n_kl (TASKS.md §15.2), best_of_n_estimate (§15.3) and ensemble_reward (§15.5).

Each module is a book module (see :mod:`instructor.book`): the builder of its function's cases and its catalogued
mistakes and right variants; what they share is in ``_shared``. Importing this package imports the three (the
catalog orders variants by the course table, then by their order within their module).
"""

from instructor.book.best_of_n import (  # noqa: F401 - importing them registers their cases and mistakes
    best_of_n_estimate,
    best_of_n_kl,
    ensemble_reward,
)
