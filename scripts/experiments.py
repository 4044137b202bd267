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
    python scripts/experiments.py lecture            # §10.5: 4 delta modes x naive / clipped loss, held-out sort
    python scripts/experiments.py lecture_slip       # §10.5: the same with the lecture's ratio, log_probs / old_log_probs
    python scripts/experiments.py group_size         # task 11: --task sort with K = 2 / 8 / 16 replies per prompt
    python scripts/experiments.py warmup             # task 11: --task sort with and without the supervised warm-up
    python scripts/experiments.py add_hacking        # task 11: --task add, format reward hacked; the warm-up as the fix
    python scripts/experiments.py dpo_vs_rl          # task 12: DPO beside PPO and GRPO (both levels): reward, KL, time
    python scripts/experiments.py dpo_beta           # task 12: DPO's beta 0.01 / 0.1 / 0.5; logps/chosen as the margin grows
    python scripts/experiments.py dpo_rounds         # task 12: offline pairs vs one round of iterative DPO (--rounds 2)
    python scripts/experiments.py lora               # docs/GUIDE.md's LoRA section: GRPO with --lora_r 8 vs full fine-tuning
    python scripts/experiments.py overoptimization_sentiment  # task 13: PPO against reward models of the plain sentiment gold
    python scripts/experiments.py rm_vs_dpo          # task 13: a reward model + PPO against DPO, on the same pairs
    python scripts/experiments.py best_of_n          # task 15: best-of-n against reward models, Gao's fit (seeds 0-4)
    python scripts/experiments.py overoptimization   # task 15: PPO against the same reward models (seeds 0-4)
    python scripts/experiments.py online_rlhf        # task 16: static vs refreshed reward models, label-matched (seeds 0-4)
    python scripts/experiments.py estimators --task sort   # task 14's seven rows: GRPO, Dr. GRPO, RLOO, GSPO, CISPO, clip-higher, DAPO (add too)
    python scripts/experiments.py clip --seeds 0 1 2 3 4 --extra --num_steps 40
    python scripts/experiments.py lecture --extra --steps_per_epoch 1
    python scripts/experiments.py dpo_vs_rl --rows DPO    # only the rows whose label holds the word "DPO"
    python scripts/experiments.py overoptimization_sentiment --rows "--beta 0"   # not the --beta 0.1 rows

Every experiment takes --seeds (its runs' --seed values) and --rows (only the rows named: a row's whole label,
or words of it), and says in one line, before any run, when a --rows text names none of its rows.

    python scripts/experiments.py overoptimization_sentiment --seeds 0 --threads 1 2

--threads runs the whole experiment once per thread count (OMP_NUM_THREADS for every run, one after the other)
and prints each table under its thread count: the book's ranges must hold at both (TASKS.md states them so). A
thread count changes the last bits of every sum, and an RL run amplifies them (a reward model cached in --out is
kept per thread count).

    python scripts/experiments.py clip --jobs 1      # one run at a time, on all the cores

--jobs N runs N runs at a time (scripts/side_by_side.py), each on cores / N torch threads unless
OMP_NUM_THREADS says otherwise; by default one run per core, so on a 2-core machine two one-thread runs
side by side. A run's figures depend on its thread count, never on --jobs: ``--jobs 2`` prints the table of
``OMP_NUM_THREADS=1 ... --jobs 1`` bit for bit (wall s aside), in about half the time. The command
prints its expected time up front (measured on our 2-core machine), then a progress bar over the runs with
the time left, and each run's figures as it ends.

