"""Run bookkeeping: a step's metrics, the progress bar, the run folder's files, and reading them back.

Files of a run folder (one run = one folder under ``runs/``):

- ``events.out.tfevents.*``: TensorBoard scalars (tags such as ``reward/mean``) and text samples;
- ``metrics.csv``: one row per step, the same scalars (deterministic on a CPU for a given seed);
- ``timing.csv``: ``time/step_s`` and ``time/elapsed_s`` per step (wall-clock, so never deterministic);
- ``samples.jsonl``: prompt, reply and reward of a few rollouts every ``sample_every`` steps;
- ``config.json``: the resolved configuration, with its ``algorithm``;
- ``summary.json``: written at the end (steps done, wall time, final reward, how the run ended, and the
  seconds set aside before or between steps, such as ``pairs_s``: train_dpo.py's preference pairs);
- ``policy/``: the final policy and tokenizer, saved with ``save_pretrained``.

:func:`load_run` reads such a folder back (``compare`` and ``scripts/benchmark.py`` use it),
:func:`final_mean` is the one definition of a run's "final" value of a per-step metric, and
:func:`final_heldout` the one definition of its final held-out accuracy (the last evaluation).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlhf_practice.errors import TrainingError

TIME_TAGS = ("time/step_s", "time/generate_s", "time/score_s", "time/eval_s", "time/warmup_s", "time/elapsed_s")
# TensorBoard's CUSTOM SCALARS tab, in the order a reader should look: reward first, then KL, losses, the rest.
LAYOUT = {
    "1 reward": [
        "reward/mean",
        "reward/gold",
        "reward/std",
        "reward/group_std",
        "frac_reward_zero_std",
        "accuracy/heldout",
        "reward/format",
        "reward/answer",
    ],
    "2 KL": [
        "kl/ref",
        "kl/beta",
        "kl/approx",
        "kl/k3",
        "ppo/clip_frac",
        "ppo/ratio_mean",
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "clip_ratio/region_mean",
    ],
    "3 losses": [
        "loss/policy",
        "loss/policy_before_update",
        "loss/value",
        "loss/value_clipped_frac",
        "loss/total",
        "loss/total_no_kl",
        "loss/total_with_kl",
    ],
    "4 the rest": [
        "adv/mean",
        "adv/std",
        "value/mean",
        "value/explained_variance",
        "policy/entropy",
        "response/length",
        "response/distinct",
        "dynamic_sampling/gen_batches",
        "dynamic_sampling/groups_dropped",
    ],
    "5 warm-up (sort, add)": ["warmup/loss", "warmup/accuracy"],
    "6 DPO (training pairs)": [
        "rewards/accuracies",
        "rewards/margins",
        "rewards/chosen",
        "rewards/rejected",
        "logps/chosen",
        "logps/rejected",
    ],
}
# What the progress bar shows, per algorithm: {label: tag}; tags a run does not log are left out
# (reward/gold: only with --reward_model, where reward/mean is the learned model's score).
BAR = {
    "ppo": {
        "reward": "reward/mean",
        "gold": "reward/gold",
        "policy_loss": "loss/policy",
        "value_loss": "loss/value",
        "approx_kl": "kl/approx",
        "kl_ref": "kl/ref",
    },
    "grpo": {
        "reward": "reward/mean",
        "gold": "reward/gold",
        "loss": "loss/policy",
        "adv_mean": "adv/mean",
        "kl_ref": "kl/ref",
    },
    "dpo": {"reward": "reward/mean", "loss": "loss/policy", "acc": "rewards/accuracies", "kl_ref": "kl/ref"},
    "rm": {"loss": "loss", "acc": "accuracy", "eval_acc": "eval_accuracy", "gold_r": "eval_gold_correlation"},
}


def final_mean(values: list[float]) -> float:
    """A run's final value of a metric: the mean over its last 10 % of steps (at least one); NaN if empty."""
    tail = values[-max(1, len(values) // 10) :]
    return sum(tail) / len(tail) if tail else math.nan


HELDOUT = "accuracy/heldout"


def final_heldout(values: list[float]) -> float:
    """A run's final held-out accuracy: ``accuracy/heldout`` at its last evaluation (the run's last step
    always evaluates), given the evaluations' values in order; NaN if there were none."""
    return values[-1] if values else math.nan


def check_finite(name: str, value: torch.Tensor) -> None:
    """Raise :class:`TrainingError` if ``value`` holds NaN or inf (called before each backward)."""
    if not torch.isfinite(value).all():
        raise TrainingError(
            f"{name} is {value.detach().float().cpu().tolist()} (not finite). Check your rl/ functions for a "
            "division by a zero std or exp() of large log-probs, or lower learning_rate."
        )


def mean_metrics(stats: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Average a list of metric dicts (one per minibatch or epoch) key by key, staying on the device."""
    return {k: torch.stack([s[k].detach().float() for s in stats]).mean() for k in stats[0]}


def rollout_stats(
    rewards: torch.Tensor,
    advantages: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    group_size: int = 0,
) -> dict[str, torch.Tensor]:
    """The statistics of a batch of rollouts that both algorithms log (0-dim tensors on the device).

    rewards: (N,); advantages: (N,) or the real tokens' advantages; response_ids and response_mask:
    (N, T), the N replies (see :class:`~rlhf_practice.modeling.Generation`). ``response/distinct`` is
    the number of different replies (compared token for token up to EOS) divided by N: 1 when no two
    are alike, toward 1/N when the policy collapses onto one stock reply. With ``group_size`` K, also
    the mean std of the rewards within each group of K replies to one prompt (``reward/group_std``).
    Training scripts call :meth:`~rlhf_practice.training.TrainingRun.rollout_stats`, which gathers the
    batch of every process first.
    """
    replies = response_ids.masked_fill(response_mask == 0, -1)  # (N, T): padding after EOS made equal
    stats = {
        "reward/mean": rewards.mean(),
        "reward/std": rewards.std(),
        "adv/mean": advantages.mean(),
        "adv/std": advantages.std(),
        "response/length": response_mask.sum(dim=1).float().mean(),
        "response/distinct": torch.tensor(len(torch.unique(replies, dim=0)) / len(replies), device=rewards.device),
    }
    if group_size:
        stats["reward/group_std"] = rewards.view(-1, group_size).std(dim=1).mean()
    return stats


def frac_reward_zero_std(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """``frac_reward_zero_std`` (TRL's name): the share of the groups of ``group_size`` replies whose
    rewards all tie (zero std, so zero advantage: no learning signal). rewards: (N,) with N = B * K."""
    grouped = rewards.view(-1, group_size)
    return (grouped == grouped[:, :1]).all(dim=1).float().mean()


def k3_per_reply(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N,): KL(pi || pi_ref) per reply, k3 = exp(r) - r - 1 with r = log pi_ref - log pi at each reply
    token (>= 0, unbiased), summed over the reply's tokens. logprobs, ref_logprobs, mask: (N, T)."""
    r = ref_logprobs - logprobs
    return ((r.exp() - r - 1) * mask).sum(dim=1)


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 - Var(returns - values) / Var(returns): 1 is a perfect critic, 0 no better than a constant,
    below 0 worse than a constant (it adds noise to A = R - V). CleanRL logs the same figure; like
    CleanRL, it is NaN when the returns do not vary (every reply got the same reward)."""
    var = returns.var()
    return torch.where(var > 1e-8, 1 - (returns - values).var() / var.clamp(min=1e-8), torch.nan)


class RunLogger:
    """Writes one run folder, drives the progress bar, and times the steps.

    Scalars go to TensorBoard and metrics.csv (flushed after every step); every ``sample_every``
    steps a few prompt/reply/reward triples go to TensorBoard text and samples.jsonl.
    """

    def __init__(
        self,
        run_dir: Path,
        config: object,
        processes: dict[str, object] | None = None,
        reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
        writes: bool = True,
    ):
        """``processes``: what a run of several processes records in config.json and summary.json
        (their count and seeds). ``reduce``: averages a step's metrics over the processes before
        they are logged (None in one process). ``writes``: False in every process but the main one
        of a run with several: that logger writes no file, shows no bar, and still times the steps."""
        self.run_dir = Path(run_dir)
        self.config = config
        self.algorithm: str = config.algorithm
        self.reduce = reduce
        self.writes = writes
        self.start_time = self._last_time = time.time()
        self.rewards_seen: list[float] = []
        self.steps_done = 0
        self._bar: tqdm | None = None
        self._bar_values: dict[str, str] = {}
        self._phase_seconds: dict[str, float] = {}
        self.set_aside_seconds: dict[str, float] = {}
        self.notes: dict[str, object] = dict(processes or {})  # written into summary.json (train_dpo.py: its pairs)
        if writes:
            self._open_files(processes or {})

    def _open_files(self, processes: dict[str, object]) -> None:
        from torch.utils.tensorboard import SummaryWriter  # imported here: only a training run needs it

        self.run_dir.mkdir(parents=True, exist_ok=False)
        record = {"algorithm": self.algorithm, **dataclasses.asdict(self.config), **processes}
        (self.run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n")
        started = set(threading.enumerate())
        self.writer = SummaryWriter(log_dir=str(self.run_dir))
        self._writer_threads = set(threading.enumerate()) - started  # TensorBoard writes from a thread of its own
        self._excepthook = threading.excepthook
        threading.excepthook = self._writer_thread_failed
        layout = {group: {tag: ["Multiline", [f"^{tag}$"]] for tag in tags} for group, tags in LAYOUT.items()}
        self.writer.add_custom_scalars(layout)
        self._files = {name: open(self.run_dir / name, "w", newline="") for name in ("metrics.csv", "timing.csv")}
        self._csv: dict[str, csv.DictWriter] = {}
        self._samples = open(self.run_dir / "samples.jsonl", "w", encoding="utf-8")
        self.start_time = self._last_time = time.time()

    def _writer_thread_failed(self, args: threading.ExceptHookArgs) -> None:
        """``threading.excepthook`` while the run is open. When the run folder goes away, TensorBoard's
        writer thread dies with the OSError and hands it to the training loop, whose next write or flush
        raises it (one line, from ``run_main``): print no traceback for the thread's copy."""
        if args.thread in self._writer_threads and issubclass(args.exc_type, OSError):
            return
        self._excepthook(args)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to this step's ``time/<phase>_s``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._phase_seconds[phase] = self._phase_seconds.get(phase, 0.0) + time.perf_counter() - start

    @contextmanager
    def set_aside(self, phase: str) -> Iterator[None]:
        """Time the ``with`` body as work outside the steps (train_dpo.py's pair building): it counts
        in no step's ``time/`` tags nor in ``time/elapsed_s`` and ``wall_s``; summary.json reports it
        as ``<phase>_s``."""
        phases = dict(self._phase_seconds)
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self._phase_seconds = phases  # what the body timed (generate, score) is not a step's
            self.start_time += seconds
            self._last_time += seconds
            self.set_aside_seconds[phase] = self.set_aside_seconds.get(phase, 0.0) + seconds

    def steps(self, steps: range) -> Iterator[int]:
        """The loop's steps (``range(1, num_steps + 1)``, written in the loop's line), behind a progress
        bar that :meth:`log` updates."""
        self._bar = tqdm(steps, desc=self.algorithm, dynamic_ncols=True, disable=not self.writes)
        for step in self._bar:
            yield step
            self.steps_done = step

    def log(
        self, step: int, metrics: dict[str, torch.Tensor], prompts: list[str], replies: list[str], rewards: torch.Tensor
    ) -> None:
        """Log a step: its metrics (0-dim tensors, copied to the host at once), timing, the bar, samples.

        A step may leave out tags that are only measured now and then (train_dpo.py's ``reward/mean``,
        sampled every ``eval_every`` steps): their metrics.csv cells stay empty, the bar keeps their
        last value, and samples are logged only at a step that has some (``replies`` not empty)."""
        values = torch.stack([v.detach().float() for v in metrics.values()])
        if self.reduce is not None:  # several processes: the mean over them (every process calls log)
            values = self.reduce(values)
        scalars = dict(zip(metrics, values.tolist()))  # one copy to the host
        now = time.time()
        phases = {f"time/{phase}_s": seconds for phase, seconds in self._phase_seconds.items()}
        scalars.update({"time/step_s": now - self._last_time, **phases, "time/elapsed_s": now - self.start_time})
        self._last_time, self._phase_seconds = now, {}
        if "reward/mean" in scalars:
            self.rewards_seen.append(scalars["reward/mean"])
        if not self.writes:
            return
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        self._write_row("metrics.csv", step, {k: v for k, v in scalars.items() if k not in TIME_TAGS})
        self._write_row("timing.csv", step, {k: v for k, v in scalars.items() if k in TIME_TAGS})
        self._bar_values.update({k: f"{scalars[tag]:+.3f}" for k, tag in BAR[self.algorithm].items() if tag in scalars})
        self._bar.set_postfix(self._bar_values, refresh=False)
        if replies and (step % self.config.sample_every == 0 or step == 1):
            n = self.config.num_logged_samples
            self._log_samples(step, prompts[:n], replies[:n], rewards[:n].tolist())
        self.flush()

    def log_warmup(self, step: int, scalars: dict[str, float]) -> None:
        """Log a supervised warm-up step (``warmup/`` tags) to TensorBoard and warmup.csv; steps count from 1."""
        if not self.writes:
            return
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        if "warmup.csv" not in self._files:
            self._files["warmup.csv"] = open(self.run_dir / "warmup.csv", "w", newline="")
        self._write_row("warmup.csv", step, scalars)

    def _write_row(self, name: str, step: int, row: dict[str, float]) -> None:
        if name not in self._csv:
            self._csv[name] = csv.DictWriter(self._files[name], fieldnames=["step", *row])
            self._csv[name].writeheader()
        elif not row.keys() <= set(self._csv[name].fieldnames):  # a tag first logged after step 1 (task 16's online/)
            self._widen(name, [k for k in row if k not in self._csv[name].fieldnames])
        self._csv[name].writerow({"step": step, **{k: f"{v:.6g}" for k, v in row.items()}})

    def _widen(self, name: str, tags: list[str]) -> None:
        """Rewrite ``name`` with ``tags`` added to its header (the earlier rows' cells for them stay empty)."""
        f = self._files[name]
        f.flush()
        with open(f.name, newline="") as old:
            rows = list(csv.DictReader(old))
        f.seek(0)
        f.truncate()
        self._csv[name] = csv.DictWriter(f, fieldnames=[*self._csv[name].fieldnames, *tags])
        self._csv[name].writeheader()
        self._csv[name].writerows(rows)

    def _log_samples(self, step: int, prompts: list[str], replies: list[str], rewards: list[float]) -> None:
        rows = ["| prompt | reply | reward |", "|---|---|---|"]
        for prompt, reply, reward in zip(prompts, replies, rewards):
            cell = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
            rows.append(f"| {cell(prompt)} | {cell(reply)} | {reward:+.2f} |")
            self._samples.write(json.dumps({"step": step, "prompt": prompt, "reply": reply, "reward": reward}) + "\n")
        self.writer.add_text("samples", "\n".join(rows), step)

    def write_summary(self, outcome: str, folder: Path, **extra: object) -> dict:
        """Write ``folder``/summary.json atomically: how the run ended, steps done, wall time, final
        reward (null before the first step: valid JSON, never NaN), and ``extra``."""
        final_reward = final_mean(self.rewards_seen)
        summary = {
            "algorithm": self.algorithm,
            "outcome": outcome,
            "steps": self.steps_done,
            "wall_s": round(time.time() - self.start_time, 2),
            "final_reward": final_reward if math.isfinite(final_reward) else None,
            **{f"{phase}_s": round(seconds, 2) for phase, seconds in self.set_aside_seconds.items()},
            **self.notes,
            **extra,
        }
        partial = folder / ".summary.json.partial"
        partial.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        os.replace(partial, folder / "summary.json")
        return summary

    def flush(self) -> None:
        if not self.writes:
            return
        self.writer.flush()
        for f in (*self._files.values(), self._samples):
            f.flush()

    def close(self) -> None:
        if not self.writes:
            return
        try:
            self.flush()
            self.writer.close()
            for f in (*self._files.values(), self._samples):
                f.close()
            if self._bar is not None:
                self._bar.close()
        finally:
            if threading.excepthook == self._writer_thread_failed:
                threading.excepthook = self._excepthook


# ----------------------------------------------------------------------------- reading runs back


@dataclass
class Run:
    """One run folder, read back: its name, config, summary and per-step metrics (timing included)."""

    name: str
    folder: Path
    config: dict
    summary: dict
    metrics: dict[str, list[float]]
    steps: list[int]
    tag_steps: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    """The steps at which each tag has a value; a tag logged at every step (most) has ``steps``."""

    @property
    def algorithm(self) -> str:
        return self.config.get("algorithm") or self.summary.get("algorithm", "?")

    @property
    def level(self) -> str:
        """The run's ``--level``, "sequence" or "token" (a run whose config has no level was sequence level)."""
        return self.config.get("level", "sequence")

    def final(self, tag: str) -> float:
        """The run's final value of ``tag``: :func:`final_heldout` for ``accuracy/heldout`` (its last
        evaluation), else :func:`final_mean` of the values it has."""
        values = self.metrics.get(tag, [])
        return final_heldout(values) if tag == HELDOUT else final_mean(values)

    def steps_of(self, tag: str) -> list[int]:
        """The steps at which ``tag`` was logged: every step, or for ``accuracy/heldout`` the evaluations."""
        return self.tag_steps.get(tag, self.steps)

    def first_reaching(self, threshold: float, tag: str = "reward/mean") -> tuple[int, float] | None:
        """(step, seconds since the start) when ``tag`` first reached ``threshold``; None if it never did."""
        values, elapsed = self.metrics.get(tag, []), self.metrics.get("time/elapsed_s", [])
        i = next((i for i, v in enumerate(values) if v >= threshold), None)
        if i is None:
            return None
        step = self.steps_of(tag)[i]
        row = self.steps.index(step)
        return step, elapsed[row] if row < len(elapsed) else math.nan

    def wall_seconds(self) -> float:
        if "wall_s" in self.summary:
            return float(self.summary["wall_s"])
        elapsed = self.metrics.get("time/elapsed_s", [])
        return elapsed[-1] if elapsed else math.nan


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_run(folder: Path) -> Run:
    """Read one run folder written by the training scripts."""
    folder = Path(folder)
    timing = {row["step"]: row for row in _read_csv(folder / "timing.csv")}
    metrics: dict[str, list[float]] = {}
    tag_steps: dict[str, list[int]] = {}
    steps = []
    for row in _read_csv(folder / "metrics.csv"):
        steps.append(int(row["step"]))
        for tag, value in {**row, **timing.get(row["step"], {})}.items():
            if tag != "step" and value != "":  # empty: a tag not logged at this step (accuracy/heldout)
                metrics.setdefault(tag, []).append(float(value))
                tag_steps.setdefault(tag, []).append(steps[-1])
    sparse = {tag: at for tag, at in tag_steps.items() if len(at) < len(steps)}
    read_json = lambda name: json.loads((folder / name).read_text()) if (folder / name).is_file() else {}  # noqa: E731
    return Run(folder.name, folder, read_json("config.json"), read_json("summary.json"), metrics, steps, sparse)
