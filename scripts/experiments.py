"""Run one of TASKS.md's experiments over several seeds and print its table (median [min, max]).

    python scripts/experiments.py reward_scale       # checkpoint 1: reward x 1 / 0.1 / 0.01, advantages normalized or not
    python scripts/experiments.py clip               # §2.4 and checkpoint 2: ppo_clip_range 0.1 / 0.2 / 0.3
    python scripts/experiments.py epochs             # checkpoint 2: 8 epochs with clip 0.9, no brake
    python scripts/experiments.py ppo_vs_grpo        # §4: the two default runs, reply length included
    python scripts/experiments.py hacking            # checkpoint 4: what the replies turn into (reward hacking)
    python scripts/experiments.py reward_terms       # task 5, item 1: reward terms against short / long replies
    python scripts/experiments.py kl_coef            # task 5, item 4: the KL term 0 / 0.5, default and unsafe settings
    python scripts/experiments.py levels             # checkpoint 7: sequence- vs token-level PPO
    python scripts/experiments.py loss_type          # checkpoint 8: GRPO-clip's three normalizations, short replies paid
    python scripts/experiments.py kl_ref             # checkpoint 9: beta = 0 vs 0.2, KL to the reference
    python scripts/experiments.py critic             # §4.1: the value head zero- vs randomly initialised
    python scripts/experiments.py tags               # README's tag table: where each tag moves in the default runs
    python scripts/experiments.py kl_target          # checkpoint 9: beta fixed vs adapted toward kl_target 3 / 1
    python scripts/experiments.py group_size         # task 11: --task sort with K = 2 / 8 / 16 replies per prompt
    python scripts/experiments.py warmup             # task 11: --task sort with and without the supervised warm-up
    python scripts/experiments.py add_hacking        # task 11: --task add, format reward hacked; the warm-up as the fix
    python scripts/experiments.py clip --seeds 0 1 2 3 4 --extra --num_steps 40

Each run is the training script started as a user starts it (tiny preset unless --extra says
otherwise), in a temporary folder, one after the other. The figures are read from the runs' metrics:
"final" is the mean of the last 10 % of steps, "first" the mean of the first 10 %, "gain" final minus
first, "max" / "min" the largest / smallest value of any step, "mean" the mean over all steps.
"÷ weight" divides reward/mean by the run's --reward.sentiment_weight (1 unless its flags set it; a
weight up to 1 scales the reward exactly, the reward being clipped to [-1, 1]), so that runs with a
scaled reward compare on one scale; "steps to 0.8·weight" is the first step at which reward/mean
reached 0.8 times the weight. For the verifiable tasks (task 11), "held-out" columns read
accuracy/heldout, which is logged at step 1 and every --eval_every steps: "first" is its step-1 value
(after the warm-up, before any RL), "final" its last value, "steps to 0.8" the first evaluation at
or above 0.8. "Positive words per reply" counts the reward's positive words (after
negation) in the replies that samples.jsonl holds. Nothing here is a test. Each run's own figures go
to stderr as it ends; the table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.reward import sentiment_polarities  # noqa: E402
from rlhf_practice.tracking import final_mean, load_run  # noqa: E402

PER_WEIGHT = "reward/mean ÷ weight"  # reward/mean divided by the run's --reward.sentiment_weight (see reward_weight)
# column: (tag, how) -- how is "final", "gain", "max", "mean", "reach" (first step with the tag >= 0.8),
# "reach_s" (seconds until then), "min", "step1" (the first step's value), "median20" (the median of the
# first 20 steps), "negative" (how many steps are below 0), "maxabs" (the largest |value|) or "wall"
# (the run's wall time)
COLUMNS = {
    "first reward": ("reward/mean", "first"),
    "reward gain": ("reward/mean", "gain"),
    "final reward": ("reward/mean", "final"),
    "steps to 0.8": ("reward/mean", "reach"),
    "reward gain ÷ weight": (PER_WEIGHT, "gain"),
    "final reward ÷ weight": (PER_WEIGHT, "final"),
    "steps to 0.8·weight": (PER_WEIGHT, "reach"),
    "seconds to 0.8": ("reward/mean", "reach_s"),
    "mean ppo/clip_frac": ("ppo/clip_frac", "mean"),
    "min kl/approx": ("kl/approx", "min"),
    "steps with kl/approx < 0": ("kl/approx", "negative"),
    "min kl/k3": ("kl/k3", "min"),
    "min ppo/ratio_mean": ("ppo/ratio_mean", "min"),
    "min loss/policy": ("loss/policy", "min"),
    "max loss/policy": ("loss/policy", "max"),
    "max |loss/policy_before_update|": ("loss/policy_before_update", "maxabs"),
    "max kl/k3": ("kl/k3", "max"),
    "mean kl/k3": ("kl/k3", "mean"),
    "max ppo/ratio_mean": ("ppo/ratio_mean", "max"),
    "final kl/ref": ("kl/ref", "final"),
    "final kl/beta": ("kl/beta", "final"),
    "final policy/entropy": ("policy/entropy", "final"),
    "first response/length": ("response/length", "first"),
    "final response/length": ("response/length", "final"),
    "final response/distinct": ("response/distinct", "final"),
    "first value/explained_variance": ("value/explained_variance", "step1"),
    "median value/explained_variance, steps 1-20": ("value/explained_variance", "median20"),
    "positive words per reply, first 10 %": ("", "samples_first"),
    "positive words per reply, last 10 %": ("", "samples_final"),
    "first held-out": ("accuracy/heldout", "step1"),
    "final held-out": ("accuracy/heldout", "last"),
    "held-out steps to 0.8": ("accuracy/heldout", "reach"),
    "first reward/format": ("reward/format", "first"),
    "final reward/format": ("reward/format", "final"),
    "final reward/answer": ("reward/answer", "final"),
    "wall s": ("", "wall"),
}
EVERY_REPLY = ["--sample_every", "1", "--num_logged_samples", "64"]  # samples.jsonl then holds every reply
SPEED = ["reward gain", "final reward", "steps to 0.8"]
# Checkpoint 8: replies of up to 24 tokens, and a reward that prefers short ones, so length and advantage go together
BREVITY = ["--max_new_tokens", "24", "--reward.long_penalty_weight", "0.5", "--reward.long_max_words", "6"]
UNSAFE = ["--ppo_epochs", "8", "--ppo_clip_range", "0.9", "--learning_rate", "1e-3"]  # checkpoint 2's last row
DRIFT = ["final policy/entropy", "final response/distinct", "final response/length"]
WEIGHT = "--reward.sentiment_weight"


def reward_weight(flags: list[str]) -> float:
    """The run's ``--reward.sentiment_weight`` (1 unless ``flags`` set it): the scale of its reward."""
    return float(flags[flags.index(WEIGHT) + 1]) if WEIGHT in flags else 1.0