Each run is the training script started as a user starts it (tiny preset unless --extra says
otherwise), in a temporary folder. The figures are read from the runs' metrics:
"final" is the mean of the last 10 % of steps, "first" the mean of the first 10 %, "gain" final minus
first, "max" / "min" the largest / smallest value of any step, "mean" the mean over all steps.
"÷ weight" divides reward/mean by the run's --reward.sentiment_weight (1 unless its flags set it; a
weight up to 1 scales the reward exactly, the reward being clipped to [-1, 1]), so that runs with a
scaled reward compare on one scale; "steps to 0.8·weight" is the first step at which reward/mean
reached 0.8 times the weight. For the verifiable tasks (task 11), "held-out" columns read
accuracy/heldout, which is logged at step 1, every --eval_every steps and at the last step: "first" is
its step-1 value (after the warm-up, before any RL); "final" is the final held-out accuracy, the
accuracy/heldout of the run's last evaluation, which is its last step (tracking.final_heldout, as
compare's table); "steps to 0.8" the first evaluation at or above 0.8. Their "first reward" and
"first reward/format" are, like every other "first", means over the first 10 % of steps. For train_dpo.py (task 12), reward/mean, kl/ref and response/length come from
fresh replies every --eval_every steps, so their "first" and "final" are over those evaluations
(with the default 21 evaluations, the first two and the last two), and "steps to 0.8" is the first evaluation
at or above 0.8; "wall s" leaves out the seconds spent building preference pairs, which "pair
building s" gives (each DPO run builds its own, as a first run does). "KL to the start, end" is
measured after a run, the same way for every algorithm (kl_to_start): KL(final policy || starting
policy) in nats per reply on 256 fresh replies of the saved policy, one measure for every run
(kl/ref, which every PPO, GRPO and DPO run logs, is measured on each step's own replies instead).
"Positive words per reply" counts the reward's positive words (after negation) in the replies that
samples.jsonl holds. Nothing here is a test. Each run's own figures go
to stderr as it ends; the table goes to stdout.

The lecture's experiments (task 10) run ``rlhf_practice.lecture`` in Python instead of a training script (a run
takes seconds; in this process with --jobs 1, else in --jobs worker processes), with --extra read as its flags. Their
"final" is the mean of the last 10 % of held-out evaluations, "epochs to 0.5" the first evaluation
at or above 0.5, "tied groups" the share of an epoch's prompts whose replies all got the same reward
(their centered deltas are 0); the curves go to --out (runs/experiments/ by default).

Task 14's ``estimators`` runs ``train_grpo.py --level token`` on ``--task sort`` or ``--task add`` (add with
``--warmup_steps 150``: without a warm-up no reply is ever right, checkpoint 11c) once per method, each
method only its own flags (ESTIMATORS), every other setting the task's default. "mean
frac_reward_zero_std" is the mean over steps of the share of trained groups whose rewards all tie;
"generate s" the seconds spent sampling replies (time/generate_s summed: dynamic sampling's extra
rounds show there); "gen batches" the mean rounds of generation per step. It also draws the curves of
every method (mean over seeds) to --out (estimators-<task>.png).

Task 13's and 15's experiments (reward models trained first, then best-of-n or the policy against them)
are written in ``scripts/overoptimization.py`` and ``scripts/best_of_n.py``, whose docstrings say what
their columns mean; they keep their reward models, the best-of-n pool and each run's figures in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType, SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # overoptimization.py beside this file, however this file is run

import best_of_n  # noqa: E402  (scripts/best_of_n.py: task 15's best-of-n)
import overoptimization  # noqa: E402  (scripts/overoptimization.py: task 13's and 15's experiments)
from side_by_side import RunFailed, pin_threads, run_all, threads_told, usable_cores  # noqa: E402  (--jobs)

from rlhf_practice.config import CONFIGS, parse_config  # noqa: E402
from rlhf_practice.course import load_impl  # noqa: E402
from rlhf_practice.errors import ConfigError  # noqa: E402
from rlhf_practice.lecture import (  # noqa: E402
    DELTAS_MODES,
    Curve,
    LectureConfig,
    run_policy_gradient,
    run_supervised,
)
from rlhf_practice.modeling import PolicyValueModel  # noqa: E402
from rlhf_practice.reward import sentiment_polarities  # noqa: E402
from rlhf_practice.sampling import Sampler  # noqa: E402
from rlhf_practice.tasks import build_task  # noqa: E402
from rlhf_practice.tracking import final_heldout, final_mean, load_run  # noqa: E402

MAX_JOBS = 4  # best_of_n's and overoptimization's --jobs: the CPU's cores, at most this many (a process holds a pool)
TASK15 = ("best_of_n", "overoptimization", "online_rlhf")  # 5 seeds, one thread, at most MAX_JOBS at a time
REWARD_MODEL = ("overoptimization", "overoptimization_sentiment", "rm_vs_dpo", "best_of_n", "online_rlhf")

