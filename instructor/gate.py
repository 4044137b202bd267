"""The outcome gate: does a submission's code train? One short training run per algorithm, judged apart.

    python -m instructor gate-bars                       # the key on 5 seeds, the stubs, the catalog: bars
    python -m instructor gate-bars --gates ppo grpo --variants 3

For each gate of :data:`GATES`, the grader (:mod:`instructor.grading`) trains the tiny preset with the
submission's own functions: a child process (:mod:`instructor.gate_child`, started by
:func:`instructor.children.run_child`: limits, sandbox) runs the gate's command for ``steps`` steps with
seed :data:`GATE_SEED` on one CPU thread, in a tree that holds no student file, and saves the final policy
into its work folder. Its graded functions are proxies: each call is answered by the submission's function
server (:mod:`instructor.function_server`), a child started beside it as the cases' child is (the
submission's tree, its user, its sandbox), so that nothing of the submission runs where the loop trains,
saves and is judged. The training child runs as the grader, in a folder the server can neither enter nor
see. A gate whose functions are stubs, missing or raising on a tiny input fails at once, without training,
with a note.

The reward reached is not read from the run's own files (metrics.csv is written by the process that
runs the student's code, so it can be forged): a second child, the *judge* (:mod:`instructor.judge_child`),
in a fresh copy of the package that holds no student file and in a folder that no gate child could
write, loads only the saved weights (safetensors, or a tensor-only state dict for the lecture) and
measures them on fixed prompts: the mean sentiment reward of :data:`JUDGE_PROMPTS` replies sampled with
seed :data:`JUDGE_SEED` (the lecture: the held-out exact-sort accuracy). The gate passes when that
number reaches ``bar``.

gate/best_of_n (task 15) trains nothing: best-of-n reads a fixed pool, so its outcome is the over-optimization
curve itself. Its gate child draws one pool of the tiny policy's replies (:data:`BEST_OF_N`), scores it with the
rule reward (the gold) and with three noisy copies of it rounded to halves (the proxies: they tie where the gold
differs), and computes with the submission's functions the KL axis and the best-of-n curves of gold and proxy,
picked by the gold and by the proxies' mean, min and uwo ensembles; it saves the curves (tensors only). The judge
draws the same pool, computes the curves with the key's functions written out, and measures the share of the
submission's numbers within :data:`BEST_OF_N_TOLERANCE` of its own; the bar is all of them.

gate/online (task 16) trains nothing either: what its two functions decide in the loop is which pairs the annotator
labels and what the detector reads. Its gate child draws :data:`ONLINE`'s fresh pairs of the tiny policy (two replies
to each prompt), the same kind of gold and proxies, and with the submission's functions picks the labels of every
selection (random, uncertain by the three models and by one, disagreement) and measures the proxies' agreement on each
pick and on all pairs; the judge recomputes them with the key's functions written out, and the bar is all of them
equal (the agreements within 1e-6, NaN equal to NaN).

Bars and budgets come from ``python -m instructor gate-bars`` (:func:`main`): the key on seeds 0-4
(every seed must pass with margin), the stubs (must fail), and the catalog's variants of each gate's
functions, each built as the key's file with that one function replaced (wrong ones that still pass
the gate are caught by the cases: ``python -m instructor mutations``; right ones must pass).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import stat
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from instructor import sandbox
from instructor.children import GATE, JUDGE, SERVER, Limits, make_tree, readable, run_child, scratch
from rlhf_practice.course import GRADED, MODULES, ROOT, answer_path, module_of

GATE_SEED = 0  # every submission trains with the same seed: the same prompts and initialisation
JUDGE_SEED = 12345  # the judge's prompts and sampling: never a training seed
JUDGE_PROMPTS = 128  # replies the judge samples and scores per policy (two batches of 64)
SCRIPTS = ("train_ppo.py", "train_grpo.py", "train_dpo.py", "train_reward_model.py")  # what a gate child runs (copied)
MAX_POLICY_MB = 64  # a saved file larger than this is not a tiny policy: the gate fails
JUDGE_RESERVE = 240  # seconds of a submission's budget kept for the judge (all nine gates: about 30 s)
STATUSES = ("trained", "stub", "missing", "broken", "failed")  # what a gate child may report


@dataclass(frozen=True)
class Gate:
    """One algorithm's gate: the command it trains with, what it needs, its budget, bar and points."""

    name: str  # "ppo", "grpo", ...: the CSV column is gate/<name>
    # A training script of SCRIPTS with its flags, ("-m", module, flags...), or (GATE, "best_of_n") / (GATE, "online"):
    # the gate child's own measurement (gate/best_of_n and gate/online, which train nothing).
    command: tuple[str, ...]
    # The graded functions its training loop calls with the gate's flags: gate-bars trains the catalog's
    # variants of these. Written here, not derived from GRADED: the course table says which file holds a
    # function, not which loop calls it (ppo_token's loop calls none of ppo.py's, though it checks them).
    # A graded function added to a student file needs no edit here (``checked`` follows GRADED); a training
    # loop changed to call it does, and test_gate checks that each name here is in its command's source.
    functions: tuple[str, ...]
    modules: tuple[str, ...]  # the student files its start-up checks: every graded function in them must run
    steps: int  # the step budget (the lecture: epochs; best_of_n: replies per prompt in the pool, N)
    # What the judge must measure on the final policy (mean reward; the lecture: held-out accuracy; best_of_n: the share
    # of the curves' numbers that agree with the judge's)
    bar: float
    points: float = 10.0
    # What the judge measures: "sentiment" (the saved policy's mean reward), "sort" (its mean sort reward, the sort
    # task's tiny model), "lecture" (its held-out exact-sort accuracy), "rm" (the saved reward model's accuracy on
    # the judge's own preference pairs), "best_of_n" (the share of the saved curves that agree with the judge's) or
    # "online" (the share of the saved picks and agreements that equal the judge's).
    judged: str = "sentiment"

    @property
    def saved(self) -> str:
        """The folder of the run that holds the weights the judge reads."""
        return "reward_model" if self.judged == "rm" else "policy"

    @property
    def kept(self) -> str | None:
        """The file the gate child itself writes into the run's folder for the judge (the lecture's model, best-of-n's
        curves); None where a training script saves its own weights (``saved``)."""
        return {"-m": "model.pt", GATE: "curves.pt"}.get(self.command[0])

    def shortfall(self, score: float) -> str:
        """The note of a judged score below the bar."""
        if self.judged in MEASURED:
            what = {"best_of_n": "the best-of-n curves'", "online": "the picked pairs' and agreements'"}[self.judged]
            return f"gate/{self.name}: {score:.0%} of {what} numbers agree with the judge's (bar {self.bar:.0%})"
        return f"gate/{self.name}: reward {score:.2f} < bar {self.bar:g} after {self.steps} steps"

    @property
    def checked(self) -> tuple[str, ...]:
        """The graded functions the child calls on a tiny input before training (as the script's start-up)."""
        return tuple(g.function for g in GRADED if g.module in self.modules)

    def argv(self, seed: int, run_dir: str) -> list[str]:
        """The command's arguments after the script (or module) name, for a run of ``seed``."""
        if self.command[0] == GATE:
            return list(self.command[1:])
        if self.command[0] == "-m":
            return [*self.command[2:], "--epochs", str(self.steps), "--seed", str(seed)]
        flags = ["--preset", "tiny", "--device", "cpu", "--num_steps", str(self.steps), "--seed", str(seed)]
        return [*self.command[1:], *flags, "--run_dir", run_dir, "--run_name", self.name]


