"""The grading book: one module per student file (``instructor/book/<module>.py``, or a package of that name
with a module per graded function where one module would run past a thousand lines), holding for each of the
file's graded functions, in the order of the course table (:data:`rlhf_practice.course.GRADED`), the builder of
its cases (registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`): a function's whole grading story in
one place. :func:`instructor.cases.build_cases` and :func:`instructor.mistakes.wrong_variants` import a book
module only when they need one of its functions; :data:`instructor.mistakes.CATALOG` imports them all.
"""