PER_WEIGHT = "reward/mean ÷ weight"  # reward/mean divided by the run's --reward.sentiment_weight (see reward_weight)
# column: (tag, how) -- how is "final", "gain", "max", "mean", "reach" (first step with the tag >= 0.8),
# "reach_s" (seconds until then), "sum" (over all steps), "min", "step1" (the first step's value), "median20" (the median of the
# first 20 steps), "negative" (how many steps are below 0), "maxabs" (the largest |value|), "wall"
# (the run's wall time; train_dpo.py's pair building not included), "pairs" (train_dpo.py's seconds
# building preference pairs), "trainable" (summary.json's trainable_percent: the share of the parameters
# the optimizer gets) or "kl_end" (kl_to_start, measured after the run)
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
    "max |adv/mean|": ("adv/mean", "maxabs"),
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
    "final held-out": ("accuracy/heldout", "last"),  # tracking.final_heldout: the last evaluation
    "held-out steps to 0.8": ("accuracy/heldout", "reach"),
    "first reward/format": ("reward/format", "first"),
    "final reward/format": ("reward/format", "final"),
    "final reward/answer": ("reward/answer", "final"),
    "final rewards/margins": ("rewards/margins", "final"),
    "final rewards/accuracies": ("rewards/accuracies", "final"),
    "first logps/chosen": ("logps/chosen", "first"),
    "final logps/chosen": ("logps/chosen", "final"),
    "first logps/rejected": ("logps/rejected", "first"),
    "final logps/rejected": ("logps/rejected", "final"),
    "KL to the start, end": ("", "kl_end"),
    "pair building s": ("", "pairs"),
    "wall s": ("", "wall"),
    "generate s": ("time/generate_s", "sum"),
    "mean frac_reward_zero_std": ("frac_reward_zero_std", "mean"),
    "mean clip_ratio/region_mean": ("clip_ratio/region_mean", "mean"),
    "mean gen batches": ("dynamic_sampling/gen_batches", "mean"),
    "trainable %": ("", "trainable"),
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


def dpo(*flags: str, label: str = "") -> tuple[str, str, list[str]]:
    """A train_dpo.py row (see :func:`ppo`)."""
    return label or " ".join(["DPO", *flags]), "dpo", list(flags)


DPO_PAIRS = ["final rewards/margins", "final rewards/accuracies"]  # on the training pairs
# Task 12's rows: what the same reward brings each algorithm to, and how far from the start it moves it
THREE = [
    ppo(label="PPO --level sequence"),
    ppo("--level", "token"),
    grpo(label="GRPO --level sequence"),
    grpo("--level", "token"),
    dpo(label="DPO (offline pairs)"),
]

# Task 14: each method with only its own flags (train_grpo.py --level token; the task's defaults otherwise).
CLIP_HIGHER = ["--grpo_clip_range_high", "0.28"]  # DAPO's epsilon_high (epsilon_low stays 0.2)
ESTIMATORS = [
    grpo(label="GRPO"),
    grpo("--advantage", "dr_grpo", "--loss_type", "dr_grpo", label="Dr. GRPO"),
    grpo("--advantage", "rloo", label="RLOO"),
    grpo(
        "--importance_sampling_level",
        "sequence",
        "--grpo_clip_range",
        "3e-4",
        "--grpo_clip_range_high",
        "4e-4",
        label="GSPO",
    ),
    grpo("--loss_type", "cispo", label="CISPO"),
    grpo(*CLIP_HIGHER, label="clip-higher only"),
    grpo(*CLIP_HIGHER, "--dynamic_sampling", "--loss_type", "dapo", label="DAPO"),
]
ESTIMATOR_TASKS = {"sort": [], "add": ["--warmup_steps", "150"]}  # add learns nothing without a warm-up (11c)
CURVES = ("accuracy/heldout", "policy/entropy", "frac_reward_zero_std", "response/length")

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
            "max |adv/mean|",
            "wall s",
        ],
    ),
    "dpo_vs_rl": (
        THREE,
        [
            "first reward",
            "final reward",
            "steps to 0.8",
            "seconds to 0.8",
            "final kl/ref",
            "KL to the start, end",
            "pair building s",
            "wall s",
        ],
    ),
    "dpo_beta": (  # also task 12's question on the chosen log-probs: the default is the --beta 0.1 row
        [dpo("--beta", b) for b in ("0.01", "0.1", "0.5")],
        [
            "final reward",
            "final kl/ref",
            *DPO_PAIRS,
            "first logps/chosen",
            "final logps/chosen",
            "first logps/rejected",
            "final logps/rejected",
            "wall s",
        ],
    ),
    "dpo_rounds": (
        [dpo(label="DPO --rounds 1 (offline pairs)"), dpo("--rounds", "2")],
        ["first reward", "final reward", "final kl/ref", *DPO_PAIRS, "pair building s", "wall s"],
    ),
    "estimators": (
        ESTIMATORS,
        [
            "final held-out",
            "held-out steps to 0.8",
            "final policy/entropy",
            "mean frac_reward_zero_std",
            "mean clip_ratio/region_mean",
            "final response/length",
            "mean gen batches",
            "generate s",
            "wall s",
        ],
    ),
    "lora": (
        [
            grpo(label="GRPO (full fine-tuning, learning_rate 2e-4)"),
            grpo("--lora_r", "8", label="GRPO --lora_r 8 (learning_rate 2e-3)"),
            grpo("--lora_r", "8", "--learning_rate", "2e-4"),
        ],
        ["first reward", *SPEED, "trainable %", "wall s"],
    ),
}

