"""Shared machinery of the two training scripts: set-up, rollouts, and readable errors.

The RL loop itself is written out in ``train_ppo.py`` and ``train_grpo.py``; this module holds only
what both need around it.
"""

from __future__ import annotations

import math
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from rlhf_practice.config import TrainConfig
from rlhf_practice.data import build_prompt_dataloader, infinite_batches
from rlhf_practice.errors import ConfigError, RLHFPracticeError, TrainingError
from rlhf_practice.modeling import Generation, PolicyValueModel, load_tokenizer
from rlhf_practice.reward import RuleBasedReward, build_reward
from rlhf_practice.rl import Impl, load_impl
from rlhf_practice.tracking import RunLogger


def seed_everything(seed: int, device: torch.device | None = None) -> None:
    """Seed Python, NumPy and torch. On a CPU also ask torch for deterministic kernels, so that the
    same seed gives the same metrics.csv; on CUDA speed wins (some kernels there are not deterministic)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if device is None or device.type == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)


def resolve_device(device: str) -> torch.device:
    """ "auto" -> cuda if available, else cpu; "cuda" without a GPU is a ConfigError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"device={device!r} but no CUDA device is available; use --device cpu (or auto) and --preset tiny."
        )
    return torch.device(device)


def run_main(main: Callable[[], None]) -> None:
    """Run a script's ``main`` and turn predictable failures into one line on stderr.

    Exit codes: 0 success, 1 training error, 2 configuration error, 3 unfinished student stub.
    """
    try:
        main()
    except NotImplementedError as err:
        print(
            f"error: {err} Finish it (pytest -m graded shows what is missing), "
            "or run the reference implementation with --impl answer.",
            file=sys.stderr,
        )
        sys.exit(3)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except RLHFPracticeError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


def mean_of(values: list[float]) -> float:
    """Mean of a list of floats; NaN for an empty list."""
    return sum(values) / len(values) if values else math.nan


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory allocated by torch on CUDA; peak resident memory of the process on a CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux reports KiB


