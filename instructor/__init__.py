"""The instructor wing: everything that needs the answer key or grades students. Never shipped.

    python -m instructor stubs            # rewrite rlhf_practice/rl/ from the answer key
    python -m instructor fixtures         # record tests/fixtures/graded/<file>.pt (each kept if it agrees)
    python -m instructor mutations        # every mistake of the catalog fails, every right variant passes
    python -m instructor gate-bars        # the outcome gates: the key on 5 seeds, the stubs, the catalog
    python -m instructor properties       # how many catalogued mistakes the property tests catch alone
    python -m instructor release OUT      # write the student release (no key, no instructor wing) to OUT
    python -m instructor gradescope OUT.zip   # the Gradescope autograder (no key inside)
    python -m instructor.grading DIR...   # grade a class, one submission per folder

- :mod:`instructor.book`: the grading book, one module per student file: for each graded function, the
  builder of its cases and its catalogued mistakes (the wrong code and the diagnosis it must get) and
  right variants.
- :mod:`instructor.mistakes`: the catalog's machinery (``@wrong``, ``@right``, the one ``CATALOG``);
  both the cases and the mutation check read the catalog.
- :mod:`instructor.cases`: the cases' machinery (``@cases_of``, ``build_cases``): the graded cases,
  their expected values from the key.
- :mod:`instructor.fixtures`: when a recording agrees with the key (a tolerance per dtype).
- :mod:`instructor.mutations`: the catalog run in-process against the cases.
- :mod:`instructor.properties`: the catalog run in-process against the property tests (tests/properties/).
- :mod:`instructor.gate`: the outcome gates (a short training run per algorithm, judged apart) and their bars.
- :mod:`instructor.release` and :mod:`instructor.grading`: the student release and the class grader;
  :mod:`instructor.feedback`, each student's page (``--feedback``); :mod:`instructor.similarity`, the pairs of
  submissions that share code (``--similarity``, copydetect); :mod:`instructor.gradescope`, the grader as a
  Gradescope autograder zip.
- :mod:`instructor.children`: the grader's child processes (tree, command line, limits), shared by the grader
  and the gates; the programs they run, :mod:`instructor.case_child`, :mod:`instructor.gate_child` (which trains
  with no student code in it), :mod:`instructor.function_server` (which answers its calls of the graded functions)
  and :mod:`instructor.judge_child`; :mod:`instructor.sandbox` (with :mod:`instructor.sandbox_setup`) isolates them.

The student-facing package (``rlhf_practice``) never imports this one; the release leaves it out.
"""