PPO = ("compute_advantages", "ppo_clip_loss")
TOKEN = ("masked_mean", "per_token_kl")
LECTURE = ("sort_distance_reward", "compute_deltas", "compute_loss")  # the default run: distance reward, no KL
# The functions each run really calls (train_ppo.py, train_grpo.py, train_dpo.py, rlhf_practice.lecture,
# train_reward_model.py).
# Bars from python -m instructor gate-bars (judged reward of the key, seeds 0-4, min - max; an untrained
# policy: -0.01, the lecture's untrained model: 0.00): ppo 0.55-0.63, grpo 0.63-0.73, ppo_token 0.53-0.66,
# grpo_token 0.70-0.83, lecture (held-out exact sort) 0.52-0.88, dpo 0.36-0.41. rm (the judge's pair accuracy;
# an untrained score head: about 0.5): the key 0.86-0.93; reward_loss with the sign flipped 0.07, get_reward
# read at the prompt's last token 0.49, at position -1 (padding) 0.79 (fails only by 0.01: the last pad
# position has read the whole sequence too, it is the cases that catch it); the stub fails at start-up.
RM_STEPS, RM_BAR = 60, 0.8  # gate/rm: judged pair accuracy (see above)
# gate/after_grpo (task 14): --task sort with RLOO advantages, CISPO's loss and dynamic sampling, judged by the
# mean sort reward of the judge's sampled replies (see above)
AFTER_GRPO_FLAGS = ("--advantage", "rloo", "--loss_type", "cispo", "--dynamic_sampling")
AFTER_GRPO_STEPS, AFTER_GRPO_BAR = 30, 0.35
# gate/best_of_n (task 15): the pool of its curves, 16 prompts x N = 32 replies of the tiny policy, 3 proxies (the gold
# plus noise of std 0.5, rounded to halves: ties); every number within 0.01 of the judge's (the KL: 0.01 of max(1, KL)).
BEST_OF_N = {"prompts": 16, "size": 32, "models": 3, "noise": 0.5}
BEST_OF_N_TOLERANCE = 0.01
# gate/online (task 16): 64 fresh pairs of the tiny policy's replies, 4 proxies made as gate/best_of_n's (noise of std 1:
# some orders wrong, ties where the gold differs) and 3 not rounded, 16 labels; every picked index and agreement equal
# to the judge's.
ONLINE = {"pairs": 64, "models": 4, "noise": 1.0, "labels": 16}
GATES: tuple[Gate, ...] = (
    Gate("ppo", ("train_ppo.py",), PPO, ("ppo",), steps=12, bar=0.3),
    Gate("grpo", ("train_grpo.py",), ("compute_group_advantages", "grpo_loss"), ("grpo",), steps=30, bar=0.3),
    Gate(
        "ppo_token",
        ("train_ppo.py", "--level", "token"),
        (*TOKEN, "compute_gae", "token_ppo_loss"),
        ("ppo", "token_level"),
        steps=12,
        bar=0.3,
    ),
    Gate(
        "grpo_token",
        ("train_grpo.py", "--level", "token"),
        ("compute_group_advantages", *TOKEN, "grpo_clip_loss"),
        ("grpo", "token_level"),
        steps=20,
        bar=0.3,
    ),
    Gate("lecture", ("-m", "rlhf_practice.lecture"), LECTURE, ("lecture",), steps=150, bar=0.25),
    Gate("dpo", ("train_dpo.py",), ("reply_logps", "reference_logps", "dpo_loss"), ("dpo",), steps=20, bar=0.2),
    Gate(
        "after_grpo",
        ("train_grpo.py", "--level", "token", "--task", "sort", *AFTER_GRPO_FLAGS),
        ("compute_rloo_advantages", "cispo_loss", "filter_groups", *TOKEN),
        ("grpo", "token_level", "after_grpo"),
        steps=AFTER_GRPO_STEPS,
        bar=AFTER_GRPO_BAR,
        judged="sort",
    ),
    Gate(
        "rm",
        ("train_reward_model.py", "--pair_prompts", "512", "--normalization_samples", "64", "--eval_every", "1000"),
        ("get_reward", "reward_loss"),
        ("reward_model",),
        steps=RM_STEPS,
        bar=RM_BAR,
        judged="rm",
    ),
    Gate(
        "best_of_n",
        (GATE, "best_of_n"),
        ("best_of_n_kl", "best_of_n_estimate", "ensemble_reward"),
        ("best_of_n",),
        steps=BEST_OF_N["size"],
        bar=1.0,
        judged="best_of_n",
    ),
    Gate(
        "online",
        (GATE, "online"),
        ("select_pairs", "proxy_agreement"),
        ("online",),
        steps=ONLINE["pairs"],
        bar=1.0,
        judged="online",
    ),
)
MEASURED = ("best_of_n", "online")  # the gates whose child measures (trains nothing) and whose judge recomputes
GATE_NAMES = tuple(g.name for g in GATES)


