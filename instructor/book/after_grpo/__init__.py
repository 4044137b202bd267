"""The grading book of rlhf_practice/rl/after_grpo.py (task 14): a package, as one module it would run past a
thousand lines.

One module per graded function of the file, each as a book module (see :mod:`instructor.book`): the builder
of its cases and its catalogued mistakes and right variants; what they share is in ``_shared``. Importing this
package imports them all (the catalog orders their variants by the course table, whatever the order of import).
"""

from instructor.book.after_grpo import (  # noqa: F401 - importing them registers their cases and mistakes
    cispo_loss,
    clip_higher_loss,
    compute_rloo_advantages,
    filter_groups,
    gspo_loss,
)
