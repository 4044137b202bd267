"""Every setting of a run, as dataclasses: each field declares its bound next to it (``setting(default,
bound)``) and its help in the docstring under it (what ``--help`` shows). One checker, :func:`check`,
walks the fields; the few checks that involve two settings are each class's ``relations()``.

``train_ppo.py`` reads a :class:`PPOConfig` (``--level token``: a :class:`TokenPPOConfig`), ``train_grpo.py`` a
:class:`GRPOConfig` (a :class:`TokenGRPOConfig`), ``train_dpo.py`` a :class:`DPOConfig` (one level only) and
``train_reward_model.py`` a :class:`RewardModelConfig` (both :class:`PairsConfig`: the same pair settings);
:data:`CONFIGS` maps script and level to the class. All share :class:`TrainConfig`. A *preset* fills in defaults for a whole setup:

- ``tiny``: the project's own small GPT-2 and its built-in review corpus; any CPU, no network.
- ``gpt2``: ``gpt2`` and ``imdb`` from the Hugging Face Hub; meant for one GPU.

``--preset auto`` (the default) picks ``gpt2`` when CUDA is available and ``tiny`` otherwise.
Flags given on the command line override the preset, e.g.
``python train_ppo.py --preset tiny --ppo_clip_range 0.1 --model.model_name sshleifer/tiny-gpt2``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rlhf_practice.errors import ConfigError

PRESET_NAMES = ("tiny", "gpt2")
TASK_NAMES = (
    "sentiment",
    "sort",
    "add",
)  # the one list of tasks: task NAME is the Task of module rlhf_practice/tasks/NAME.py (TASK_CLASSES)
MAX_ROWS_PER_STEP = 4096  # replies generated per step; beyond this a laptop (or a GPU) runs out of memory


@dataclass(frozen=True)
class Bound:
    """What one setting accepts: a range of numbers, one of a few words, or a rule said in words.

    A range runs from ``low`` to ``high``; an open end excludes the number itself. ``text`` is the
    bound as the flag table and the error show it; ``hint`` follows the problem after a semicolon.
    """

    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    rule: Callable[[Any], bool] | None = None
    text: str = ""
    hint: str = ""

    def accepts(self, value: Any) -> bool:
        if self.rule is not None:
            return self.rule(value)
        if self.choices:
            return value in self.choices
        above = self.low < value if self.open_low else self.low <= value
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def shown(self) -> str:
        """The bound in a few characters: "(0, 1]", ">= 0", '"zero" or "random"'."""
        if self.text:
            return self.text
        if self.choices:
            quoted = [f'"{c}"' for c in self.choices]
            return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
        if self.high == math.inf:
            return f"{'>' if self.open_low else '>='} {_number(self.low)}"
        ends = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"{ends[0]}{_number(self.low)}, {_number(self.high)}{ends[1]}"

    def problem(self) -> str:
        """What the error says after ``name=value``."""
        if self.rule is not None:
            return self.hint
        if self.choices:
            return f"is unknown; use {self.shown()}"
        verb = "must be" if self.high == math.inf else "must lie in"
        return f"{verb} {self.shown()}" + (f"; {self.hint}" if self.hint else "")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def at_least(low: float, hint: str = "") -> Bound:
    return Bound(low=low, hint=hint)


def above(low: float, hint: str = "") -> Bound:
    return Bound(low=low, open_low=True, hint=hint)


def within(interval: str, hint: str = "", text: str = "") -> Bound:
    """A bound from its mathematical notation: ``within("(0, 1]")``."""
    low, high = (float(x) for x in interval[1:-1].split(","))
    return Bound(low, high, interval[0] == "(", interval[-1] == ")", text=text, hint=hint)


def one_of(*choices: str) -> Bound:
    return Bound(choices=choices)


POSITIVE = Bound(low=1, text="a positive integer")
NOT_NEGATIVE = at_least(0)


def setting(
    default: Any = dataclasses.MISSING, bound: Bound | None = None, factory: Callable[[], Any] | None = None
) -> Any:
    """A dataclass field that carries its bound (its help is the docstring under it, which tyro reads)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"bound": bound})
    return field(default=default, metadata={"bound": bound})


Relation = tuple[bool, str, object, str]  # (ok, name, value, problem) for a check that involves two settings


