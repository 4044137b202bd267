"""A gate's training child: in the submission's tree, checks the gate's functions on a tiny input, then trains.

    python -I TREE/gate_child.py TREE JOB REPORT

Run by the outcome gates (:mod:`instructor.gate`, through :func:`instructor.children.run_child`) from its
copy in TREE: a package copy whose ``rl/`` holds the submission's files, with the training scripts and
the tiny assets. JOB says what to run: the graded functions to check first, the gate's command (a
training script of the tree, or ``-m`` and the lecture's module), its arguments, the lecture's settings,
where the lecture's model goes. REPORT gets only a status ("trained", "stub", "missing", "broken",
"failed"), a note and the steps made: the reward comes from the judge (:mod:`instructor.judge_child`),
never from this process, which runs the student's code. It imports nothing of ``instructor`` (not there
in the child's tree) and ``rlhf_practice`` only from TREE.
"""

import os
import sys


def main(argv: list[str]) -> None:
    tree, job_path, report_path = argv
    sys.path.insert(0, tree)  # the package copy and the submission's files: before anything is imported
    import torch

    job = torch.load(job_path, weights_only=True)
    report = {"status": "trained", "note": "", "steps": None}
    if _start_up(job["functions"], report):
        _train(tree, job, report)
    torch.save(report, report_path)


def _start_up(functions: list[str], report: dict) -> bool:
    """Call each of ``functions`` on a tiny input, as the training scripts do when they start; False (and the
    report says why) at the first that is a stub, missing or raising."""
    import importlib

    from rlhf_practice.course import GRADED, probe_args

    for function in functions:
        g = next(g for g in GRADED if g.function == function)
        try:
            fn = getattr(importlib.import_module("rlhf_practice.rl." + g.module), function)
            fn(*probe_args(g))
        except NotImplementedError:
            report.update(status="stub", note=f"{function} is a stub")
            return False
        except ModuleNotFoundError:
            report.update(status="missing", note=f"{g.module}.py missing")
            return False
        except BaseException as err:
            report.update(status="broken", note=f"{function} raises {type(err).__name__} on a tiny input")
            return False
    return True


def _train(tree: str, job: dict, report: dict) -> None:
    """Run the gate's command with the submission's functions; the lecture's final model goes to job["out"]."""
    import importlib
    import runpy

    import torch

    command = job["command"]
    sys.argv = [command[0] if command[0] != "-m" else command[1], *job["argv"]]
    try:
        if command[0] == "-m":  # the lecture: its model is kept so that the judge can measure it
            lecture = importlib.import_module(command[1])
            models = []

            class Kept(lecture.Model):
                def __init__(self, *args):
                    super().__init__(*args)
                    models.append(self)

            lecture.Model = Kept
            student = importlib.import_module("rlhf_practice.rl.lecture")
            curve = lecture.run_policy_gradient(lecture.LectureConfig(**job["lecture"]), student)
            report["steps"] = curve.epochs[-1] if curve.epochs else 0
            if curve.stopped:
                report.update(status="failed", note=curve.stopped)
            torch.save({k: v.detach().clone() for k, v in models[0].state_dict().items()}, job["out"])
        else:
            runpy.run_path(os.path.join(tree, command[0]), run_name="__main__")
    except SystemExit as err:
        if err.code not in (0, None):
            report.update(status="failed", note=f"the run stopped (exit {err.code})")
    except BaseException as err:
        report.update(status="failed", note=f"the run raised {type(err).__name__}")


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is written: skip the teardown (and whatever the student's code left running)