def ppo(*flags: str, label: str = "") -> tuple[str, str, list[str]]:
    """One row of a table: (label, algorithm, flags); the label is the flags unless ``label`` is given."""
    return label or " ".join(["PPO", *flags]), "ppo", list(flags)


HELD_OUT = ["first held-out", "final held-out", "held-out steps to 0.8"]


def grpo(*flags: str, label: str = "") -> tuple[str, str, list[str]]:
    """A train_grpo.py row (see :func:`ppo`)."""
    return label or " ".join(["GRPO", *flags]), "grpo", list(flags)


# name: ([(row label, algorithm, flags)], columns)
EXPERIMENTS = {
    "reward_scale": (
        [
            *(ppo(WEIGHT, w, *flags) for flags in ([], ["--no_normalize_advantages"]) for w in ("1", "0.1", "0.01")),
            ppo(WEIGHT, "0.01", "--no_normalize_advantages", "--kl_coef", "0"),  # without the term that does not scale
        ],
        ["reward gain ÷ weight", "final reward ÷ weight", "steps to 0.8·weight", "wall s"],
    ),
    "clip": (
        [ppo("--ppo_clip_range", c) for c in ("0.1", "0.2", "0.3")],
        [*SPEED, "mean ppo/clip_frac", "max kl/k3", "mean kl/k3", "wall s"],
    ),
    "epochs": (
        [ppo(label="PPO (4 epochs, clip 0.2)"), ppo("--ppo_epochs", "8", "--ppo_clip_range", "0.9"), ppo(*UNSAFE)],
        [*SPEED, "max kl/k3", "max ppo/ratio_mean", *DRIFT, "wall s"],
    ),
    "ppo_vs_grpo": (
        [ppo(), ("GRPO", "grpo", [])],
        [*SPEED, "seconds to 0.8", *DRIFT, "wall s"],
    ),
    "hacking": (
        [ppo(*EVERY_REPLY, label="PPO"), ("GRPO", "grpo", EVERY_REPLY)],
        [
            "final reward",
            "positive words per reply, first 10 %",
            "positive words per reply, last 10 %",
            "final response/distinct",
            "final policy/entropy",
            "wall s",
        ],
    ),
    "kl_coef": (
        [ppo(*flags, "--kl_coef", c) for flags in ([], UNSAFE) for c in ("0", "0.5")],
        [*SPEED, "min kl/approx", "max kl/k3", *DRIFT, "wall s"],
    ),
    "reward_terms": (
        [
            ppo(),
            ppo("--reward.short_penalty_weight", "0.5", "--reward.short_min_words", "6"),
            ppo("--reward.long_penalty_weight", "0.5", "--reward.long_max_words", "6"),
        ],
        ["first reward", "final reward", "first response/length", "final response/length", "wall s"],
    ),
    "levels": (
        [ppo(label="PPO --level sequence"), ppo("--level", "token")],
        [*SPEED, "final kl/ref", *DRIFT, "wall s"],
    ),
    "loss_type": (
        [
            (f"GRPO-clip --loss_type {loss_type}", "grpo", ["--level", "token", "--loss_type", loss_type, *BREVITY])
            for loss_type in ("grpo", "dapo", "dr_grpo")
        ],
        [*SPEED, "final kl/ref", *DRIFT, "wall s"],
    ),
    "kl_ref": (
        [ppo("--level", "token", "--beta", b, label=f"PPO token --beta {b}") for b in ("0", "0.2")],
        [*SPEED, "final kl/ref", *DRIFT, "wall s"],
    ),
    "tags": (
        [ppo(label="PPO"), ("GRPO", "grpo", [])],
        [
            "final reward",
            "min loss/policy",
            "max loss/policy",
            "max |loss/policy_before_update|",
            "steps with kl/approx < 0",
            "min kl/k3",
            "max kl/k3",
            "min ppo/ratio_mean",
            "max ppo/ratio_mean",
        ],
    ),
    "critic": (
        [ppo("--model.value_head_init", init) for init in ("zero", "random")],
        [
            "first value/explained_variance",
            "median value/explained_variance, steps 1-20",
            "steps to 0.8",
            "final reward",
            "wall s",
        ],
    ),
    "kl_target": (
        [
            ppo("--level", "token", label="PPO token --beta 0.05 (fixed)"),
            *(ppo("--level", "token", "--kl_target", t, label=f"PPO token --kl_target {t}") for t in ("3", "1")),
        ],
        ["final reward", "steps to 0.8", "final kl/ref", "final kl/beta", "wall s"],
    ),
    "group_size": (
        [grpo("--task", "sort", "--grpo_group_size", k) for k in ("2", "8", "16")],
        [*HELD_OUT, "final reward", "wall s"],
    ),
    "warmup": (
        [
            grpo("--task", "sort", label="GRPO --task sort (warm-up: 15 steps)"),
            grpo("--task", "sort", "--warmup_steps", "0"),
        ],
        [*HELD_OUT, "first reward", "final reward", "wall s"],
    ),
    "add_hacking": (
        [
            grpo("--task", "add", label="GRPO --task add (no warm-up)"),
            grpo("--task", "add", "--warmup_steps", "150"),
            grpo(
                "--task", "add", "--warmup_steps", "300", "--num_steps", "1", label="supervised only: 300 warm-up steps"
            ),
        ],
        [
            "first reward/format",
            "final reward/format",
            "final reward/answer",
            "first held-out",
            "final held-out",
            "wall s",
        ],
    ),
}