class Settings:
    """Base of every config dataclass: ``validate()`` runs the one checker, :func:`check`."""

    def relations(self) -> list[Relation]:
        """Checks that involve two settings, run after every field's own bound (so no division by 0)."""
        return []

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid setting and what to do."""
        check(self)


@dataclass
class ModelConfig(Settings):
    model_name: str = "tiny"
    """Policy to start from: "tiny" (shipped with the package), a hub name such as "gpt2", or a local folder."""
    value_head_init: str = setting("zero", one_of("zero", "random"))
    """How a new value head starts: "zero" (V = 0 everywhere, the default) or "random" (small random weights)."""


@dataclass
class DataConfig(Settings):
    dataset_name: str = "tiny"
    """Prompt source: "tiny" (built-in corpus), a hub dataset such as "imdb", or a local .csv/.json/.jsonl/.parquet/.txt file."""
    dataset_split: str = "train"
    """Split to read from a hub dataset (local files always have one split, "train")."""
    text_column: str = "text"
    """Column that holds the review text."""
    min_prompt_length: int = setting(2, POSITIVE)
    """Shortest prompt, in tokens: each prompt is the first N tokens of a review, N drawn from [min, max]."""
    max_prompt_length: int = setting(8, POSITIVE)
    """Longest prompt, in tokens."""
    max_samples: int = setting(0, at_least(0, "0 = all"))
    """Use only the first this many texts (0 = all); handy to start quickly on a big dataset."""

    def relations(self) -> list[Relation]:
        return [
            (
                self.min_prompt_length <= self.max_prompt_length,
                "min_prompt_length",
                self.min_prompt_length,
                f"must not exceed data.max_prompt_length ({self.max_prompt_length})",
            )
        ]


_WEIGHT = at_least(0, "0 turns the term off, a negative weight would turn a penalty into a bonus")


@dataclass
class RewardConfig(Settings):
    sentiment_weight: float = 1.0
    """Weight of the sentiment term: (#positive - #negative) / (#positive + #negative) sentiment words."""
    short_penalty_weight: float = setting(0.0, _WEIGHT)
    """Weight of the worked-example term that gives -1 to replies shorter than short_min_words (0 = off)."""
    short_min_words: int = setting(4, NOT_NEGATIVE)
    """Replies with fewer words than this count as short."""
    long_penalty_weight: float = setting(0.0, _WEIGHT)
    """Weight of the second example term, which gives -1 to replies longer than long_max_words (0 = off)."""
    long_max_words: int = setting(6, NOT_NEGATIVE)
    """Replies with more words than this count as long."""
    praise_penalty_weight: float = setting(0.0, _WEIGHT)
    """Weight of task 15's term, a reader who distrusts gushing: -1 for each positive word beyond praise_free_words (0 = off)."""
    praise_free_words: int = setting(1, NOT_NEGATIVE)
    """Positive words a reply may hold before the praise penalty counts them."""


@dataclass
class OnlineConfig(Settings):
    """Online RLHF (task 16, rlhf_practice/online_labels.py): the --reward_model refreshed with fresh labels of the current policy."""

    refresh_every: int = setting(0, NOT_NEGATIVE)
    """Refresh the reward model after every this many steps with labels of the current policy's replies (task 16); 0 = off (a static reward model)."""
    max_refreshes: int = setting(0, NOT_NEGATIVE)
    """Refresh at most this many times (0 = no limit): the label budget is labels_per_refresh times this."""
    labels_per_refresh: int = setting(256, POSITIVE)
    """Pairs of fresh replies the annotator (the task's reward, with --reward.*) orders at each refresh; each costs one label, a tie too."""
    candidates_per_label: int = setting(4, POSITIVE)
    """Fresh pairs sampled per label for selection uncertain or disagreement, which pick labels_per_refresh of them (random samples just as many as it labels)."""
    selection: str = setting("random", one_of("random", "uncertain", "disagreement"))
    """Which fresh pairs get labels: "random", "uncertain" (the proxy's score difference nearest 0) or "disagreement" (an ensemble's models disagree most)."""
    replay: bool = True
    """Train each refresh on every pair so far (the reward model's own training pairs included); --online.no_replay: on the new pairs only."""
    retrain: bool = False
    """Each refresh trains a new reward model (the starting policy's trunk and a new head, as train_reward_model.py starts) instead of training the current one on."""
    rm_steps: int = setting(100, NOT_NEGATIVE)
    """Adam steps of each refresh (batches of rm_batch_size pairs); 0 = audit only: label and log online/proxy_accuracy, train nothing."""
    rm_batch_size: int = setting(32, POSITIVE)
    """Pairs per refresh step."""
    rm_learning_rate: float = setting(1e-3, within("(0, 1]", "train_reward_model.py's tiny preset uses 1e-3"))
    """Learning rate of the refreshes (a new Adam each time)."""


LEVEL = one_of("sequence", "token")


def _folder_name(name: str) -> bool:
    return name == "" or (Path(name).name == name and name not in (".", ".."))


@dataclass
class TrainConfig(Settings):
    """Settings shared by PPO, GRPO and DPO."""

    algorithm: ClassVar[str] = ""  # "ppo", "grpo", "dpo" or "rm": which script these settings are for

    preset: str = setting("auto", one_of("auto", *PRESET_NAMES))
    """"tiny", "gpt2", or "auto" (gpt2 when CUDA is available, else tiny). Sets the defaults of every other field."""
    level: str = setting("sequence", LEVEL)
    """"sequence" (tasks 1-4: one log-prob, value and reward per reply) or "token" (tasks 7-9: per-token KL to a frozen reference; GAE for PPO, GRPO-clip for GRPO)."""
    task: str = setting("sentiment", one_of(*TASK_NAMES))
    """What to train on: "sentiment" (continue a movie review; the reward counts positive and negative words), "sort" (sort 4 digits) or "add" (a + b, answer in tags)."""
    impl: str = setting(
        factory=lambda: os.environ.get("RLHF_IMPL", "student"),
        bound=Bound(rule=lambda v: v.strip() != "", text="not empty", hint='is empty; use "student" or a folder'),
    )
    """Whose rl/ functions run: "student" (your rlhf_practice/rl/) or a copy of that folder: ppo.py and grpo.py, and each later task's file (token_level.py ... online.py) for its own runs."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train_batch_size: int = setting(32, POSITIVE)
    """Prompts per training step (GRPO samples grpo_group_size replies for each); train_dpo.py: preference pairs per step, and prompts per evaluation."""
    max_new_tokens: int = setting(16, POSITIVE)
    """Longest reply, in tokens; more tokens cost memory and time."""
    temperature: float = setting(1.0, within("[0.01, 100]", "1.0 samples the policy as is"))
    """Sampling temperature (> 0); 1.0 samples from the policy as it is. Log-probs are scored at the same temperature."""
    top_k: int = setting(0, within("[0, 1e6]", "0 = no limit", text="[0, vocabulary size]"))
    """Sample only from the k most likely tokens (0 = no limit). Off-policy: log-probs are scored without the cut."""
    top_p: float = setting(1.0, within("(0, 1]", "1.0 = no limit"))
    """Nucleus sampling: smallest token set with this much probability (1.0 = no limit). Off-policy, like top_k."""

    learning_rate: float = setting(1e-4, within("(0, 1]", "try 1e-5 to 1e-3"))
    """Adam learning rate of the policy (and value head)."""
    max_grad_norm: float = setting(1.0, above(0))
    """Clip the gradient norm to this before each optimizer step."""
    normalize_advantages: bool = True
    """Pass normalize=True to the advantage function (scale advantages to unit std)."""
    num_steps: int = setting(100, POSITIVE)
    """Training steps; each step samples a fresh batch of prompts (train_dpo.py: takes the next batch of pairs)."""
    warmup_steps: int = setting(0, NOT_NEGATIVE)
    """Tasks with correct replies (sort, add): supervised steps on correct prompt/reply pairs before RL, logged under warmup/ (0 = none; --task sort sets 15)."""
    warmup_learning_rate: float = setting(3e-3, within("(0, 1]"))
    """Adam learning rate of the warm-up (its own optimizer; RL then starts a new one with learning_rate)."""
    eval_every: int = setting(10, POSITIVE)
    """Steps between evaluations (also at step 1 and the last step): accuracy/heldout on the held-out prompts of sort and add; train_dpo.py also samples reward/mean and kl/ref then."""
    seed: int = setting(0, within(f"[0, {2**32 - 1}]"))
    """Seed for prompts, sampling and initialisation; on a CPU the same seed gives the same metrics.csv."""
    device: str = setting(
        "auto",
        Bound(
            rule=lambda v: re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None,
            text='"auto", "cpu", "cuda" or "cuda:N"',
            hint='is not a device; use "auto", "cpu", "cuda" or "cuda:N"',
        ),
    )
    """"auto" (cuda if available, else cpu), "cpu", "cuda" or "cuda:N"."""
    mixed_precision: bool = True
    """On CUDA, run forward passes in bfloat16 autocast (ignored on a CPU)."""
    decoding: str = setting("auto", one_of("auto", "static", "hf"))
    """How replies are sampled: "static" (pre-allocated KV cache, a CUDA graph on CUDA; GPT-2 models), "hf" (Hugging Face generate) or "auto" (static for GPT-2 models, else hf)."""
    run_dir: str = "runs"
    """Folder that receives one sub-folder per run."""
    run_name: str = setting(
        "",
        Bound(
            rule=_folder_name,
            text="one folder name",
            hint="must be one folder name (no '/', no '..'); the folder is made inside run_dir",
        ),
    )
    """Name of this run's folder (default: algorithm[-token]-preset-date-time-random)."""
    sample_every: int = setting(10, POSITIVE)
    """Log generated text samples every this many steps (train_dpo.py: at those of its evaluations)."""
    num_logged_samples: int = setting(4, NOT_NEGATIVE)
    """How many prompt/reply pairs each sample log holds."""
    lora_r: int = setting(0, within("[0, 4096]", "0 = off (full fine-tuning); 8 is usual"))
    """LoRA rank (peft): 0 trains every weight; r > 0 freezes the model and trains a rank-r adapter on lora_target_modules, with a default learning_rate 10 times full fine-tuning's."""
    lora_alpha: float = setting(16.0, above(0, "16 with r = 8 is usual"))
    """LoRA's alpha: the adapter's update is scaled by lora_alpha / lora_r."""
    lora_dropout: float = setting(0.0, within("[0, 1)"))
    """Dropout on the adapter's input (peft's LoraConfig); no effect in these runs, whose policy is always in eval mode, but kept in the saved adapter_config.json."""
    lora_target_modules: list[str] = setting(
        factory=lambda: ["c_attn"],
        bound=Bound(rule=lambda v: len(v) > 0, text="module names", hint="is empty; name at least one, e.g. c_attn"),
    )
    """Layers that get a LoRA adapter, by module name: GPT-2's attention projection c_attn (default); c_attn c_proj c_fc adapts the attention output and the MLP too."""
    lora_merge: bool = False
    """With lora_r > 0: save the policy with the adapter merged into the weights (a full model, like a run without LoRA) instead of the adapter alone."""

    def functions_called(self) -> list[str]:
        """The graded functions (rlhf_practice/course's GRADED) that a run with these settings calls: the run
        checks these at start-up, and only these, so an unfinished one is one line before anything is loaded."""
        raise TypeError(f"{type(self).__name__} does not say which graded functions its runs call")

    def replies_per_step(self) -> int:
        return self.train_batch_size

    def replies_relation(self) -> Relation:
        """Replies generated per step <= MAX_ROWS_PER_STEP, named by the setting that sets them."""
        rows = self.replies_per_step()
        return (
            rows <= MAX_ROWS_PER_STEP,
            "train_batch_size",
            self.train_batch_size,
            f"means {rows} replies per step; keep that <= {MAX_ROWS_PER_STEP}",
        )

    def relations(self) -> list[Relation]:
        wanted = CONFIGS.get((self.algorithm, self.level), type(self))
        return [
            self.replies_relation(),
            (
                type(self) is wanted,
                "level",
                self.level,
                f"needs a {wanted.__name__} (on the command line, --level {self.level} picks it)",
            ),
        ]


ENSEMBLE_MODES = ("mean", "min", "uwo")  # ensemble_reward's modes (rl/best_of_n.py, task 15)


def learned_reward_functions(reward_model: str, online: bool = False) -> list[str]:
    """The graded functions a --reward_model of ``reward_model`` calls: get_reward to score the replies (task 13)
    and, for several folders joined by commas, ensemble_reward to combine their scores (task 15); refreshed online
    (task 16), reward_loss to train it, select_pairs and proxy_agreement."""
    folders = [name for name in reward_model.split(",") if name.strip()]
    refreshed = ["reward_loss", "select_pairs", "proxy_agreement"] if online and folders else []
    return ["get_reward"] * bool(folders) + ["ensemble_reward"] * (len(folders) > 1) + refreshed


def online_relations(config: PPOBase | GRPOConfig) -> list[Relation]:
    """What --online.* needs of the rest: a --reward_model to refresh, and an ensemble to disagree."""
    folders = [name for name in config.reward_model.split(",") if name.strip()]
    on = config.online.refresh_every > 0
    return [
        (
            not on or bool(folders),
            "online.refresh_every",
            config.online.refresh_every,
            "refreshes a learned reward model; give --reward_model (the folder train_reward_model.py wrote), or 0",
        ),
        (
            not on or config.online.selection != "disagreement" or len(folders) > 1,
            "online.selection",
            config.online.selection,
            "needs an ensemble to disagree (--reward_model a,b,c); use random or uncertain with one model",
        ),
    ]


# train_ppo.py's and train_grpo.py's --reward_model (not train_dpo.py's: DPO needs no reward); the folder
# itself is checked when the run starts (rlhf_practice/learned_reward.py), before anything slow is loaded.
_REWARD_MODEL = Bound(
    rule=lambda v: v == "" or all(part.strip() for part in v.split(",")),
    text='"" or folders joined by commas',
    hint="names a blank folder; give the folder train_reward_model.py wrote (runs/<run>/reward_model; several "
    "joined by commas for an ensemble), or drop the flag",
)


@dataclass
class PPOBase(TrainConfig):
    """Settings of ``train_ppo.py`` at both levels."""

    algorithm: ClassVar[str] = "ppo"

    ppo_clip_range: float = setting(0.2, within("(0, 1)", "0.1 to 0.3 is usual"))
    """epsilon in clip(ratio, 1 - epsilon, 1 + epsilon); must lie in (0, 1)."""
    ppo_epochs: int = setting(4, POSITIVE)
    """Passes of ppo_step over each batch of rollouts."""
    ppo_num_minibatches: int = setting(1, POSITIVE)
    """Split each batch into this many minibatches per pass (raise it when memory runs out)."""
    value_loss_coef: float = setting(0.25, NOT_NEGATIVE)
    """Weight of the value loss MSE(V, R) in the total loss; 0.25 x MSE is CleanRL's weight (0.5 x 0.5 MSE), TRL's is 0.05 x MSE."""
    reward_model: str = setting("", _REWARD_MODEL)
    """A learned reward model to train against (task 13): the folder train_reward_model.py wrote, or several joined by commas (task 15's ensemble). The task's reward is logged as reward/gold. Empty: none."""
    reward_ensemble: str = setting("mean", one_of(*ENSEMBLE_MODES))
    """With several --reward_model folders: how ensemble_reward combines their normalised scores (task 15): "mean", "min" (worst case) or "uwo" (mean - reward_uncertainty_coef * variance)."""
    reward_uncertainty_coef: float = setting(0.5, NOT_NEGATIVE)
    """lambda of --reward_ensemble uwo: the variance of the models' scores it subtracts, per unit."""
    online: OnlineConfig = field(default_factory=OnlineConfig)
    """Online RLHF (task 16): refresh the --reward_model with fresh labels of the current policy (off by default)."""

    def reward_functions(self) -> list[str]:
        """What --reward_model adds: get_reward (task 13) for each model, ensemble_reward (task 15) for several;
        --online.refresh_every adds reward_loss (task 13) and task 16's two."""
        return learned_reward_functions(self.reward_model, self.online.refresh_every > 0)

    def relations(self) -> list[Relation]:
        return [
            *super().relations(),
            *online_relations(self),
            (
                self.train_batch_size % self.ppo_num_minibatches == 0,
                "train_batch_size",
                self.train_batch_size,
                f"must be divisible by ppo_num_minibatches ({self.ppo_num_minibatches})",
            ),
        ]


@dataclass
class PPOConfig(PPOBase):
    """Settings of ``train_ppo.py`` (tasks 1-2: one log-prob, value and reward per reply)."""

    kl_coef: float = setting(0.05, at_least(0, "0 turns the KL penalty off"))
    """Weight of approx_kl = mean(old - new log-probs) in the total loss (0 = no KL penalty). Sequence level only."""

    def functions_called(self) -> list[str]:
        return ["compute_advantages", "ppo_clip_loss", *self.reward_functions()]


@dataclass
class TokenPPOConfig(PPOBase):
    """Settings of ``train_ppo.py --level token`` (tasks 7-8: KL to a frozen reference in the reward, GAE)."""

    level: str = setting("token", LEVEL)
    beta: float = setting(0.05, at_least(0, "0 = no KL penalty to the reference"))
    """Token level: beta in the per-token reward r_t = -beta * KL_t (+ the score on the last token); KL to the frozen reference."""
    kl_estimator: str = setting("k1", one_of("k1", "k3"))
    """Token level: KL_t in the reward, "k1" (log pi - log pi_ref) or "k3" ((r - 1) - log r, r = pi_ref / pi)."""
    kl_target: float = setting(0.0, at_least(0, "0 keeps beta fixed"))
    """Token level: adapt beta toward this KL to the reference per reply, in proportion to the error (Ziegler et al. 2019); 0 = beta stays fixed."""
    kl_horizon: int = setting(256, POSITIVE)
    """Token level, with kl_target: replies over which a steady error moves beta by a factor of about e^error (|error| <= 0.2); 256 is 4 steps of the tiny preset."""
    gamma: float = setting(1.0, within("[0, 1]"))
    """Token level: discount factor of GAE."""
    gae_lambda: float = setting(0.95, within("[0, 1]"))
    """Token level: lambda of GAE (1 = Monte Carlo returns, 0 = one-step TD)."""
    clip_range_value: float = setting(0.2, above(0, "0.2 is usual"))
    """Token level: how far a value may move from its old value before its error stops counting (value clipping)."""
    entropy_coef: float = setting(0.0, NOT_NEGATIVE)
    """Token level: weight of the entropy bonus, loss/total = policy + value_loss_coef * value - entropy_coef * entropy."""

    def functions_called(self) -> list[str]:
        return ["per_token_kl", "compute_gae", "masked_mean", "token_ppo_loss", *self.reward_functions()]


@dataclass
class GRPOConfig(TrainConfig):
    """Settings of ``train_grpo.py`` (tasks 3-4: one log-prob and reward per reply, the group's mean as baseline)."""

    algorithm: ClassVar[str] = "grpo"

    grpo_group_size: int = setting(4, at_least(2, "a group of one reply has nothing to compare with"))
    """K: replies sampled per prompt; advantages compare replies within a group, so K >= 2."""
    reward_model: str = setting("", _REWARD_MODEL)
    """A learned reward model to train against (task 13): the folder train_reward_model.py wrote, or several joined by commas (task 15's ensemble). The task's reward is logged as reward/gold. Empty: none."""
    reward_ensemble: str = setting("mean", one_of(*ENSEMBLE_MODES))
    """With several --reward_model folders: how ensemble_reward combines their normalised scores (task 15): "mean", "min" (worst case) or "uwo" (mean - reward_uncertainty_coef * variance)."""
    reward_uncertainty_coef: float = setting(0.5, NOT_NEGATIVE)
    """lambda of --reward_ensemble uwo: the variance of the models' scores it subtracts, per unit."""
    online: OnlineConfig = field(default_factory=OnlineConfig)
    """Online RLHF (task 16): refresh the --reward_model with fresh labels of the current policy (off by default)."""

    def reward_functions(self) -> list[str]:
        """What --reward_model adds: get_reward (task 13) for each model, ensemble_reward (task 15) for several;
        --online.refresh_every adds reward_loss (task 13) and task 16's two."""
        return learned_reward_functions(self.reward_model, self.online.refresh_every > 0)

    def functions_called(self) -> list[str]:
        return ["compute_group_advantages", "grpo_loss", *self.reward_functions()]

    def relations(self) -> list[Relation]:
        return [*super().relations(), *online_relations(self)]

    def replies_per_step(self) -> int:
        return self.train_batch_size * self.grpo_group_size

    def replies_relation(self) -> Relation:
        rows = self.replies_per_step()
        return (
            rows <= MAX_ROWS_PER_STEP,
            "grpo_group_size",
            self.grpo_group_size,
            f"means {rows} replies per step (train_batch_size x grpo_group_size); keep that <= {MAX_ROWS_PER_STEP}",
        )


@dataclass
class TokenGRPOConfig(GRPOConfig):
    """Settings of ``train_grpo.py --level token`` (task 9: GRPO-clip with a KL to a frozen reference)."""

    level: str = setting("token", LEVEL)
    beta: float = setting(0.04, at_least(0, "0 = no KL penalty to the reference"))
    """Token level: weight of the k3 KL to the frozen reference in the GRPO-clip loss (0 = none; it is still logged)."""
    grpo_clip_range: float = setting(0.2, within("(0, 1)"))
    """Token level: epsilon of the ratio clip against the policy that sampled the replies; must lie in (0, 1)."""
    grpo_iterations: int = setting(2, POSITIVE)
    """Token level: mu, updates on each batch of replies (the ratio moves away from 1 from the second one on)."""
    grpo_num_minibatches: int = setting(1, POSITIVE)
    """Token level: split the B * K replies into this many minibatches per iteration."""
    loss_type: str = setting("grpo", one_of("grpo", "dapo", "dr_grpo", "cispo"))
    """Token level: "grpo" (token mean per reply, then over replies), "dapo" (mean over all tokens), "dr_grpo" (sum / (N * max_new_tokens)) or "cispo" (capped, stopped weights)."""
    advantage: str = setting("grpo", one_of("grpo", "dr_grpo", "rloo"))
    """Token level: "grpo" (reply minus group mean, / std if normalize_advantages), "dr_grpo" (no std) or "rloo" (minus the mean of the other K - 1; no std). normalize_advantages applies to "grpo" only."""
    importance_sampling_level: str = setting("token", one_of("token", "sequence"))
    """Token level: "token" (one ratio per token) or "sequence" (GSPO: one ratio per reply, the geometric mean of its token ratios); "sequence" needs loss_type "grpo"."""
    grpo_clip_range_high: float | None = setting(
        None,
        Bound(
            rule=lambda v: v is None or v > 0,
            text="None or > 0",
            hint="must be > 0 (DAPO: 0.28); None clips at 1 + grpo_clip_range",
        ),
    )
    """Token level: the ratio's ceiling is 1 + this (DAPO's clip-higher: 0.28), the weight's cap for "cispo"; None = grpo_clip_range on both sides."""
    dynamic_sampling: bool = False
    """Token level, sort/add: train only on groups whose replies differ in exact correctness, sampling more prompts to refill (DAPO); none kept: the last batch, unfiltered."""
    max_num_gen_batches: int = setting(4, POSITIVE)
    """Token level, with dynamic_sampling: at most this many batches of train_batch_size prompts are sampled per step."""

    def functions_called(self) -> list[str]:
        after_grpo = self.after_grpo_functions()  # task 14's, in place of the two task-9 ones they replace
        advantages = [] if "compute_rloo_advantages" in after_grpo else ["compute_group_advantages"]
        loss = [] if {"cispo_loss", "gspo_loss", "clip_higher_loss"} & set(after_grpo) else ["grpo_clip_loss"]
        return [*advantages, "masked_mean", "per_token_kl", *loss, *after_grpo, *self.reward_functions()]

    def after_grpo_functions(self) -> list[str]:
        """The functions of rl/after_grpo.py (task 14) that a run with these settings calls; [] for plain GRPO-clip."""
        used = {
            "compute_rloo_advantages": self.advantage == "rloo",
            "cispo_loss": self.loss_type == "cispo",
            "gspo_loss": self.importance_sampling_level == "sequence" and self.loss_type != "cispo",
            "clip_higher_loss": self.grpo_clip_range_high is not None
            and self.loss_type != "cispo"
            and self.importance_sampling_level == "token",
            "filter_groups": self.dynamic_sampling,
        }
        return [name for name, needed in used.items() if needed]

    def relations(self) -> list[Relation]:
        rows = self.replies_per_step()
        return [
            *super().relations(),
            (
                rows % self.grpo_num_minibatches == 0,
                "grpo_num_minibatches",
                self.grpo_num_minibatches,
                f"must divide the {rows} replies per step",
            ),
            (
                self.importance_sampling_level == "token" or self.loss_type == "grpo",
                "importance_sampling_level",
                self.importance_sampling_level,
                f"(GSPO) averages one term per reply, which loss_type={self.loss_type!r} does not; "
                "drop --loss_type (grpo) or --importance_sampling_level",
            ),
            (
                not self.dynamic_sampling or self.task != "sentiment",
                "dynamic_sampling",
                self.dynamic_sampling,
                "keeps groups by exact correctness, which the sentiment task has not; use --task sort or add",
            ),
            (
                not self.dynamic_sampling or not self.reward_model,
                "dynamic_sampling",
                self.dynamic_sampling,
                "filters on the task's correctness, which a run with --reward_model must never see; drop one of them",
            ),
        ]


PAIRS_SUFFIXES = (".jsonl", ".json", ".csv")


def _pairs_file_name(name: str) -> bool:
    return name == "" or Path(name).suffix.lower() in PAIRS_SUFFIXES


@dataclass
class PairsConfig(TrainConfig):
    """Settings of the scripts that learn from preference pairs, ``train_dpo.py`` and ``train_reward_model.py``:
    where the pairs come from (:mod:`rlhf_practice.preferences`). The same settings build the same pairs file,
    which both scripts can read."""

    pairs_file: str = setting(
        "",
        Bound(
            rule=_pairs_file_name,
            text='"" or a .jsonl, .json or .csv file',
            hint="must be a .jsonl, .json or .csv file (or empty: build pairs from the task's reward)",
        ),
    )
    """Your own preference pairs: a .jsonl, .json or .csv file with the string columns prompt, chosen and rejected (TRL's format). Empty: pairs built from the task's reward."""
    pair_prompts: int = setting(2048, POSITIVE)
    """Building pairs: training prompts to sample replies for (never the held-out prompts of sort and add)."""
    pair_samples: int = setting(4, at_least(2, "two replies are the fewest that can be compared"))
    """Building pairs: replies sampled from the starting policy per prompt, scored by the task's reward and ranked."""
    pair_mode: str = setting("all", one_of("all", "best_worst"))
    """Building pairs: "all" (every two replies of a prompt whose rewards differ, the higher one chosen) or "best_worst" (one pair per prompt: its best against its worst reply). Ties are dropped."""
    pairs_dir: str = "pairs"
    """Folder of built pairs: <task>-<hash>.jsonl and a .json beside it with the command and the settings that built it; a run whose settings match reuses the file."""


@dataclass
class DPOConfig(PairsConfig):
    """Settings of ``train_dpo.py`` (task 12: preference pairs from the task's reward, the DPO loss against a frozen reference)."""

    algorithm: ClassVar[str] = "dpo"

    beta: float = setting(0.1, above(0, "0.1 is TRL's default; larger keeps the policy nearer the reference"))
    """beta of the DPO loss -log sigmoid(beta * ((log pi_c - log ref_c) - (log pi_r - log ref_r))): how strongly the policy is held to the reference. TRL's default is 0.1."""
    rounds: int = setting(1, within("[1, 2]", "2 = one round of iterative DPO"))
    """1: train on the pairs built from the starting policy. 2: iterative DPO: after half the steps, new pairs from the current policy, which becomes the reference too."""

    def functions_called(self) -> list[str]:
        return ["reply_logps", "reference_logps", "dpo_loss"]

    def relations(self) -> list[Relation]:
        return [
            *super().relations(),
            (
                self.rounds == 1 or self.pairs_file == "",
                "rounds",
                self.rounds,
                "needs pairs built from the policy; drop --pairs_file (or use --rounds 1)",
            ),
            (
                self.rounds == 1 or self.num_steps >= 2,
                "rounds",
                self.rounds,
                f"splits num_steps ({self.num_steps}) in two; give at least 2 steps",
            ),
        ]


@dataclass
class RewardModelConfig(PairsConfig):
    """Settings of ``train_reward_model.py`` (task 13: a reward model learned from preference pairs ranked by the task's reward, the Bradley-Terry loss)."""

    algorithm: ClassVar[str] = "rm"

    num_pairs: int = setting(0, NOT_NEGATIVE)
    """Training pairs used, taken from the built (or given) pairs after the held-out ones are set aside; 0 = all of them."""
    label_noise: float = setting(0.0, within("[0, 0.5)", "0.5 would be coin flips"))
    """Fraction of the training pairs whose chosen and rejected are swapped (drawn with the seed), as human raters disagree; the held-out pairs keep the task's label."""
    heldout_pairs: int = setting(256, POSITIVE)
    """Pairs set aside to measure eval_accuracy: whole prompts are held out (no prompt is in both sets) until at least this many pairs are."""
    center_rewards_coefficient: float = setting(0.0, at_least(0, "0 = off; TRL's docs suggest 0.01"))
    """TRL's center_rewards_coefficient: adds this times the mean squared score to the loss, which sees only score differences (0 = off)."""
    normalization_samples: int = setting(256, at_least(2, "a standard deviation needs two scores"))
    """Fresh replies sampled from the starting policy (new prompts) to measure eval_gold_correlation and the score mean/std saved in reward_model.json."""
    num_layers: int = setting(0, NOT_NEGATIVE)
    """Transformer blocks of the reward model: the policy's embeddings and first this many blocks (the rest left out), all trained; 0 = all. Task 15's smaller reward models keep 1 (TASKS.md §15.4)."""

    def functions_called(self) -> list[str]:
        return ["get_reward", "reward_loss"]

    def relations(self) -> list[Relation]:
        return [
            *super().relations(),
            (self.lora_r == 0, "lora_r", self.lora_r, "train_reward_model.py trains the whole model; use 0"),
        ]


# The class for each script (algorithm) and --level.
CONFIGS: dict[tuple[str, str], type[TrainConfig]] = {
    ("ppo", "sequence"): PPOConfig,
    ("ppo", "token"): TokenPPOConfig,
    ("grpo", "sequence"): GRPOConfig,
    ("grpo", "token"): TokenGRPOConfig,
    ("dpo", "sequence"): DPOConfig,
    ("rm", "sequence"): RewardModelConfig,
}


def field_bound(cls: type, name: str) -> Bound | None:
    """The bound declared on field ``name`` of ``cls`` (None if it has none)."""
    return next(f.metadata.get("bound") for f in dataclasses.fields(cls) if f.name == name)


def check(config: Settings, prefix: str = "") -> None:
    """The one checker: every field's bound (nested configs too), then the config's ``relations()``.

    Raises :class:`ConfigError` ``name=value problem.`` for the first setting that is out of bounds.
    """
    for f in dataclasses.fields(config):
        name, value = prefix + f.name, getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            check(value, f"{name}.")
            continue
        bound = f.metadata.get("bound")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name}={value!r} must be a finite number.")
        if bound is not None and not bound.accepts(value):
            raise ConfigError(f"{name}={value!r} {bound.problem()}.")
    for ok, name, value, problem in config.relations():
        if not ok:
            raise ConfigError(f"{prefix}{name}={value!r} {problem}.")


