"""Every setting of a run, as dataclasses with one comment per field.

``train_ppo.py`` reads a :class:`PPOConfig`, ``train_grpo.py`` a :class:`GRPOConfig`; both share
:class:`TrainConfig`. A *preset* fills in defaults for a whole setup:

- ``tiny``: the project's own small GPT-2 and its built-in review corpus; any CPU, no network.
- ``gpt2``: ``gpt2`` and ``imdb`` from the Hugging Face Hub; meant for one GPU.

``--preset auto`` (the default) picks ``gpt2`` when CUDA is available and ``tiny`` otherwise.
Flags given on the command line override the preset, e.g.
``python train_ppo.py --preset tiny --ppo_clip_range 0.1 --model.model_name sshleifer/tiny-gpt2``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rlhf_practice.errors import ConfigError

PRESET_NAMES = ("tiny", "gpt2")
MAX_ROWS_PER_STEP = 4096  # replies generated per step; beyond this a laptop (or a GPU) runs out of memory


@dataclass
class ModelConfig:
    model_name: str = "tiny"
    """Policy to start from: "tiny" (shipped with the package), a hub name such as "gpt2", or a local folder."""
    value_head_init: str = "zero"
    """How a new value head starts: "zero" (V = 0 everywhere, the default) or "random" (small random weights)."""


@dataclass
class DataConfig:
    dataset_name: str = "tiny"
    """Prompt source: "tiny" (built-in corpus), a hub dataset such as "imdb", or a local .csv/.json/.jsonl/.parquet/.txt file."""
    dataset_split: str = "train"
    """Split to read from a hub dataset (local files always have one split, "train")."""
    text_column: str = "text"
    """Column that holds the review text."""
    min_prompt_length: int = 2
    """Shortest prompt, in tokens: each prompt is the first N tokens of a review, N drawn from [min, max]."""
    max_prompt_length: int = 8
    """Longest prompt, in tokens."""
    max_samples: int = 0
    """Use only the first this many texts (0 = all); handy to start quickly on a big dataset."""


@dataclass
class RewardConfig:
    sentiment_weight: float = 1.0
    """Weight of the sentiment term: (#positive - #negative) / (#positive + #negative) sentiment words."""
    short_penalty_weight: float = 0.0
    """Weight of the worked-example term that gives -1 to replies shorter than short_min_words (0 = off)."""
    short_min_words: int = 4
    """Replies with fewer words than this count as short."""
    long_penalty_weight: float = 0.0
    """Weight of the second example term, which gives -1 to replies longer than long_max_words (0 = off)."""
    long_max_words: int = 6
    """Replies with more words than this count as long."""


@dataclass
class TrainConfig:
    """Settings shared by PPO and GRPO."""

    algorithm: ClassVar[str] = ""  # "ppo" or "grpo": which script these settings are for

    preset: str = "auto"
    """"tiny", "gpt2", or "auto" (gpt2 when CUDA is available, else tiny). Sets the defaults of every other field."""
    level: str = "sequence"
    """"sequence" (tasks 1-4: one log-prob, value and reward per reply) or "token" (tasks 7-9: per-token KL to a frozen reference; GAE for PPO, GRPO-clip for GRPO)."""
    impl: str = field(default_factory=lambda: os.environ.get("RLHF_IMPL", "student"))
    """Implementation of the rl/ functions: "student" (your rlhf_practice/rl/), "answer" (the answer key), or a folder with ppo.py, grpo.py (and token_level.py), a copy of rlhf_practice/rl/."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train_batch_size: int = 32
    """Prompts per training step (GRPO samples grpo_group_size replies for each)."""
    max_new_tokens: int = 16
    """Longest reply, in tokens; more tokens cost memory and time."""
    temperature: float = 1.0
    """Sampling temperature (> 0); 1.0 samples from the policy as it is. Log-probs are scored at the same temperature."""
    top_k: int = 0
    """Sample only from the k most likely tokens (0 = no limit). Off-policy: log-probs are scored without the cut."""
    top_p: float = 1.0
    """Nucleus sampling: smallest token set with this much probability (1.0 = no limit). Off-policy, like top_k."""
    learning_rate: float = 1e-4
    """Adam learning rate of the policy (and value head)."""
    max_grad_norm: float = 1.0
    """Clip the gradient norm to this before each optimizer step."""
    normalize_advantages: bool = True
    """Pass normalize=True to the advantage function (scale advantages to unit std)."""
    num_steps: int = 100
    """Training steps; each step samples a fresh batch of prompts."""
    seed: int = 0
    """Seed for prompts, sampling and initialisation; on a CPU the same seed gives the same metrics.csv."""
    device: str = "auto"
    """"auto" (cuda if available, else cpu), "cpu", "cuda" or "cuda:N"."""
    mixed_precision: bool = True
    """On CUDA, run forward passes in bfloat16 autocast (ignored on a CPU)."""
    decoding: str = "auto"
    """How replies are sampled: "static" (pre-allocated KV cache, on CUDA replayed as a CUDA graph; GPT-2 models), "hf" (Hugging Face generate), or "auto" (static on CUDA, hf on a CPU). One sampler: on a CPU the same seed gives the same replies either way."""
    run_dir: str = "runs"
    """Folder that receives one sub-folder per run."""
    run_name: str = ""
    """Name of this run's folder (default: algorithm-preset-date-time)."""
    sample_every: int = 10
    """Log generated text samples every this many steps."""
    num_logged_samples: int = 4
    """How many prompt/reply pairs each sample log holds."""

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid setting and what to do."""
        for name, value in _flat_fields(self):
            _require(not isinstance(value, float) or math.isfinite(value), name, value, "must be a finite number")
        positive_ints = {
            "train_batch_size": self.train_batch_size,
            "max_new_tokens": self.max_new_tokens,
            "num_steps": self.num_steps,
            "sample_every": self.sample_every,
            "data.min_prompt_length": self.data.min_prompt_length,
            "data.max_prompt_length": self.data.max_prompt_length,
        }
        for name, value in positive_ints.items():
            _require(value > 0, name, value, "must be a positive integer")
        _require(
            self.data.min_prompt_length <= self.data.max_prompt_length,
            "data.min_prompt_length",
            self.data.min_prompt_length,
            f"must not exceed data.max_prompt_length ({self.data.max_prompt_length})",
        )
        _require(self.data.max_samples >= 0, "data.max_samples", self.data.max_samples, "must be >= 0 (0 = all)")
        _require(self.num_logged_samples >= 0, "num_logged_samples", self.num_logged_samples, "must be >= 0")
        _require(
            0 < self.learning_rate <= 1, "learning_rate", self.learning_rate, "must lie in (0, 1] (try 1e-5 to 1e-3)"
        )
        _require(self.max_grad_norm > 0, "max_grad_norm", self.max_grad_norm, "must be > 0")
        _require(
            0.01 <= self.temperature <= 100,
            "temperature",
            self.temperature,
            "must lie in [0.01, 100] (1.0 samples the policy as is)",
        )
        _require(0 <= self.top_k <= 10**6, "top_k", self.top_k, "must lie in [0, vocabulary size] (0 = no limit)")
        _require(0 <= self.seed < 2**32, "seed", self.seed, f"must lie in [0, {2**32 - 1}]")
        _require(
            self.run_name == "" or (Path(self.run_name).name == self.run_name and self.run_name not in (".", "..")),
            "run_name",
            self.run_name,
            "must be one folder name (no '/', no '..'); the folder is made inside run_dir",
        )
        group = getattr(self, "grpo_group_size", 1)
        rows = self.train_batch_size * group
        _require(
            rows <= MAX_ROWS_PER_STEP,
            "grpo_group_size" if group > 1 else "train_batch_size",
            group if group > 1 else rows,
            f"means {rows} replies per step (train_batch_size x grpo_group_size); keep that <= {MAX_ROWS_PER_STEP}",
        )
        _require(0 < self.top_p <= 1, "top_p", self.top_p, "must be in (0, 1] (1.0 = no limit)")
        for name in ("short_penalty_weight", "long_penalty_weight"):
            weight = getattr(self.reward, name)
            _require(
                weight >= 0,
                f"reward.{name}",
                weight,
                "must be >= 0 (0 turns the term off; a negative weight would turn a penalty into a bonus)",
            )
        for name in ("short_min_words", "long_max_words"):
            count = getattr(self.reward, name)
            _require(count >= 0, f"reward.{name}", count, "must be >= 0")
        _require(
            self.preset in (*PRESET_NAMES, "auto"),
            "preset",
            self.preset,
            f"is unknown; use one of: auto, {', '.join(PRESET_NAMES)}",
        )
        _require(
            re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device) is not None,
            "device",
            self.device,
            'is not a device; use "auto", "cpu", "cuda" or "cuda:N"',
        )
        _require(self.impl.strip() != "", "impl", self.impl, 'is empty; use "student", "answer" or a folder')
        _require(self.level in ("sequence", "token"), "level", self.level, 'is unknown; use "sequence" or "token"')
        _require(
            self.decoding in ("auto", "static", "hf"),
            "decoding",
            self.decoding,
            'is unknown; use "auto", "static" or "hf"',
        )
        beta = getattr(self, "beta", 0.0)
        _require(beta >= 0, "beta", beta, "must be >= 0 (0 = no KL penalty to the reference)")
        _require(
            self.model.value_head_init in ("zero", "random"),
            "model.value_head_init",
            self.model.value_head_init,
            'is unknown; use "zero" or "random"',
        )


@dataclass
class PPOConfig(TrainConfig):
    """Settings of ``train_ppo.py``."""

    algorithm: ClassVar[str] = "ppo"

    ppo_clip_range: float = 0.2
    """epsilon in clip(ratio, 1 - epsilon, 1 + epsilon); must lie in (0, 1)."""
    ppo_epochs: int = 4
    """Passes of ppo_step over each batch of rollouts."""
    ppo_num_minibatches: int = 1
    """Split each batch into this many minibatches per pass (raise it when memory runs out)."""
    value_loss_coef: float = 0.25
    """Weight of the value loss MSE(V, R) in the total loss; 0.25 x MSE is CleanRL's weight (0.5 x 0.5 MSE), TRL's is 0.05 x MSE."""
    kl_coef: float = 0.05
    """Weight of approx_kl = mean(old - new log-probs) in the total loss (0 = no KL penalty). Sequence level only."""
    beta: float = 0.05
    """Token level: beta in the per-token reward r_t = -beta * KL_t (+ the score on the last token); KL to the frozen reference."""
    kl_estimator: str = "k1"
    """Token level: KL_t in the reward, "k1" (log pi - log pi_ref) or "k3" ((r - 1) - log r, r = pi_ref / pi)."""
    kl_target: float = 0.0
    """Token level: adapt beta toward this KL to the reference per reply (halve / double it; PPO paper, section 4); 0 = beta stays fixed."""
    gamma: float = 1.0
    """Token level: discount factor of GAE."""
    gae_lambda: float = 0.95
    """Token level: lambda of GAE (1 = Monte Carlo returns, 0 = one-step TD)."""
    clip_range_value: float = 0.2
    """Token level: how far a value may move from its old value before its error stops counting (value clipping)."""
    entropy_coef: float = 0.0
    """Token level: weight of the entropy bonus, loss/total = policy + value_loss_coef * value - entropy_coef * entropy."""

    def validate(self) -> None:
        super().validate()
        _require(
            0 < self.ppo_clip_range < 1,
            "ppo_clip_range",
            self.ppo_clip_range,
            "must lie in (0, 1); 0.1 to 0.3 is usual",
        )
        _require(self.ppo_epochs > 0, "ppo_epochs", self.ppo_epochs, "must be a positive integer")
        _require(
            self.ppo_num_minibatches > 0, "ppo_num_minibatches", self.ppo_num_minibatches, "must be a positive integer"
        )
        _require(
            self.train_batch_size % self.ppo_num_minibatches == 0,
            "train_batch_size",
            self.train_batch_size,
            f"must be divisible by ppo_num_minibatches ({self.ppo_num_minibatches})",
        )
        _require(self.value_loss_coef >= 0, "value_loss_coef", self.value_loss_coef, "must be >= 0")
        _require(self.kl_coef >= 0, "kl_coef", self.kl_coef, "must be >= 0 (0 turns the KL penalty off)")
        _require(self.kl_estimator in ("k1", "k3"), "kl_estimator", self.kl_estimator, 'is unknown; use "k1" or "k3"')
        _require(self.kl_target >= 0, "kl_target", self.kl_target, "must be >= 0 (0 keeps beta fixed)")
        _require(0 <= self.gamma <= 1, "gamma", self.gamma, "must lie in [0, 1]")
        _require(0 <= self.gae_lambda <= 1, "gae_lambda", self.gae_lambda, "must lie in [0, 1]")
        _require(self.clip_range_value > 0, "clip_range_value", self.clip_range_value, "must be > 0 (0.2 is usual)")
        _require(self.entropy_coef >= 0, "entropy_coef", self.entropy_coef, "must be >= 0")


@dataclass
class GRPOConfig(TrainConfig):
    """Settings of ``train_grpo.py``."""

    algorithm: ClassVar[str] = "grpo"

    grpo_group_size: int = 4
    """K: replies sampled per prompt; advantages compare replies within a group, so K >= 2."""
    beta: float = 0.04
    """Token level: weight of the k3 KL to the frozen reference in the GRPO-clip loss (0 = none; it is still logged)."""
    grpo_clip_range: float = 0.2
    """Token level: epsilon of the ratio clip against the policy that sampled the replies; must lie in (0, 1)."""
    grpo_iterations: int = 2
    """Token level: mu, updates on each batch of replies (the ratio moves away from 1 from the second one on)."""
    grpo_num_minibatches: int = 1
    """Token level: split the B * K replies into this many minibatches per iteration."""
    loss_type: str = "grpo"
    """Token level: "grpo" (token mean per reply, then over replies), "dapo" (mean over all tokens) or "dr_grpo" (sum / (N * max_new_tokens))."""

    def validate(self) -> None:
        super().validate()
        _require(
            self.grpo_group_size >= 2,
            "grpo_group_size",
            self.grpo_group_size,
            "must be >= 2: a group of one reply has nothing to compare with",
        )
        _require(0 < self.grpo_clip_range < 1, "grpo_clip_range", self.grpo_clip_range, "must lie in (0, 1)")
        _require(self.grpo_iterations > 0, "grpo_iterations", self.grpo_iterations, "must be a positive integer")
        _require(
            self.grpo_num_minibatches > 0
            and self.train_batch_size * self.grpo_group_size % self.grpo_num_minibatches == 0,
            "grpo_num_minibatches",
            self.grpo_num_minibatches,
            f"must be positive and divide the {self.train_batch_size * self.grpo_group_size} replies per step",
        )
        _require(
            self.loss_type in ("grpo", "dapo", "dr_grpo"),
            "loss_type",
            self.loss_type,
            'is unknown; use "grpo", "dapo" or "dr_grpo"',
        )


# Per preset: fields shared by both algorithms, then per-algorithm fields.
_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "common": {
            "model": ModelConfig(model_name="tiny"),
            "data": DataConfig(dataset_name="tiny", min_prompt_length=2, max_prompt_length=6),
            "max_new_tokens": 12,
            "device": "auto",
        },
        "ppo": {"train_batch_size": 64, "learning_rate": 1e-4, "num_steps": 80, "ppo_epochs": 4},
        "grpo": {"train_batch_size": 16, "grpo_group_size": 4, "learning_rate": 2e-4, "num_steps": 80},
    },
    "gpt2": {
        "common": {
            "model": ModelConfig(model_name="gpt2"),
            "data": DataConfig(dataset_name="imdb", min_prompt_length=2, max_prompt_length=8),
            "max_new_tokens": 24,
            "sample_every": 20,
        },
        "ppo": {"train_batch_size": 64, "learning_rate": 1.4e-5, "num_steps": 200, "ppo_epochs": 4},
        "grpo": {"train_batch_size": 16, "grpo_group_size": 4, "learning_rate": 1.4e-5, "num_steps": 200},
    },
}

ConfigT = TypeVar("ConfigT", bound=TrainConfig)


def preset_config(cls: type[ConfigT], preset: str) -> ConfigT:
    """The default ``cls`` (PPOConfig or GRPOConfig) for a resolved preset ("tiny" or "gpt2")."""
    if preset not in _PRESETS:
        raise ConfigError(f"preset={preset!r} is unknown; use one of: auto, {', '.join(PRESET_NAMES)}")
    overrides = {**_PRESETS[preset]["common"], **_PRESETS[preset][cls.algorithm]}
    overrides = {k: dataclasses.replace(v) if dataclasses.is_dataclass(v) else v for k, v in overrides.items()}
    return cls(preset=preset, **overrides)


def _flat_fields(config: object, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted name, value) of every field, nested configs included: ("data.max_samples", 0), ..."""
    out = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out += _flat_fields(value, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


def _require(ok: bool, name: str, value: object, problem: str) -> None:
    if not ok:
        raise ConfigError(f"{name}={value!r} {problem}.")


def parse_config(cls: type[ConfigT], args: list[str] | None = None) -> ConfigT:
    """Build ``cls`` from the command line: the preset's defaults, then the flags given.

    Every field is a flag (``--train_batch_size 8``, ``--model.model_name gpt2``); ``--help`` lists
    them all with the defaults of the chosen preset. Prints one line naming the preset. The values
    are checked once, by :meth:`TrainConfig.validate` when the run starts.
    """
    import argparse
    import sys

    import tyro

    args = list(sys.argv[1:] if args is None else args)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="auto")
    requested = pre.parse_known_args(args)[0].preset
    if requested == "auto":
        preset = "gpt2" if _cuda_available() else "tiny"
        reason = "CUDA is available" if preset == "gpt2" else "no CUDA device found"
        note = f"preset: {preset} (auto: {reason}; choose with --preset tiny|gpt2)"
    else:
        preset, note = requested, f"preset: {requested}"
    config = tyro.cli(cls, args=args, default=preset_config(cls, preset), use_underscores=True)
    config.preset = preset
    if not any(a in ("-h", "--help") for a in args):
        print(note, file=sys.stderr)
    return config


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