# Seconds of one run of each experiment on our idle 2-core machine, one thread, another run beside it (--jobs 2), its
# start-up included: the time printed up front. Measured with the reference answer where TASKS.md's table of times
# says so (the command's seconds x 2 / its runs), else from runs of the same kind measured there: a PPO run 50 s (a
# run of 8 epochs 70 s), a sequence-level GRPO run 20 s and a token-level one 31 s, a DPO run 45 s.
RUN_SECONDS = {
    "reward_scale": 51,
    "clip": 50,
    "epochs": 63,
    "ppo_vs_grpo": 34,
    "hacking": 36,
    "reward_terms": 50,
    "kl_coef": 64,
    "levels": 50,
    "loss_type": 31,
    "kl_ref": 50,
    "critic": 50,
    "tags": 34,
    "kl_target": 50,
    "group_size": 38,
    "warmup": 25,
    "add_hacking": 35,
    "dpo_vs_rl": 40,
    "dpo_beta": 45,
    "dpo_rounds": 55,
    "lora": 25,
    "estimators sort": 32,
    "estimators add": 31,
    "lecture": 3,
    "lecture_slip": 3,
}


def run_once(
    algorithm: str, flags: list[str], seed: int, impl: str, extra: list[str], kl_end: bool = False
) -> tuple[dict[str, float | None], dict[str, tuple[list, list]]]:
    """One run of ``train_<algorithm>.py``: every column of COLUMNS (with ``kl_end``, also :func:`kl_to_start` of its
    final policy), and each tag of :data:`CURVES` the run logs as (steps, values). A run that fails raises
    :class:`RunFailed` with its script's one-line error and exit code (2: a setting, 3: a stub)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", tmp, "--run_name", "run"]
        if algorithm == "dpo":  # pairs built in this run's folder: each run builds (and times) its own
            args += ["--pairs_dir", str(Path(tmp) / "pairs")]
        args += [*flags, *extra]
        command = [sys.executable, f"train_{algorithm}.py", *args]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            last = proc.stderr.strip().splitlines()[-1:] or [f"{' '.join(command[1:])} failed (exit {proc.returncode})"]
            raise RunFailed(last[0], proc.returncode)
        out = figures(Path(tmp) / "run", flags + extra)
        run = load_run(Path(tmp) / "run")
        curves = {tag: (run.steps_of(tag), run.metrics[tag]) for tag in CURVES if tag in run.metrics}
        if kl_end:
            out["KL to the start, end"] = kl_to_start(Path(tmp) / "run", algorithm, args)
        return out, curves


KL_REPLIES = 256  # fresh replies kl_to_start samples: 4 batches of the tiny preset's 64


def kl_to_start(folder: Path, algorithm: str, args: list[str]) -> float | None:
    """KL(final policy || starting policy) in nats per reply, for any run, measured alike for all
    after the run (kl/ref is measured during it, on each step's replies): KL_REPLIES fresh replies
    sampled from the policy the run saved, to training prompts, with the run's decoding settings;
    per reply token k3 = exp(r) - r - 1 with r = log pi_ref - log pi, summed over the reply's tokens,
    as the PPO and GRPO runs log kl/ref.
    None for a run with a warm-up (sort, add): its reference is the warmed-up policy, not saved."""
    config = parse_config(CONFIGS[algorithm, "sequence"], args)  # the level comes from args
    if config.warmup_steps:
        return None
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    torch.manual_seed(config.seed)
    reference = task.load_policy(torch.device("cpu"))
    policy = PolicyValueModel.from_pretrained(str(folder / "policy"))
    sampler = Sampler.from_config(policy, tokenizer, config)
    batches, kls = task.prompt_batches(tokenizer, 64, config.seed + 1), []
    with torch.no_grad():
        for _ in range(KL_REPLIES // 64):
            batch = next(batches)
            generation = sampler.sample(batch["input_ids"], batch["attention_mask"])
            r = reference.evaluate_tokens(generation).logprobs - policy.evaluate_tokens(generation).logprobs  # (N, T)
            kls.append(((r.exp() - r - 1) * generation.response_mask).sum(dim=1))
    return torch.cat(kls).mean().item()


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
        elif how == "pairs":
            out[column] = run.summary.get("pairs_s")
        elif how == "trainable":
            out[column] = run.summary.get("trainable_percent")
        elif how == "kl_end":
            out[column] = None  # run_once measures it when the experiment shows it
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
        elif how == "sum":
            out[column] = sum(values)
        elif how == "negative":
            out[column] = sum(v < 0 for v in values)
        elif how == "maxabs":
            out[column] = max(abs(v) for v in values)
        elif how == "step1":
            out[column] = values[0]
        elif how == "last":
            out[column] = final_heldout(values)
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
    known = sorted(v for v in values if v is not None and v == v)  # None or NaN: not measured for that run
    if not known:
        return "never" if reach and values else "–"
    whole = all(float(v).is_integer() and abs(v) < 1e5 for v in known)  # step counts
    low, median, high = (_number(v, whole) for v in (known[0], known[len(known) // 2], known[-1]))
    cell = f"{median} [{low}, {high}]"
    return cell + (f" ({len(values) - len(known)} never)" if reach and len(known) < len(values) else "")


def _count(values: list[float]) -> str:
    """ "k of n": the runs whose 0/1 figure is 1; "–" where the figure does not apply (NaN)."""
    known = [v for v in values if v == v]
    return f"{sum(known):.0f} of {len(known)}" if known else "–"


def _reach(column: str) -> bool:
    return COLUMNS[column][1] in ("reach", "reach_s")


@dataclass(frozen=True)
class LectureRow:
    """One row of a lecture experiment: a LectureConfig's ``settings``, drawn in the panel of its loss."""

    label: str
    settings: dict[str, str] = field(default_factory=dict)
    supervised: bool = False  # run_supervised: the same model trained on the sorted prompt (every panel, dashed)
    slip: bool = False  # compute_loss with the lecture's ratio (see slipped)


# The lecture's experiments (task 10): name -> rows, then the columns shown.
LECTURE = {
    "lecture": (
        [
            *(
                LectureRow(f"{deltas} + {loss}", {"deltas": deltas, "loss": loss})
                for loss in ("naive", "clipped")
                for deltas in DELTAS_MODES
            ),
            LectureRow("supervised (cross-entropy to the sorted prompt)", supervised=True),
        ],
        [
            "final held-out exact sort",
            "max held-out exact sort",
            "epochs to 0.5",
            "epochs to 0.8",
            "final reward",
            "final tied groups",
            "wall s",
        ],
    ),
    "lecture_slip": (
        [
            LectureRow(
                f"{deltas} + {loss}, ratio = log_probs / old_log_probs", {"deltas": deltas, "loss": loss}, slip=True
            )
            for loss in ("unclipped", "clipped")
            for deltas in DELTAS_MODES
        ],
        ["epoch the loss turned NaN", "final held-out exact sort", "final reward", "wall s"],
    ),
}
LECTURE_REACH = ("epochs to 0.5", "epochs to 0.8", "epoch the loss turned NaN")  # "never" when it did not happen


def slipped(lecture: ModuleType) -> SimpleNamespace:
    """``lecture``'s functions, except that compute_loss takes the ratio as the lecture's code writes it,
    ``log_probs / old_log_probs``, instead of ``exp(log_probs - old_log_probs)`` (TASKS.md §10.3)."""

    def compute_loss(
        log_probs: torch.Tensor,
        deltas: torch.Tensor,
        mode: str,
        old_log_probs: torch.Tensor | None = None,
        clip_range: float = 0.01,
    ) -> torch.Tensor:
        if mode == "naive":  # no ratio in it
            return lecture.compute_loss(log_probs, deltas, mode, old_log_probs, clip_range=clip_range)
        ratio = log_probs / (log_probs.detach() if old_log_probs is None else old_log_probs)  # the slip
        deltas = deltas.unsqueeze(-1)
        if mode == "unclipped":
            return -(ratio * deltas).mean()
        return -torch.minimum(ratio * deltas, ratio.clamp(1 - clip_range, 1 + clip_range) * deltas).mean()

    return SimpleNamespace(**{**vars(lecture), "compute_loss": compute_loss})


def lecture_figures(curve: Curve, wall: float) -> dict[str, float | None]:
    """The columns of a lecture experiment for one run (None: not measured, or it never happened)."""
    finished = not curve.stopped
    out: dict[str, float | None] = {
        "final held-out exact sort": final_mean(curve.heldout) if finished else None,
        "max held-out exact sort": max(curve.heldout) if finished else None,
        "final reward": final_mean(curve.reward) if finished and curve.reward else None,
        "final tied groups": final_mean(curve.tied) if finished and curve.tied else None,
        "epoch the loss turned NaN": curve.stopped_epoch,
        "wall s": wall,
    }
    for threshold in (0.5, 0.8):
        reached = (e for e, v in zip(curve.epochs, curve.heldout) if v >= threshold)
        out[f"epochs to {threshold}"] = next(reached, None)
    return out


def lecture_run(name: str, label: str, base: LectureConfig, seed: int, impl_name: str) -> tuple[dict, Curve]:
    """One run of the lecture experiment ``name`` (its row ``label``, at ``seed``): its columns and its curve."""
    row = next(row for row in LECTURE[name][0] if row.label == label)
    config, start = replace(base, **row.settings, seed=seed, impl=impl_name), time.perf_counter()
    if row.supervised:
        curve = run_supervised(config)
    else:
        lecture = load_impl(impl_name).lecture
        curve = run_policy_gradient(config, slipped(lecture) if row.slip else lecture)
    return lecture_figures(curve, time.perf_counter() - start), curve


def lecture_experiment(
    name: str, seeds: list[int], impl_name: str, extra: list[str], out: Path, rows: list[str], jobs: int = 1
) -> None:
    """Run one of LECTURE's grids (its rows whose labels ``rows`` names, all when empty), ``jobs`` runs at a time,
    print its table, draw its curves into ``out``."""
    import tyro

    base = tyro.cli(LectureConfig, args=extra, prog="--extra", use_underscores=True)
    impl = load_impl(impl_name)
    spec, columns = LECTURE[name]
    spec = [row for row in spec if not rows or row.label in rows]
    configs = [replace(base, **row.settings) for row in spec if not row.supervised]
    # an unfinished stub: the scripts' one line, before any run (only the functions these rows call)
    impl.check_functions([f for config in configs for f in config.functions_called()])
    calls = [
        (f"{row.label}, seed {seed}", lecture_run, (name, row.label, base, seed, impl_name))
        for row in spec
        for seed in seeds
    ]

    def line(result: tuple[dict, Curve]) -> str:
        return ", ".join(f"{c}: {_cell([result[0][c]], c in LECTURE_REACH).split(' [')[0]}" for c in columns)

    results = iter(run_all(name, calls, jobs, RUN_SECONDS[name], line))
    table, curves = [], []
    for row in spec:
        done = [next(results) for _ in seeds]
        table.append([row.label, *(_cell([f[c] for f, _ in done], c in LECTURE_REACH) for c in columns)])
        curves.append((row, [curve for _, curve in done]))
    print_table(name, seeds, columns, table)
    out.mkdir(parents=True, exist_ok=True)
    plot_curves(curves, out / f"{name}.png", f"{name}: held-out exact sort, median and range over seeds {seeds}")
    print(f"\ncurves saved to {out / f'{name}.png'}", file=sys.stderr)


def plot_curves(curves: list[tuple[LectureRow, list[Curve]]], path: Path, title: str) -> None:
    """Held-out exact sort against epoch, one panel per loss mode, one colour per delta mode: the line
    is the median over seeds, the band their range, over the evaluations every seed reached (a run
    stopped by a NaN loss ends early). A supervised row is drawn dashed in every panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(row.settings["loss"] for row, _ in curves if not row.supervised)) or ["(none)"]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False, sharey=True)
    for ax, panel in zip(axes.flat, panels):
        drawn = 0
        for row, runs in curves:
            length = min(len(c.heldout) for c in runs)
            if length == 0 or (not row.supervised and row.settings["loss"] != panel):
                continue
            drawn += 1
            by_epoch = [sorted(c.heldout[k] for c in runs) for k in range(length)]  # [evaluation][seed]
            epochs, low, high = runs[0].epochs[:length], [v[0] for v in by_epoch], [v[-1] for v in by_epoch]
            if row.supervised:
                color, label, style = "grey", "supervised", "--"
            else:
                deltas = row.settings["deltas"]
                color, label, style = f"C{DELTAS_MODES.index(deltas)}", deltas, "-"
            ax.plot(epochs, [v[len(v) // 2] for v in by_epoch], style, color=color, label=label)
            ax.fill_between(epochs, low, high, color=color, alpha=0.15)
        ax.set_title(f"--loss {panel}", fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7)
        else:
            ax.text(
                0.5,
                0.5,
                "no curve: a run stopped (NaN loss)\nbefore its first evaluation",
                ha="center",
                transform=ax.transAxes,
            )
    axes.flat[0].set_ylabel("held-out exact sort (greedy)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(name: str, seeds: list[int], columns: list[str], rows: list[list[str]]) -> None:
    print(f"{name}: median [min, max] over seeds {', '.join(map(str, seeds))}\n")
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def experiment_rows(name: str) -> list[str]:
    """The labels of experiment ``name``'s rows, in the order it runs them."""
    if name in EXPERIMENTS:
        return [label for label, _, _ in EXPERIMENTS[name][0]]
    if name in LECTURE:
        return [row.label for row in LECTURE[name][0]]
    if name in overoptimization.GRIDS:
        return [label for label, _, _ in overoptimization.GRIDS[name][2]]
    return list(best_of_n.ROWS if name == "best_of_n" else overoptimization.RM_VS_DPO_ROWS)


def _names(text: str, label: str) -> bool:
    """True when ``label`` holds ``text`` as whole words: "--beta 0" is in "PPO --beta 0", not in "PPO --beta 0.1";
    "64 pairs" is in "RM on 64 pairs", not in "RM on 1024 pairs"."""
    return re.search(rf"(?<![\w.]){re.escape(text)}(?!\w|\.\d)", label) is not None


def pick_rows(name: str, texts: list[str]) -> list[str]:
    """The labels of ``name``'s rows that ``--rows texts`` picks, in the experiment's order: all rows without
    texts; a text equal to a label picks that row alone, any other text every row whose label holds it as whole
    words. A text that picks no row is a ConfigError naming the rows there are."""
    labels = experiment_rows(name)
    picked: set[str] = set()
    for text in texts:
        hits = [label for label in labels if label == text] or [label for label in labels if _names(text, label)]
        if not hits:
            raise ConfigError(
                f"rows: {text!r} names no row of {name}; its rows are "
                + "; ".join(f'"{label}"' for label in labels)
                + " (give words of one of them, or drop --rows)."
            )
        picked.update(hits)
    return [label for label in labels if not texts or label in picked]


def per_thread_count(threads: list[int]) -> int:
    """This command without --threads, once per thread count in ``threads`` (OMP_NUM_THREADS), one after the other;
    each table printed under its count. Returns the first non-zero exit code (0 when every run succeeded)."""
    argv, i = list(sys.argv[1:]), sys.argv[1:].index("--threads")
    j = i + 1
    while j < len(argv) and argv[j].isdigit():
        j += 1
    command = [sys.executable, str(Path(__file__).resolve()), *argv[:i], *argv[j:]]
    for count in threads:
        print(f"\n## OMP_NUM_THREADS={count}\n", flush=True)
        print(f"OMP_NUM_THREADS={count}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
        code = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": str(count)}).returncode
        if code:
            return code
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted([*EXPERIMENTS, *LECTURE, *REWARD_MODEL]))
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        help="0 1 2 by default; 0 1 2 3 4 for best_of_n and overoptimization",
    )
    parser.add_argument("--impl", default=os.environ.get("RLHF_IMPL", "student"), help="the scripts' --impl")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "runs" / "experiments",
        help="folder for the curves (the lecture's; estimators-<task>.png)",
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        default=[],
        help='run only these rows: a row\'s whole label, or words of it ("--beta 0" picks no "--beta 0.1" row)',
    )
    parser.add_argument(
        "--task", choices=sorted(ESTIMATOR_TASKS), default=None, help="estimators only: the task it compares on (sort)"
    )
    parser.add_argument(
        "--threads",
        nargs="+",
        type=int,
        default=[],
        help="run the experiment once per thread count (OMP_NUM_THREADS), each table under its count",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="runs at a time, each on cores / jobs threads unless OMP_NUM_THREADS says (default: one run per core, "
        f"or per OMP_NUM_THREADS cores where it is set; best_of_n and overoptimization: at most {MAX_JOBS}, one "
        "thread each); the figures are those of the thread count, whatever --jobs",
    )
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to every run")
    args = parser.parse_args()
    if args.task is not None and args.experiment != "estimators":  # the other experiments set their own tasks
        print(
            f"error: --task is for estimators only; {args.experiment} runs its own task (drop --task).", file=sys.stderr
        )
        sys.exit(2)
    args.task = args.task or "sort"
    if args.threads:
        sys.exit(per_thread_count(args.threads))
    if args.seeds is None:
        args.seeds = [0, 1, 2, 3, 4] if args.experiment in TASK15 else [0, 1, 2]
    try:
        picked = pick_rows(args.experiment, args.rows)  # before any run: a row that is not there is one line
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    rows_given = picked if args.rows else []
    task15 = args.experiment in TASK15
    if task15 and "OMP_NUM_THREADS" not in os.environ:
        # Task 15's figures do not depend on the machine's core count: every run, and the pool, on one thread
        # (TASKS.md §15 measured them so), unless OMP_NUM_THREADS says otherwise.
        os.environ["OMP_NUM_THREADS"] = "1"
    if args.jobs is None:  # one run per core, or per OMP_NUM_THREADS cores where it is set (--threads sets it)
        args.jobs = max(1, usable_cores() // (threads_told() or 1))
        args.jobs = min(args.jobs, MAX_JOBS) if task15 else args.jobs
    pin_threads(args.jobs)  # every run started from here: OMP_NUM_THREADS, cores / jobs unless set
    try:
        experiment(args, rows_given, picked)
    except RunFailed as err:  # a run's own one-line error (its script said it), and its exit code
        print(err.line, file=sys.stderr)
        sys.exit(err.code)
    except NotImplementedError as err:  # a stub, found before any run
        print(f"error: {err} Finish it (pytest -m graded shows what is missing), then run this again.", file=sys.stderr)
        sys.exit(3)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"\ninterrupted: no table (the reward models and runs kept in {args.out} are kept)", file=sys.stderr)
        sys.exit(130)