# Per task: the defaults a task sets on top of the preset's (fields shared by all algorithms, then
# per-algorithm fields). Measured in TASKS.md §11 (python scripts/experiments.py group_size and the others);
# DPO's on sort (seed 0, 200 steps): best_worst pairs reached a held-out accuracy of about 0.6, "all" pairs
# (many between two wrong replies) about 0.4.
_TASK_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "sort": {
        "common": {"model": ModelConfig(model_name="tiny"), "max_new_tokens": 5, "warmup_steps": 15},
        "grpo": {"train_batch_size": 32, "grpo_group_size": 8, "learning_rate": 5e-4, "num_steps": 150},
        "dpo": {"learning_rate": 5e-4, "num_steps": 200, "pair_mode": "best_worst"},
        "rm": {"pair_mode": "best_worst"},
    },
    "add": {
        "common": {"model": ModelConfig(model_name="tiny"), "max_new_tokens": 6, "warmup_steps": 0},
        "grpo": {"train_batch_size": 16, "grpo_group_size": 8, "learning_rate": 3e-4, "num_steps": 250},
        "dpo": {"learning_rate": 5e-4, "num_steps": 200, "pair_mode": "best_worst"},
        "rm": {"pair_mode": "best_worst"},
    },
}

# Per preset: fields shared by all algorithms, then per-algorithm fields.
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
        "dpo": {"train_batch_size": 64, "learning_rate": 1e-4, "beta": 0.5, "num_steps": 120, "eval_every": 5},
        "rm": {"train_batch_size": 32, "learning_rate": 1e-3, "num_steps": 100, "eval_every": 20, "pair_prompts": 1024},
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
        "dpo": {"train_batch_size": 16, "learning_rate": 1e-6, "num_steps": 200, "eval_every": 10},
        "rm": {"train_batch_size": 16, "learning_rate": 1e-5, "num_steps": 300, "eval_every": 50},
    },
}

