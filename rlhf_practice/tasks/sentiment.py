"""The sentiment task (the default): continue the beginning of a movie review; the reward is the
rule-based sentiment score of the reply (:mod:`rlhf_practice.reward`), in [-1, 1].

Prompts come from ``config.data`` (the built-in corpus, IMDB, or a local file: :mod:`rlhf_practice.data`),
the policy and tokenizer from ``config.model.model_name``, the reward's terms from ``config.reward``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import torch

from rlhf_practice.config import TrainConfig
from rlhf_practice.data import build_prompt_dataloader, infinite_batches
from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
from rlhf_practice.reward import build_reward
from rlhf_practice.tasks.base import Task

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class SentimentTask(Task):
    """Reviews in, positive continuations rewarded; the reply alone is scored (the prompt is not)."""

    name = "sentiment"
    prompt_length_setting = "data.max_prompt_length"

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        self.reward_fn = build_reward(config.reward)

    def hub_names(self) -> list[str]:
        return [self.config.model.model_name, self.config.data.dataset_name]

    def load_tokenizer(self) -> PreTrainedTokenizerBase:
        return load_tokenizer(self.config.model.model_name)

    def load_policy(self, device: torch.device) -> PolicyValueModel:
        model = self.config.model
        return PolicyValueModel.from_pretrained(
            model.model_name, device, model.value_head_init, self.config.mixed_precision
        )

    @property
    def max_prompt_length(self) -> int:
        return self.config.data.max_prompt_length

    def prompt_batches(self, tokenizer: PreTrainedTokenizerBase, batch_size: int, seed: int) -> Iterator[dict]:
        return infinite_batches(build_prompt_dataloader(self.config.data, tokenizer, batch_size, seed))

    def reward(self, prompts: Sequence[str], replies: Sequence[str]) -> torch.Tensor:
        return self.reward_fn(replies)