def run_once(algorithm: str, flags: list[str], seed: int, impl: str, extra: list[str]) -> dict[str, float | None]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, f"train_{algorithm}.py", "--preset", "tiny", "--impl", impl, "--seed", str(seed)]
        command += ["--run_dir", tmp, "--run_name", "run", *flags, *extra]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:  # the script's own one-line error, and its exit code (2: a setting, 3: a stub)
            last = proc.stderr.strip().splitlines()[-1:] or [f"{' '.join(command[1:])} failed (exit {proc.returncode})"]
            print(last[0], file=sys.stderr)
            sys.exit(proc.returncode)
        return figures(Path(tmp) / "run", flags + extra)


def figures(folder: Path, flags: list[str]) -> dict[str, float | None]:
    """Every column of COLUMNS for the run in ``folder``, trained with ``flags``."""
    run = load_run(folder)
    run.metrics[PER_WEIGHT] = [v / reward_weight(flags) for v in run.metrics["reward/mean"]]
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    out: dict[str, float | None] = {}
    positive = {}  # step -> positive words per reply, over the replies samples.jsonl holds for that step
    for sample in samples:
        positive.setdefault(sample["step"], []).append(sentiment_polarities(sample["reply"]).count(1))
    per_step = [sum(v) / len(v) for _, v in sorted(positive.items())]
    for column, (tag, how) in COLUMNS.items():
        values = run.metrics.get(tag, [])
        if how == "wall":
            out[column] = run.wall_seconds()
        elif how in ("samples_first", "samples_final"):
            out[column] = final_mean(per_step[:: -1 if how == "samples_first" else 1]) if per_step else None
        elif how in ("reach", "reach_s"):
            reached = run.first_reaching(0.8, tag)
            out[column] = None if reached is None else reached[how == "reach_s"]
        elif not values:
            out[column] = None
        elif how in ("max", "min"):
            out[column] = max(values) if how == "max" else min(values)
        elif how == "mean":
            out[column] = sum(values) / len(values)
        elif how == "negative":
            out[column] = sum(v < 0 for v in values)
        elif how == "maxabs":
            out[column] = max(abs(v) for v in values)
        elif how == "step1":
            out[column] = values[0]
        elif how == "last":
            out[column] = values[-1]
        elif how == "median20":
            out[column] = statistics.median(values[:20])
        elif how == "first":
            out[column] = final_mean(values[::-1])
        else:
            out[column] = final_mean(values) - (final_mean(values[::-1]) if how == "gain" else 0.0)
    return out