ConfigT = TypeVar("ConfigT", bound=TrainConfig)


# With --lora_r > 0 the default learning_rate is this many times full fine-tuning's: the adapter starts at
# zero and holds a small share of the weights, so it needs bigger steps. Measured on the tiny preset (GRPO,
# 80 steps, r = 8; python scripts/experiments.py lora): at full fine-tuning's 2e-4 reward/mean gained ~0.1,
# at 2e-3 as much as full fine-tuning (docs/GUIDE.md, LoRA section). The usual LoRA factor (about 10x).
LORA_LEARNING_RATE_FACTOR = 10


def preset_config(cls: type[ConfigT], preset: str, task: str = "sentiment", lora: bool = False) -> ConfigT:
    """The default ``cls`` (any class of :data:`CONFIGS`) for a resolved preset ("tiny" or "gpt2") and a
    task: the preset's defaults, then the task's own (:data:`_TASK_DEFAULTS`; sentiment has none), then
    with ``lora`` (``--lora_r`` > 0) a learning rate :data:`LORA_LEARNING_RATE_FACTOR` times higher."""
    if preset not in _PRESETS:
        raise ConfigError(f"preset={preset!r} {field_bound(TrainConfig, 'preset').problem()}.")
    layers = [_PRESETS[preset], _TASK_DEFAULTS.get(task, {})]
    overrides = {k: v for layer in layers for part in ("common", cls.algorithm) for k, v in layer.get(part, {}).items()}
    overrides = {k: dataclasses.replace(v) if dataclasses.is_dataclass(v) else v for k, v in overrides.items()}
    config = cls(preset=preset, task=task, **overrides)
    if lora:
        config.learning_rate *= LORA_LEARNING_RATE_FACTOR
    return config


