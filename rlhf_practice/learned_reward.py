"""A learned reward model as the reward of ``train_ppo.py`` and ``train_grpo.py`` (``--reward_model``, task 13).

The folder is what ``train_reward_model.py`` writes (``<run>/reward_model/``): a
``GPT2ForSequenceClassification`` with one label saved with ``save_pretrained``, its tokenizer, and
``reward_model.json``, whose ``score_mean`` and ``score_std`` are the model's raw score over replies of
the starting policy. A reply's reward is then

    reward = (score - score_mean) / score_std

mean 0 and std 1 over the starting policy's replies, as Ziegler et al. (2019) normalise their reward
model. The score is read with the implementation's ``get_reward`` (``rl/reward_model.py``, TASKS.md
§13.2) on rows packed flush left: the prompt's tokens, the reply's tokens (with its end-of-text token
when it finished), then padding on the right, as in task 12.

Several folders joined by commas make an ensemble (task 15, :class:`RewardEnsemble`): each model's
normalised score, combined by the implementation's ``ensemble_reward`` (``rl/best_of_n.py``) as
``--reward_ensemble`` says.

:func:`check_reward_model` reads the folder's small files (no weights): a wrong path or model is one
line naming ``reward_model`` before anything slow is loaded. :meth:`LearnedReward.load` loads the
weights once the run's tokenizer is there.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from rlhf_practice.course import raised
from rlhf_practice.errors import ConfigError, ModelLoadError, TrainingError
from rlhf_practice.modeling import Generation

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

REWARD_MODEL_JSON = "reward_model.json"
WHERE = "give the folder train_reward_model.py wrote (runs/<run>/reward_model)"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")


@dataclass
class RewardModelFolder:
    """What :func:`check_reward_model` read: the folder, its model config and its normalisation.

    normalization: (score_mean, score_std) from reward_model.json; None when the file is missing.
    record: reward_model.json as it is ({} when missing).
    """

    name: str
    path: Path
    config: PretrainedConfig
    normalization: tuple[float, float] | None
    record: dict

    @property
    def flag(self) -> str:
        return f"reward_model={self.name!r}"


def check_reward_model(name: str, task: str) -> RewardModelFolder:
    """Read the reward-model folder ``name`` without its weights and check it for ``--task task``.

    Raises ModelLoadError (ConfigError for a model of another task), one line naming ``reward_model``,
    when the path is missing or not a folder, holds no config.json, holds no sequence-classification
    model, a head of more than one label, or a reward_model.json that cannot be read."""
    from transformers import AutoConfig

    flag = f"reward_model={name!r}"
    path = Path(name).expanduser()
    if not path.exists():
        raise ModelLoadError(f"{flag}: no such folder; {WHERE}.")
    if not path.is_dir():
        raise ModelLoadError(f"{flag} is a file, not a folder; {WHERE}.")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{flag} holds no config.json, so no saved model; {WHERE}.")
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"{flag}: its config.json could not be read ({_first_line(err)}); {WHERE}.") from err
    architectures = list(getattr(config, "architectures", None) or [])
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        what = f"a {architectures[0]}" if architectures else "a model of no named class"
        raise ModelLoadError(f"{flag} holds {what}, not a sequence-classification model (a policy folder?); {WHERE}.")
    if config.num_labels != 1:
        raise ModelLoadError(
            f"{flag}: its head has {config.num_labels} labels, a reward model has one score (num_labels=1); {WHERE}."
        )
    record: dict = {}
    normalization = None
    sidecar = path / REWARD_MODEL_JSON
    if sidecar.is_file():
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
            mean, std = float(record["score_mean"]), float(record["score_std"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModelLoadError(
                f"{flag}: its {REWARD_MODEL_JSON} could not be read ({type(err).__name__}: {_first_line(err)}); "
                "it needs the numbers score_mean and score_std, as train_reward_model.py writes them."
            ) from err
        if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
            raise ModelLoadError(
                f"{flag}: its {REWARD_MODEL_JSON} has score_mean={mean}, score_std={std}; "
                "score_std must be a positive number (train the reward model again)."
            )
        if record.get("task", task) != task:
            raise ConfigError(
                f"{flag} was trained for --task {record['task']} ({REWARD_MODEL_JSON}), this run is --task {task}; "
                f"give a reward model of task {task}, or --task {record['task']}."
            )
        normalization = (mean, std)
    return RewardModelFolder(name, path, config, normalization, record)


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def pack_flush_left(generation: Generation, pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows of ``generation`` as a reward model reads them (task 12's layout).

    ``generation`` holds left-padded prompts (P columns) and right-padded replies (T columns) whose
    ``response_mask`` covers each reply up to and including its first EOS. Each row becomes its prompt's
    real tokens, then its reply's real tokens (the EOS kept when the reply ended), then ``pad_token_id``.

    Returns:
        input_ids: (B, S) long, S = the longest row's real tokens
        attention_mask: (B, S) long, 1 on real tokens, flush left
        prompt_lengths: (B,) long, each row's prompt tokens
    """
    p = generation.prompt_length
    mask = torch.cat([generation.attention_mask[:, :p].long(), generation.response_mask.long()], dim=1)  # (B, L)
    order = torch.sort(1 - mask, dim=1, stable=True).indices  # real tokens first, each part in its order
    packed_mask = mask.gather(1, order)
    width = max(int(packed_mask.sum(dim=1).max()), 1)
    packed_mask = packed_mask[:, :width]
    input_ids = generation.sequences.gather(1, order)[:, :width].masked_fill(packed_mask == 0, pad_token_id)
    return input_ids, packed_mask, mask[:, :p].sum(dim=1)


