"""The grading book of rlhf_practice/rl/lecture.py (task 10): a package, as one module it would run past a
thousand lines.

One module per graded function of the file (the two sort rewards share one), each as a book module (see
:mod:`instructor.book`): the builder of its cases and its catalogued mistakes and right variants. Importing
this package imports them all (the catalog orders their variants by the course table, whatever the order of
import).
"""

from instructor.book.lecture import (  # noqa: F401 - importing them registers their cases and mistakes
    compute_deltas,
    compute_kl_penalty,
    compute_loss,
    sort_rewards,
)