def parse_config(cls: type[TrainConfig], args: list[str] | None = None) -> TrainConfig:
    """Build the config of ``cls.algorithm`` at the ``--level`` given: the preset's and the task's
    defaults (with ``--lora_r`` > 0, LoRA's learning rate), then the flags.

    Every field is a flag (``--train_batch_size 8``, ``--model.model_name gpt2``); ``--help`` lists
    them all with the defaults of the chosen preset and task. ``--preset``, ``--level`` and ``--task``
    are read first: the preset and the task pick the defaults, the level the class (:data:`CONFIGS`),
    so a flag of the other level is one clear error. Prints one line naming the preset. The values are checked once, by
    :meth:`Settings.validate` when the run starts.
    """
    import argparse
    import sys

    import tyro

    args = list(sys.argv[1:] if args is None else args)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--preset", default="auto")
    pre.add_argument("--level", default=cls.level)
    pre.add_argument("--task", default="sentiment")
    pre.add_argument("--lora_r", default="0")
    known = pre.parse_known_args(args)[0]
    if not LEVEL.accepts(known.level):
        raise ConfigError(f"level={known.level!r} {LEVEL.problem()}.")
    if (cls.algorithm, known.level) not in CONFIGS:
        raise ConfigError(
            f"level={known.level!r}: {script_name(cls)} has only --level sequence (one score per reply); drop --level."
        )
    cls = CONFIGS[cls.algorithm, known.level]
    other = _other_level(cls) or cls
    for arg in args:
        name = arg.split("=")[0][2:].replace("-", "_")
        if arg.startswith("--") and name in _field_names(other) - _field_names(cls):
            fix = "add --level token" if other.level == "token" else "drop it, or drop --level token"
            raise ConfigError(f"--{name} is a {other.level}-level setting of train_{cls.algorithm}.py; {fix}.")
    if known.preset == "auto":
        preset = "gpt2" if _cuda_available() else "tiny"
        reason = "CUDA is available" if preset == "gpt2" else "no CUDA device found"
        note = f"preset: {preset} (auto: {reason}; choose with --preset tiny|gpt2)"
    else:
        preset, note = known.preset, f"preset: {known.preset}"
    default = preset_config(cls, preset, known.task, lora=known.lora_r not in ("0", ""))
    config = tyro.cli(cls, args=args, default=default, description=_description(cls), use_underscores=True)
    config.preset = preset
    if not any(a in ("-h", "--help") for a in args):
        print(note, file=sys.stderr)
    return config