def _number(value: float, whole: bool) -> str:
    return f"{value:.0f}" if whole else f"{value:.3g}"


def _cell(values: list[float | None], reach: bool = False) -> str:
    """median [min, max] of the known values; for a ``reach`` column, "(k never)" when k runs never
    reached the threshold and "never" when none did. "–": the runs do not log the tag."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return "never" if reach and values else "–"
    whole = all(float(v).is_integer() and abs(v) < 1e5 for v in known)  # step counts
    low, median, high = (_number(v, whole) for v in (known[0], known[len(known) // 2], known[-1]))
    cell = f"{median} [{low}, {high}]"
    return cell + (f" ({len(values) - len(known)} never)" if reach and len(known) < len(values) else "")


def _reach(column: str) -> bool:
    return COLUMNS[column][1] in ("reach", "reach_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--impl", default=os.environ.get("RLHF_IMPL", "student"), help="the scripts' --impl")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to every run")
    args = parser.parse_args()

    runs_spec, columns = EXPERIMENTS[args.experiment]
    rows = []
    for label, algorithm, flags in runs_spec:
        runs = []
        for seed in args.seeds:
            print(f"{label}, seed {seed} ...", file=sys.stderr, flush=True)
            runs.append(run_once(algorithm, flags, seed, args.impl, args.extra))
            this_seed = ", ".join(f"{c}: {_cell([runs[-1][c]], _reach(c)).split(' [')[0]}" for c in columns)
            print(f"  {this_seed}", file=sys.stderr)
        rows.append([label, *(_cell([r[c] for r in runs], _reach(c)) for c in columns)])
    seeds = ", ".join(map(str, args.seeds))
    print(f"{args.experiment}: median [min, max] over seeds {seeds}\n")
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
