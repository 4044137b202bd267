"""The grader's child processes: the tree a child runs in, its command line, its limits.

Every child of the grader runs one of four programs, each a module of this wing with a ``main()``:

    instructor/case_child.py       the cases: calls the submission's functions, writes outputs, gradients, inputs after
    instructor/gate_child.py       a gate's training: checks its functions, then trains, in a tree with no student file
    instructor/function_server.py  beside a gate's training: answers its calls of the submission's graded functions
    instructor/judge_child.py      the judge: measures saved weights, in a tree that holds no student file

:func:`make_tree` copies them into the child's tree beside the package copy, and the child runs one with

    python -I TREE/<program>.py TREE INPUTS RESULTS

(in the sandbox, :func:`instructor.sandbox.command` around it). Not ``python -I -m instructor.<program>``:
under ``-I`` the module path is the standard library and the installed packages only (no current folder,
no script folder, no PYTHONPATH), and the instructor wing is neither installed nor, in the sandbox,
visible (it holds the case generator and the catalog of mistakes). So the program is a file of the tree,
read-only in the sandbox, run by its path; it imports nothing of ``instructor``, puts TREE first on its
``sys.path`` and imports ``rlhf_practice`` from there: the package copy, the submission's files in its
``rl/`` (the judge's: none), and the other programs as plain modules (the judge draws gate/best_of_n's pool
with ``gate_child``'s function), the only code the child can import besides the interpreter's packages.

Both the grader (:mod:`instructor.grading`, the cases) and the outcome gates (:mod:`instructor.gate`,
the training and the judge) start their children through :func:`run_child`: same limits, same
isolation, same environment.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from instructor import sandbox
from rlhf_practice import PACKAGE_DIR
from rlhf_practice.course import MODULES

SUBMISSION_FILES = tuple(f"{m}.py" for m in MODULES)  # what a submission holds: a copy of rlhf_practice/rl/
# the programs a child runs
CASES, GATE, JUDGE, SERVER = "case_child.py", "gate_child.py", "judge_child.py", "function_server.py"
PROGRAMS = (CASES, GATE, JUDGE, SERVER)
HERE = Path(__file__).resolve().parent  # where the programs are kept: instructor/


# A child may use ``seconds`` of CPU time (RLIMIT_CPU, which a loaded machine does not eat into) and at most
# WALL_FACTOR * seconds + WALL_EXTRA of wall-clock time (a backstop for a child that waits instead of computing):
# on a machine busy with other work, a child is slower, never cut short.
WALL_FACTOR, WALL_EXTRA = 3, 30


@dataclass
class Limits:
    """What one child may use: CPU seconds (and a wall-clock backstop), address space, size of a file it writes,
    the user it runs as, and the moment after which no child starts."""

    seconds: float
    memory_mb: int
    output_mb: int = 64
    # Run the child as this user (uid, gid) instead of the grader's own: where the grader runs as root without
    # the sandbox (the Gradescope autograder, instructor.gradescope), so that the child cannot read what only
    # root may (the hidden cases, the results). Its work folder is handed to that user first, and once it has
    # ended every process of that user is ended too (a process it left behind cannot outlive its stage).
    user: tuple[int, int] | None = None
    # time.monotonic() after which no child starts and a running one is stopped: the budget of one submission
    deadline: float | None = None
    budget: float | None = None  # the seconds that budget was, as the student is told when it runs out

    def out_of_time(self) -> str:
        """Once the submission's budget is spent, what a function or gate left without a result is told (not
        run, or stopped, because the time ran out: not its own crash or hang); else ""."""
        if self.deadline is None or time.monotonic() < self.deadline - 1:
            return ""
        had = f" (it had {self.budget:g} s)" if self.budget is not None else ""
        return f"not run: the submission's time ran out{had}"

    @property
    def wall_seconds(self) -> float:
        """How long a child may run by the clock: the backstop, cut at the deadline."""
        wall = self.seconds * WALL_FACTOR + WALL_EXTRA
        return wall if self.deadline is None else min(wall, self.deadline - time.monotonic())


def make_tree(tree: Path, files: dict[str, bytes], programs: tuple[str, ...]) -> None:
    """A package copy whose rl/ holds the submission's ``files`` (none: no student file at all), and the
    child ``programs`` beside it (only those its children run: the judge's holds the key's best-of-n
    functions), the only code the child can import; and :func:`scratch` beside the tree."""
    ignore = shutil.ignore_patterns("__pycache__", "assets")
    shutil.copytree(PACKAGE_DIR, tree / "rlhf_practice", ignore=ignore)
    for name in SUBMISSION_FILES:
        target = tree / "rlhf_practice" / "rl" / name
        target.unlink(missing_ok=True)
        if name in files:
            target.write_bytes(files[name])
    for program in programs:
        shutil.copyfile(HERE / program, tree / program)
    readable(tree)
    scratch(tree).mkdir()


def readable(folder: Path) -> None:
    """Make ``folder`` readable by every user and writable by its owner only (files 0644, folders 0755): the
    children's user reads the tree it does not own, whatever modes its sources had (an unzipped autograder's
    files can be private to root)."""
    for here, _, names in os.walk(folder):
        os.chmod(here, 0o755)
        for name in names:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)


def scratch(tree: Path) -> Path:
    """The one folder a child of ``tree`` may write (its results, its HOME, a gate's runs): beside the tree, in
    a folder the child's user cannot write, so that it can neither swap the folder for a link nor plant one
    where the grader writes (the job, the child's output)."""
    return tree.parent / "scratch"


def command(tree: Path, program: str, inputs: Path, results: Path, isolate: bool) -> list[str]:
    """The child's command line: ``program`` (one of PROGRAMS) of ``tree``. In the sandbox (``isolate``), it
    sees the interpreter, its packages and its work folder (the tree's parent, writable; the tree read-only),
    and nothing else of this machine."""
    python = [sys.executable, "-I", str(tree / program), str(tree), str(inputs), str(results)]
    return sandbox.command(python, work=tree.parent, read_only=[tree]) if isolate else python


def run_child(
    tree: Path, program: str, job: object, limits: Limits, isolate: bool, server: tuple[Path, Limits] | None = None
) -> dict | None:
    """Run ``program`` of ``tree`` on ``job`` (saved as it is, for the child to read: the cases' inputs, a
    gate's job, the judge's jobs); its results, or None when it produced none we can read.

    ``server``: (the submission's tree, its limits): a gate's training child, which imports no student code, and
    beside it the function server (:mod:`instructor.function_server`) of that tree, which answers its calls of the
    graded functions over two pipes (job["server"]: the child's ends); the server is ended with the child."""
    if limits.wall_seconds <= 0:  # the submission's budget is spent: nothing more of it runs
        return None
    companion, passed = None, ()
    try:
        if server is not None:
            (calls, served), (answers, answered) = os.pipe(), os.pipe()  # (read, write): calls there, answers back
            try:
                companion, _ = _start(server[0], SERVER, {"read": calls, "write": answered}, server[1], isolate,
                                      (calls, answered))  # fmt: skip
            finally:
                os.close(calls)
                os.close(answered)
            job, passed = {**job, "server": [answers, served]}, (answers, served)
        try:
            proc, results = _start(tree, program, job, limits, isolate, passed)
        finally:
            for fd in passed:
                os.close(fd)
        try:
            proc.wait(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None
    finally:
        if companion is not None:  # the training child is done: its server has nothing more to answer
            os.killpg(companion.pid, signal.SIGKILL)
            companion.wait()
        for ran in (limits, server[1] if server else None):
            if ran is not None and ran.user is not None:
                end_processes(ran.user[0])
    try:  # a regular file of the scratch folder, not a link or a pipe the child left in its place
        with open(os.open(results, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            loaded = torch.load(f, weights_only=True) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
    except Exception:  # noqa: BLE001 - missing, truncated or forged: no usable results
        return None
    finally:
        results.unlink(missing_ok=True)
    return loaded if isinstance(loaded, dict) else None


def _start(
    tree: Path, program: str, job: object, limits: Limits, isolate: bool, fds: tuple[int, ...] = ()
) -> tuple[subprocess.Popen, Path]:
    """Start ``program`` of ``tree`` on ``job`` under ``limits`` (its output to the work folder's
    child_output.txt), with the pipe ends ``fds`` open in it; the process and where its results will be."""
    work, writable = tree.parent, scratch(tree)
    inputs, results = work / "inputs.pt", writable / f"results-{random.randrange(10**9)}.pt"
    torch.save(job, inputs)

    # The limits, set by util-linux's prlimit just before it execs the child (inherited by all it starts):
    # no Python code runs between fork and exec, so that several children can start from threads.
    cpu = int(limits.seconds) + 1
    prlimit = ["prlimit", f"--as={limits.memory_mb * 2**20}", f"--cpu={cpu}"]
    prlimit += [f"--fsize={limits.output_mb * 2**20}", "--core=0", "--"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(writable), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    user = {}
    if limits.user is not None:
        # The child's user may enter the work folder and read the tree and the job, and write only its scratch
        # folder. No process of that user is alive now (each child's are ended), so nothing can swap an entry
        # of scratch for a link while it is handed over; links are not followed.
        uid, gid = limits.user
        os.chmod(work, 0o711)
        for folder, _, names in os.walk(writable):
            for path in (folder, *(os.path.join(folder, n) for n in names)):
                os.chown(path, uid, gid, follow_symlinks=False)
        user = {"user": uid, "group": gid, "extra_groups": []}
        prlimit.insert(-1, "--nproc=1024")  # per user: a fork loop stops there (threads count too)
    with open(work / "child_output.txt", "wb") as out:
        proc = subprocess.Popen(
            [*prlimit, *command(tree, program, inputs, results, isolate)],
            cwd=writable,  # relative paths a run writes (pairs, caches) land in the scratch folder
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            pass_fds=fds,
            **user,
        )
    return proc, results


def _uids(pid: str) -> set[int]:
    """The real, effective, saved and file-system user ids of a live process (none for one gone, or one whose
    every thread is dead: a zombie waiting to be reaped; a process whose first thread exited while others run
    shows as a zombie too, and counts as live)."""
    try:
        status = Path("/proc", pid, "status").read_text()
        states = [Path("/proc", pid, "task", t, "stat").read_text().rsplit(")", 1)[1].split()[0]
                  for t in os.listdir(Path("/proc", pid, "task"))]  # fmt: skip
    except (OSError, IndexError):
        return set()
    if all(state in "ZX" for state in states):
        return set()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {int(u) for u in fields.get("Uid", "").split()}


def processes_of(uid: int) -> list[int]:
    """The live processes that run as ``uid`` (any of their user ids), read from /proc."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and uid in _uids(pid)]


def end_processes(uid: int, rounds: int = 100) -> None:
    """Kill every process of user ``uid`` (by its user id, never by name): what a child left behind (a
    detached process waiting for the judge, a fork loop). Stopped first, then killed, until none is left."""
    if uid == os.geteuid():
        raise ValueError(f"end_processes({uid}): that is the grader's own user")
    for _ in range(rounds):
        pids = processes_of(uid)
        if not pids:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped processes cannot fork while the others die
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.01)
    raise RuntimeError(f"user {uid} still has processes {processes_of(uid)[:5]} after {rounds} rounds of SIGKILL")