def script_name(cls: type[TrainConfig]) -> str:
    """The training script of ``cls``: train_<algorithm>.py (train_reward_model.py for "rm")."""
    return "train_reward_model.py" if cls.algorithm == "rm" else f"train_{cls.algorithm}.py"


def _other_level(cls: type[TrainConfig]) -> type[TrainConfig] | None:
    """The class of the script's other --level; None for a script with one level (train_dpo.py)."""
    return CONFIGS.get((cls.algorithm, "token" if cls.level == "sequence" else "sequence"))


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _description(cls: type[TrainConfig]) -> str:
    """``--help``'s first paragraph: the class's docstring, and the flags that only the other level has."""
    other = _other_level(cls)
    if other is None:
        return cls.__doc__
    only = ", ".join(f"--{f.name}" for f in dataclasses.fields(other) if f.name not in _field_names(cls))
    if not only:
        return cls.__doc__
    if other.level == "token":
        return f"{cls.__doc__} With --level token: {only} (python train_{cls.algorithm}.py --level token --help)."
    return f"{cls.__doc__} Without --level token: {only}."


def flag_table() -> str:
    """Every flag of ``train_ppo.py``, ``train_grpo.py``, ``train_dpo.py`` and ``train_reward_model.py`` as a Markdown table, made from the fields.

    Columns: the flag, its default in each script ("tiny / gpt2" where the presets differ, "-" where
    the script has no such flag), its bound and its help. README.md holds this table.
    """
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for (algorithm, _), cls in CONFIGS.items():
        for name, help_, bound, default in _flag_rows(preset_config(cls, "tiny"), preset_config(cls, "gpt2")):
            row = rows.setdefault((name, help_), {"bound": bound.shown() if bound else ""})
            row.setdefault(algorithm, _SHOWN_DEFAULTS.get(name, default))
    scripts = ("ppo", "grpo", "dpo", "rm")
    header = " | ".join(script_name(CONFIGS[a, "sequence"]) for a in scripts)
    lines = [f"| flag | {header} | bound | help |", "|---|---|---|---|---|---|---|"]
    for (name, help_), row in rows.items():
        cells = [f"`--{name}`", *(row.get(a, "-") for a in scripts), row["bound"], help_]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