@dataclass
class GateResult:
    """What the grader records of one gate: pass/fail, the judged reward, the steps the run made, a note."""

    passed: bool = False
    reward: float | None = None  # measured by the judge; None when there was nothing to judge
    steps: int = 0
    note: str = ""
    seconds: float = 0.0  # wall time of its training child

    @property
    def shown(self) -> str:
        return "pass" if self.passed else "fail"


def _lecture_settings(gate: Gate, seed: int) -> dict:
    return {"epochs": gate.steps, "seed": seed, "impl": "student"}


def _best_of_n_settings(gate: Gate, seed: int) -> dict | None:
    """gate/best_of_n's pool (instructor.gate_child.best_of_n_pool's arguments); None for every other gate."""
    return {**BEST_OF_N, "size": gate.steps, "seed": seed} if gate.judged == "best_of_n" else None


def _online_settings(gate: Gate, seed: int) -> dict | None:
    """gate/online's pairs (instructor.gate_child.online_pool's arguments and the labels); None for every other gate."""
    return {**ONLINE, "pairs": gate.steps, "seed": seed} if gate.judged == "online" else None


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` resolves to a place inside ``folder`` (no component of it is a link leading out)."""
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


# What a gate child's status is told: the grader's words, never the child's own (it runs the submission's code,
# which holds the hidden inputs of the cases run before it), naming at most one of the gate's own functions.
STATUS_WORDS = {
    "stub": "is a stub",
    "missing": "is missing from its file",
    "broken": "raises an error on a tiny input",
}


def _status_note(gate: Gate, report: dict) -> str:
    """The note of a gate whose child did not train to the end, in fixed words (see STATUS_WORDS)."""
    said = str(report.get("note", ""))
    function = next((f for f in gate.checked if said.startswith(f"{f} ")), None)
    if report["status"] in STATUS_WORDS and function:
        return f"{function} {STATUS_WORDS[report['status']]}"
    if report["status"] == "missing":
        return "a file it needs is missing"
    return {"stub": "a function it needs is a stub", "broken": "a function it needs fails on a tiny input"}.get(
        report["status"], "the training run stopped before its last step"
    )


def _copy_weights(src: Path, dst: Path, within: Path | None = None) -> bool:
    """Copy a regular file of at most MAX_POLICY_MB, without following links (no component of ``src`` may
    lead out of ``within``); False if it is not one."""
    if within is not None and not _inside(src, within):
        return False
    try:
        with open(os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_POLICY_MB * 2**20:
                return False
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read())
    except OSError:
        return False
    return True


def _steps_logged(metrics: Path) -> int:
    """Rows of a run's metrics.csv (one per step), read as plain text: 0 if there is none."""
    try:
        with open(os.open(metrics, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            return max(0, f.read(2**20).count(b"\n") - 1)
    except OSError:
        return 0


def add_gate_files(tree: Path) -> None:
    """What a gate child needs beside the package copy: the training scripts and the tiny assets (readable by
    the children's user, as the rest of the tree)."""
    for script in SCRIPTS:
        shutil.copy2(ROOT / script, tree / script)
        os.chmod(tree / script, 0o644)
    assets = tree / "rlhf_practice" / "assets"
    if not assets.exists():
        shutil.copytree(ROOT / "rlhf_practice" / "assets", assets)
    readable(assets)  # the rest of the tree is already (make_tree)


def run_gates(
    files: dict[str, bytes], gates: tuple[Gate, ...], limits: Limits, isolate: bool, seed: int = GATE_SEED
) -> dict[str, GateResult]:
    """Train each gate with the submission's ``files`` ({"ppo.py": source, ...}) and judge the policies."""
    results = {g.name: GateResult() for g in gates}
    with (
        tempfile.TemporaryDirectory(prefix="rlhf-gate-") as work,
        tempfile.TemporaryDirectory(prefix="rlhf-train-") as train_work,
    ):
        # Two trees: the submission's (its files and the function server, run as the cases' child is) and the
        # training child's (no student file: the training loop, the model and its saving), in a folder of its
        # own that the server's user cannot enter and the server's sandbox cannot see.
        served = Path(work) / "tree"
        make_tree(served, files, (SERVER,))
        tree = Path(train_work) / "tree"
        make_tree(tree, {}, (GATE, SERVER))
        add_gate_files(tree)
        runs = scratch(tree) / "runs"  # where the gate children write their runs
        # Training stops JUDGE_RESERVE seconds before the submission's deadline: the judge, last, still runs.
        train_limits = limits if limits.deadline is None else replace(limits, deadline=limits.deadline - JUDGE_RESERVE)
        server = (served, train_limits)
        train_limits = replace(train_limits, user=None)  # no student code in it: as the grader, as the judge is
        judge_jobs = []
        for gate in gates:
            missing = [f"{m}.py" for m in gate.modules if f"{m}.py" not in files]
            if missing:
                results[gate.name].note = f"gate/{gate.name}: {', '.join(missing)} missing"
                continue
            out = runs / gate.name
            job = {
                "functions": list(gate.checked),
                "command": list(gate.command),
                "argv": gate.argv(seed, str(runs)),
                "lecture": _lecture_settings(gate, seed),
                "best_of_n": _best_of_n_settings(gate, seed),
                "online": _online_settings(gate, seed),
                "out": str(out / (gate.kept or "model.pt")),
            }
            if not _inside(out, runs.parent):  # an earlier child made runs/ a link: nothing of this gate is kept
                results[gate.name].note = f"gate/{gate.name}: its run folder was replaced by a link"
                continue
            if gate.kept:
                out.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            report = run_child(tree, GATE, job, train_limits, isolate, server)
            result = results[gate.name]
            result.seconds = round(time.perf_counter() - start, 1)
            if not isinstance(report, dict) or report.get("status") not in STATUSES:
                result.note = f"gate/{gate.name}: {train_limits.out_of_time() or 'crashed, hung or exceeded a limit'}"
                continue
            result.steps = report["steps"] if type(report.get("steps")) is int else _steps_logged(out / "metrics.csv")
            if report["status"] != "trained":
                result.note = f"gate/{gate.name}: {_status_note(gate, report)}"
                if report["status"] != "failed":
                    continue  # nothing trained: nothing to judge
            judge_jobs.append((gate, out))
        # The judge's folder is not in `work`: a gate child writes there, and could have planted files or
        # links where the judge's tree and policies go (a torch.py that the judge would import, a link that
        # the grader would write through).
        with tempfile.TemporaryDirectory(prefix="rlhf-judge-") as judge_work:
            judged = _judge(Path(judge_work), judge_jobs, limits, isolate, seed)
        for gate, _ in judge_jobs:
            result, score = results[gate.name], judged.get(gate.name)
            if isinstance(score, float):
                result.reward = round(score, 3)
                result.passed = score >= gate.bar and not result.note
                if not result.passed and not result.note:
                    result.note = gate.shortfall(score)
            elif not result.note and (time_out := limits.out_of_time()):
                result.note = f"gate/{gate.name}: {time_out}"
            elif not result.note:
                why = "none saved" if score is None else "the saved one could not be loaded or measured"
                result.note = f"gate/{gate.name}: no policy to judge ({why})"
    return results


def _judge(
    work: Path, jobs: list[tuple[Gate, Path]], limits: Limits, isolate: bool, seed: int = GATE_SEED
) -> dict[str, object]:
    """Measure each saved policy in a child that holds no student file: {gate name: score or error text}.
    ``seed``: the gates' (gate/best_of_n's judge draws the pool its gate child drew)."""
    tree = work / "tree"
    make_tree(tree, {}, (GATE, JUDGE))  # the judge draws gate/best_of_n's pool with the gate child's function
    add_gate_files(tree)
    inputs = []
    for gate, out in jobs:
        dst, within = work / "policies" / gate.name, out.parent.parent  # within: the gates' scratch folder
        if gate.kept:
            ok = _copy_weights(out / gate.kept, dst / gate.kept, within)
            path, kind = dst / gate.kept, "lecture" if gate.command[0] == "-m" else gate.judged
        else:
            ok = all(_copy_weights(out / gate.saved / f, dst / f, within) for f in ("config.json", "model.safetensors"))
            path, kind = dst, gate.judged
        if ok:
            job = {"name": gate.name, "kind": kind, "path": str(path), "seed": JUDGE_SEED, "prompts": JUDGE_PROMPTS}
            best_of_n = {"best_of_n": _best_of_n_settings(gate, seed), "tolerance": BEST_OF_N_TOLERANCE}
            online = {"online": _online_settings(gate, seed)}
            inputs.append({**job, "lecture": _lecture_settings(gate, GATE_SEED), **best_of_n, **online})
    if not inputs:
        return {}
    # Never as the submission's user: every process of that user has been ended (instructor.children), and the
    # judge's tree lies in a folder only the grader may enter, so nothing of the submission can reach it.
    scores = run_child(tree, JUDGE, inputs, replace(limits, user=None), isolate) or {}
    return {k: v for k, v in scores.items() if type(v) in (float, str)}


# --- measuring bars and budgets: python -m instructor gate-bars


def _submission_files(replace: dict[str, str] | None = None) -> dict[str, bytes]:
    """The key's files; with ``replace`` ({graded function: source of a variant}), those functions swapped."""
    files = {f"{m}.py": answer_path(m).read_bytes() for m in MODULES}
    for function, source in (replace or {}).items():
        name = f"{module_of(function)}.py"
        files[name] = _swap(files[name].decode(), function, source).encode()
    return files


def _swap(module_source: str, function: str, variant_source: str) -> str:
    """``module_source`` with ``def function`` replaced by ``variant_source`` renamed to ``function``."""
    import ast

    tree = ast.parse(module_source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = module_source.splitlines(keepends=True)
    start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
    variant = ast.parse(textwrap.dedent(variant_source)).body[0]
    lines_v = textwrap.dedent(variant_source).splitlines(keepends=True)[variant.lineno - 1 :]  # no decorator
    lines_v[0] = lines_v[0].replace(f"def {variant.name}(", f"def {function}(", 1)
    body = "".join(lines_v)
    helpers = ""
    if "masked_mean" in body or "per_token_kl" in body:  # a variant may call the key's helpers
        if module_of(function) != "token_level":
            helpers = "from rlhf_practice.rl.token_level import masked_mean, per_token_kl\n"
    return "".join(lines[:start]) + helpers + body + "".join(lines[node.end_lineno :])


def variant_files(variant) -> dict[str, bytes]:
    """The key's files with ``variant`` (an instructor.mistakes.Variant) in place of its function; the
    private helpers it calls (``_reduce``, ...) in the book module it is written in come along, defined after it."""
    import re

    book = inspect.unwrap(variant.fn).__globals__  # the namespace of its book module (tie_zeroed wraps some)
    source, added = inspect.getsource(variant.fn), set()
    while new := {n for n in re.findall(r"\b(_[a-z]\w*)\(", source) if inspect.isfunction(book.get(n))} - added:
        added |= new
        source += "".join("\n\n" + inspect.getsource(book[n]) for n in sorted(new))
    return _submission_files({variant.function: source})


def stub_files() -> dict[str, bytes]:
    from instructor.release import student_files

    return {Path(path).name: source.encode() for path, source in student_files().items()}


@dataclass
class Row:
    label: str
    rewards: dict[str, str] = field(default_factory=dict)


def main(argv: list[str] | None = None) -> None:
    from instructor.mistakes import CATALOG

    parser = argparse.ArgumentParser(
        prog="python -m instructor gate-bars", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gates", nargs="+", choices=GATE_NAMES, default=list(GATE_NAMES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="the key's seeds")
    parser.add_argument("--variants", type=int, default=None, help="catalog variants per gate (default: all)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    gates = tuple(g for g in GATES if g.name in args.gates)
    limits, problem = Limits(seconds=args.timeout, memory_mb=4096), sandbox.problem()
    isolate = problem is None
    print(f"sandbox: {'yes' if isolate else f'NO ({problem}): the runs go on without it'}", flush=True)

    def show(label: str, results: dict[str, GateResult], seconds: float) -> None:
        cells = [
            f"{n} {r.shown} {r.reward if r.reward is not None else '-'} {r.seconds:.0f}s" for n, r in results.items()
        ]
        notes = "; ".join(r.note for r in results.values() if r.note)
        print(f"{label:45s} {' | '.join(cells)}  ({seconds:.0f} s) {notes}", flush=True)

    for seed in args.seeds:
        start = time.perf_counter()
        show(
            f"key, seed {seed}",
            run_gates(_submission_files(), gates, limits, isolate, seed),
            time.perf_counter() - start,
        )
    start = time.perf_counter()
    show("stubs", run_gates(stub_files(), gates, limits, isolate), time.perf_counter() - start)
    for gate in gates:
        variants = [v for v in CATALOG if v.function in gate.functions]
        wrongs = [v for v in variants if v.verdict == "wrong"][: args.variants]
        rights = [v for v in variants if v.verdict == "right"][: args.variants]
        for v in [*wrongs, *rights]:
            start = time.perf_counter()
            show(
                f"{v.verdict} {v.function}/{v.name}",
                run_gates(variant_files(v), (gate,), limits, isolate),
                time.perf_counter() - start,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