@dataclass
class TrainingRun:
    """Everything a training script needs, built from its config by :func:`start_run`."""

    config: TrainConfig
    algorithm: str
    impl: Impl
    device: torch.device
    tokenizer: PreTrainedTokenizerBase
    policy: PolicyValueModel
    prompts: Iterator[dict]
    reward_fn: RuleBasedReward
    logger: RunLogger
    rewards_seen: list[float] = field(default_factory=list)
    steps_done: int = 0

    def next_prompts(self) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """(input_ids (B, P), attention_mask (B, P)) on the run's device, and the prompt texts."""
        batch = next(self.prompts)
        return batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device), batch["prompt_text"]

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Generation:
        """Sample one reply per prompt row with the config's sampling settings."""
        c = self.config
        return self.policy.generate(
            input_ids,
            attention_mask,
            self.tokenizer,
            c.max_new_tokens,
            c.temperature,
            c.top_k,
            c.top_p,
            c.mixed_precision,
        )

    def score_replies(self, generation: Generation) -> tuple[list[str], torch.Tensor]:
        """The decoded replies (up to their first EOS) and their rewards, (N,) float32 on the device."""
        ids = generation.response_ids.masked_fill(generation.response_mask == 0, self.tokenizer.pad_token_id)
        replies = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        return replies, self.reward_fn(replies).to(self.device)

    def steps(self) -> Iterator[int]:
        """1, 2, ..., num_steps, behind a progress bar (see :meth:`log`)."""
        self._bar = tqdm(range(1, self.config.num_steps + 1), desc=self.algorithm, dynamic_ncols=True)
        self._last_time = time.time()
        for step in self._bar:
            yield step
            self.steps_done = step

    def log(
        self,
        step: int,
        metrics: dict[str, float],
        bar: dict[str, str],
        prompts: list[str],
        replies: list[str],
        rewards: torch.Tensor,
    ) -> None:
        """Log a step's metrics (plus timing), update the progress bar, and every sample_every steps log samples."""
        now = time.time()
        metrics = {**metrics, "time/step_s": now - self._last_time, "time/elapsed_s": now - self.logger.start_time}
        self._last_time = now
        self.rewards_seen.append(metrics["reward/mean"])
        self.logger.log_scalars(step, metrics)
        self._bar.set_postfix({k: f"{metrics[v]:+.3f}" for k, v in bar.items()}, refresh=False)
        if step % self.config.sample_every == 0 or step == 1:
            n = self.config.num_logged_samples
            self.logger.log_samples(step, prompts[:n], replies[:n], rewards[:n].tolist())

    def _close(self) -> None:
        self.logger.close()
        if getattr(self, "_bar", None) is not None:
            self._bar.close()

    def discard(self) -> None:
        """Close the logs and delete the run folder (a run that never completed a step)."""
        self._close()
        shutil.rmtree(self.logger.run_dir, ignore_errors=True)

    def finish(self, outcome: str) -> None:
        """Save the policy (unless training failed), write summary.json, close the logs."""
        summary = {
            "algorithm": self.algorithm,
            "outcome": outcome,
            "steps": self.steps_done,
            "wall_s": round(time.time() - self.logger.start_time, 2),
            "final_reward": mean_of(self.rewards_seen[-max(1, len(self.rewards_seen) // 10) :]),
            "peak_memory_mb": peak_memory_mb(self.device),
        }
        if outcome != "failed":
            policy_dir = self.logger.run_dir / "policy"
            self.policy.save_pretrained(policy_dir)
            self.tokenizer.save_pretrained(policy_dir)
            summary["policy_dir"] = str(policy_dir)
        self.logger.write_summary(summary)
        self._close()
        where = f"; policy saved to {summary['policy_dir']}" if "policy_dir" in summary else ""
        print(f"{outcome} after {self.steps_done} steps: logs in {self.logger.run_dir}{where}", file=sys.stderr)


def start_run(config: TrainConfig, algorithm: str) -> TrainingRun:
    """Validate ``config``, seed, and build the model, prompts, reward and run folder."""
    config.validate()
    impl = load_impl(config.impl)
    device = resolve_device(config.device)
    seed_everything(config.seed, device)
    tokenizer = load_tokenizer(config.model.model_name)
    policy = PolicyValueModel.from_pretrained(config.model.model_name, device)
    loader = build_prompt_dataloader(config.data, tokenizer, config.train_batch_size, config.seed)
    name = config.run_name or f"{algorithm}-{config.preset}-{datetime.now():%Y%m%d-%H%M%S}"
    run_dir = Path(config.run_dir) / name
    if run_dir.exists():
        raise ConfigError(f"run folder {run_dir} already exists; pick another --run_name.")
    logger = RunLogger(run_dir, config)
    print(
        f"{algorithm} | impl={impl.name} | model={config.model.model_name} | data={config.data.dataset_name} "
        f"| device={device} | run folder {run_dir}",
        file=sys.stderr,
    )
    return TrainingRun(
        config,
        algorithm,
        impl,
        device,
        tokenizer,
        policy,
        infinite_batches(loader),
        build_reward(config.reward),
        logger,
    )


@contextmanager
def training_run(config: TrainConfig, algorithm: str) -> Iterator[TrainingRun]:
    """``with training_run(config, "ppo") as run:`` -- the run folder is always flushed and closed.

    Finishing normally or with Ctrl-C saves the policy; any other exception leaves the logs written
    so far and re-raises (``run_main`` turns it into one line).
    """
    run = start_run(config, algorithm)
    try:
        yield run
    except KeyboardInterrupt:
        print(f"\ninterrupted (Ctrl-C) at step {run.steps_done + 1}", file=sys.stderr)
        run.finish("interrupted")
        return
    except BaseException as err:
        if isinstance(err, NotImplementedError) and run.steps_done == 0:
            run.discard()  # an unfinished stub at the first step: leave no empty run folder behind
            raise
        if isinstance(err, TrainingError):
            err.args = (f"step {run.steps_done + 1}: {err}",)
        run.finish("failed")
        raise
    run.finish("finished")