def experiment(args: argparse.Namespace, rows_given: list[str], picked: list[str]) -> None:
    """Run the experiment ``args`` names (only the rows ``picked``) and print its table."""
    if args.experiment in LECTURE:
        lecture_experiment(args.experiment, args.seeds, args.impl, args.extra, args.out, rows_given, args.jobs)
        return
    if args.experiment in REWARD_MODEL:
        if args.experiment in overoptimization.GRIDS:
            columns, table = overoptimization.overoptimization(
                args.seeds, args.impl, args.extra, args.out, rows_given, args.experiment, args.jobs
            )
        elif args.experiment == "best_of_n":
            columns, table = best_of_n.best_of_n(args.seeds, args.impl, args.extra, args.out, rows_given, args.jobs)
        else:
            columns, table = overoptimization.rm_vs_dpo(args.seeds, args.impl, args.extra, rows_given, args.jobs)
        counts = overoptimization.COUNTS | best_of_n.COUNTS  # counts of seeds, not medians
        rows = [
            [label, *(_count(v) if c in counts else _cell(v) for c, v in zip(columns, values))]
            for label, values in table
        ]
        print_table(args.experiment, args.seeds, columns, rows)
        return

    runs_spec, columns = EXPERIMENTS[args.experiment]
    kl_end = "KL to the start, end" in columns
    estimators = args.experiment == "estimators"
    extra = (
        ["--task", args.task, "--level", "token", *ESTIMATOR_TASKS[args.task], *args.extra]
        if estimators
        else args.extra
    )
    spec = [(label, algorithm, flags) for label, algorithm, flags in runs_spec if label in picked]
    calls = [
        (f"{label}, seed {seed}", run_once, (algorithm, flags, seed, args.impl, extra, kl_end))
        for label, algorithm, flags in spec
        for seed in args.seeds
    ]

    def line(result: tuple[dict, dict]) -> str:
        return ", ".join(f"{c}: {_cell([result[0][c]], _reach(c)).split(' [')[0]}" for c in columns)

    name = f"{args.experiment} --task {args.task}" if estimators else args.experiment
    seconds = RUN_SECONDS[f"estimators {args.task}" if estimators else args.experiment]
    results = iter(run_all(name, calls, args.jobs, seconds, line))
    rows, curves = [], []
    for label, _, _ in spec:
        runs = [next(results) for _ in args.seeds]
        rows.append([label, *(_cell([r[c] for r, _ in runs], _reach(c)) for c in columns)])
        curves.append((label, [c for _, c in runs]))
    print_table(name, args.seeds, columns, rows)
    if estimators:
        path = args.out / f"estimators-{args.task}.png"
        plot_methods(curves, path, f"train_grpo.py --level token --task {args.task}: mean over seeds {args.seeds}")
        print(f"\ncurves: {path}", file=sys.stderr)


def plot_methods(curves: list[tuple[str, list[dict[str, tuple[list, list]]]]], path: Path, title: str) -> None:
    """One panel per tag of :data:`CURVES`, one line per method: the mean over its seeds at each step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(5 * len(CURVES), 4))
    for ax, tag in zip(axes, CURVES):
        for label, runs in curves:
            series = [run[tag] for run in runs if tag in run]
            if not series:
                continue
            steps = series[0][0]
            length = min(len(values) for _, values in series)
            mean = [sum(values[i] for _, values in series) / len(series) for i in range(length)]
            ax.plot(steps[:length], mean, label=label)
        ax.set_title(tag)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