class LearnedReward:
    """A frozen reward model in eval mode on the run's device, and the normalisation of its score."""

    def __init__(self, folder: RewardModelFolder, model: PreTrainedModel, pad_token_id: int):
        self.folder = folder
        self.model = model
        self.pad_token_id = pad_token_id

    @classmethod
    def load(cls, folder: RewardModelFolder, tokenizer: PreTrainedTokenizerBase, device: torch.device) -> LearnedReward:
        """Load the weights of a checked folder onto ``device`` (float32, eval mode, no gradients), after
        checking that its vocabulary is ``tokenizer``'s (the reward model reads the policy's token ids)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging

        flag = folder.flag
        mismatch = folder.config.vocab_size < len(tokenizer)
        if not mismatch and any((folder.path / f).is_file() for f in TOKENIZER_FILES):
            try:
                own = AutoTokenizer.from_pretrained(folder.path)
            except (OSError, ValueError) as err:
                raise ModelLoadError(f"{flag}: its tokenizer could not be read ({_first_line(err)}); {WHERE}.") from err
            mismatch = own.get_vocab() != tokenizer.get_vocab()
        if mismatch:
            raise ModelLoadError(
                f"{flag}: its vocabulary ({folder.config.vocab_size} tokens) is not this run's tokenizer's "
                f"({len(tokenizer)} tokens); train the reward model from this run's policy (same --preset and "
                "--model.model_name)."
            )
        hf_logging.disable_progress_bar()
        try:
            model = AutoModelForSequenceClassification.from_pretrained(folder.path, dtype=torch.float32)
        except (OSError, ValueError) as err:
            raise ModelLoadError(f"{flag}: the model could not be loaded ({_first_line(err)}); {WHERE}.") from err
        if not isinstance(getattr(model, "score", None), torch.nn.Module):
            raise ModelLoadError(
                f"{flag} holds a {type(model).__name__}, which has no score head as GPT2ForSequenceClassification "
                f"has; {WHERE}."
            )
        model.to(device).eval().requires_grad_(False)
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else tokenizer.pad_token_id
        return cls(folder, model, int(pad))

    def describe(self) -> str:
        """One line for the start of a run: which model, and how its score is normalised."""
        if self.folder.normalization is None:
            how = f"raw score (no {REWARD_MODEL_JSON}: not normalised)"
        else:
            mean, std = self.folder.normalization
            how = f"(score - {mean:.4g}) / {std:.4g} from {REWARD_MODEL_JSON}"
        return f"reward: the learned model in {self.folder.name}, {how}; the task's reward is logged as reward/gold"

    def score(self, generation: Generation, reward_model: ModuleType) -> torch.Tensor:
        """(N,) float32: the normalised score of each reply, read by ``reward_model.get_reward`` (the
        implementation's rl/reward_model.py) on the rows packed flush left (:func:`pack_flush_left`)."""
        input_ids, attention_mask, prompt_lengths = pack_flush_left(generation, self.pad_token_id)
        with torch.no_grad():
            try:
                _, scores, _ = reward_model.get_reward(self.model, input_ids, attention_mask, prompt_lengths)
            except NotImplementedError:
                raise
            except Exception as err:  # the implementation's own mistake: one line, the logs so far kept
                raise raised("get_reward", err, f"scoring the replies with {self.folder.name}") from err
        if scores.shape != (len(generation),):
            raise TrainingError(
                f"get_reward returned final_scores of shape {tuple(scores.shape)}, not ({len(generation)},): "
                "one score per sequence (TASKS.md §13.2)."
            )
        scores = scores.detach().float()
        if self.folder.normalization is not None:
            mean, std = self.folder.normalization
            scores = (scores - mean) / std
        return scores


class RewardEnsemble:
    """The reward a run trains against: one learned model, or k of them whose normalised scores the
    implementation's ``ensemble_reward`` combines (task 15; ``mode`` and ``uncertainty_coef`` as its
    arguments)."""

    def __init__(self, members: list[LearnedReward], mode: str, uncertainty_coef: float):
        self.members = members
        self.mode = mode
        self.uncertainty_coef = uncertainty_coef

    def describe(self, reward: dict | None = None) -> str:
        """The line(s) for the start of a run; with ``reward`` (the run's reward settings), a note for each
        model whose pairs were labelled by other settings (its reward_model.json's ``reward``): then the
        run's reward/gold is not the annotator the model learned from."""
        lines = [m.describe() for m in self.members]
        for m in self.members:
            labelled = m.folder.record.get("reward")
            if reward is not None and isinstance(labelled, dict):
                differ = {k: v for k, v in labelled.items() if reward.get(k, v) != v}
                if differ:
                    now = ", ".join(f"--reward.{k} {reward[k]}" for k in differ)
                    then = ", ".join(f"--reward.{k} {v}" for k, v in differ.items())
                    lines.append(
                        f"note: {m.folder.name} learned from pairs labelled with {then}; this run's reward/gold "
                        f"uses {now} (add the same flags to compare with the annotator it learned from)"
                    )
        if len(self.members) > 1:
            how = f"mode {self.mode!r}" + f", uncertainty_coef {self.uncertainty_coef:g}" * (self.mode == "uwo")
            lines.append(f"reward: ensemble_reward of the {len(self.members)} models above, {how}")
        return "\n".join(lines)

    def notes(self) -> dict:
        """What summary.json records of the models."""
        records = [{"folder": m.folder.name, **m.folder.record} for m in self.members]
        if len(records) == 1:
            return records[0]
        return {"ensemble": self.mode, "uncertainty_coef": self.uncertainty_coef, "models": records}

    def score(self, generation: Generation, impl: ModuleType) -> torch.Tensor:
        """(N,) float32: each member's normalised score (:meth:`LearnedReward.score`), combined by
        ``impl.best_of_n.ensemble_reward`` when there are several."""
        return self.combine(torch.stack([m.score(generation, impl.reward_model) for m in self.members]), impl)

    def combine(self, scores: torch.Tensor, impl: ModuleType) -> torch.Tensor:
        """(N,) float32: the reward of N replies from the members' normalised scores (k, N): the one model's row, or
        for several ``impl.best_of_n.ensemble_reward`` of them."""
        if len(scores) == 1:
            return scores[0]
        with torch.no_grad():
            try:
                combined = impl.best_of_n.ensemble_reward(scores, self.mode, self.uncertainty_coef)
            except NotImplementedError:
                raise
            except Exception as err:
                raise raised("ensemble_reward", err, "combining the models' scores") from err
        if combined.shape != (scores.shape[1],):
            raise TrainingError(
                f"ensemble_reward returned a tensor of shape {tuple(combined.shape)}, not ({scores.shape[1]},): "
                "one reward per reply, combined over the models (TASKS.md §15.5)."
            )
        return combined.detach().float()