_SHOWN_DEFAULTS = {"preset": "auto", "impl": "$RLHF_IMPL, else student"}  # defaults no preset fixes


def _flag_rows(tiny: Settings, gpt2: Settings, prefix: str = "") -> list[tuple[str, str, Bound | None, str]]:
    """(flag name, help, bound, default) of every field, nested ones as "data.max_samples"."""
    helps = _helps(type(tiny))
    out = []
    for f in dataclasses.fields(tiny):
        a, b = getattr(tiny, f.name), getattr(gpt2, f.name)
        if dataclasses.is_dataclass(a):
            out += _flag_rows(a, b, f"{prefix}{f.name}.")
        else:
            shown = [repr(v) if v == "" else str(v) for v in (a, b)]
            out.append((prefix + f.name, helps[f.name], f.metadata.get("bound"), " / ".join(dict.fromkeys(shown))))
    return out


def _helps(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it (the help ``--help`` shows), bases' fields included."""
    helps = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            body = ast.parse(inspect.getsource(klass)).body[0].body
            for field_, doc in zip(body, body[1:]):
                if (
                    isinstance(field_, ast.AnnAssign)
                    and isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                ):
                    helps[field_.target.id] = " ".join(doc.value.value.split())
    return helps


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rlhf_practice.config", description=flag_table.__doc__)
    parser.add_argument("--markdown", action="store_true", required=True, help="print the flag table README.md holds")
    parser.parse_args()
    print(flag_table(), end="")
