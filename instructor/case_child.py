"""The cases' child: calls the submission's functions on the cases' inputs and writes what they return.

    python -I TREE/case_child.py TREE INPUTS RESULTS

Run by the grader (:mod:`instructor.grading`, through :func:`instructor.children.run_child`) from its copy
in TREE: a package copy whose ``rl/`` holds the submission's files. INPUTS holds the cases as the child
may see them (inputs, never the expected values); RESULTS gets {case id: what
:func:`rlhf_practice.checks.run_case` returns}, plain data that the grader compares. It imports nothing
of ``instructor`` (not there in the child's tree) and ``rlhf_practice`` only from TREE.
"""

import os
import sys


def main(argv: list[str]) -> None:
    tree, inputs_path, results_path = argv
    sys.path.insert(0, tree)  # the package copy and the submission's files: before anything is imported
    import importlib

    import torch

    from rlhf_practice.checks import run_case

    inputs = torch.load(inputs_path, weights_only=True)
    results = {}
    for case in inputs:
        try:
            module = importlib.import_module("rlhf_practice.rl." + case["module"])
            fn = getattr(module, case["function"])
        except BaseException as err:
            results[case["id"]] = {  # as run_case reports an error
                "error": f"{type(err).__name__}: {err}",
                "output": None,
                "requires_grad": False,
                "grads": {},
                "after": {},
            }
            continue
        results[case["id"]] = run_case(fn, case)
    torch.save(results, results_path)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the results are written: skip the interpreter's teardown (a third of a second with torch loaded)
