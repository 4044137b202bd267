"""The grading book of rlhf_practice/rl/online.py (task 16): a package, as one module it would run past a thousand
lines.

One module per graded function of the file, each as a book module (see :mod:`instructor.book`): the builder of its
cases and its catalogued mistakes and right variants; what they share is in ``_shared``. Importing this package
imports them both.
"""

from instructor.book.online import (  # noqa: F401 - importing them registers their cases and mistakes
    proxy_agreement,
    select_pairs,
)
