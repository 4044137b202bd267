"""The task interface: what the training loops ask of a task, checked on the sentiment task."""

from __future__ import annotations

import pytest
import torch

from rlhf_practice.config import TASK_NAMES, PPOConfig, preset_config
from rlhf_practice.errors import ConfigError
from rlhf_practice.reward import build_reward
from rlhf_practice.tasks import TASK_CLASSES, Task, build_task


def test_every_task_implements_the_interface() -> None:
    for name, cls in TASK_CLASSES.items():
        assert issubclass(cls, Task) and cls.name == name and not cls.__abstractmethods__
        assert isinstance(cls.prompt_length_setting, str), f"{name}: say which setting bounds the prompt length"


def test_the_config_offers_exactly_the_registered_tasks() -> None:
    assert TASK_NAMES == tuple(TASK_CLASSES)


def test_an_unknown_task_is_one_config_error() -> None:
    config = preset_config(PPOConfig, "tiny")
    config.task = "sorting"
    with pytest.raises(ConfigError, match=r"^task='sorting' is unknown; use"):
        config.validate()


def test_sentiment_batches_are_left_padded_and_repeatable() -> None:
    config = preset_config(PPOConfig, "tiny")
    config.data.max_samples = 256
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    first, again = (next(task.prompt_batches(tokenizer, 8, seed=5)) for _ in range(2))
    assert first["input_ids"].shape == first["attention_mask"].shape and first["input_ids"].shape[0] == 8
    assert len(first["prompt_text"]) == 8 and torch.equal(first["input_ids"], again["input_ids"])
    assert (first["attention_mask"][:, -1] == 1).all(), "prompts are left-padded: the last column is real"
    assert first["attention_mask"].sum(dim=1).max() <= task.max_prompt_length


def test_sentiment_reward_scores_the_reply_not_the_prompt() -> None:
    task = build_task(preset_config(PPOConfig, "tiny"))
    replies = ["a great and wonderful film", "dull and boring", "it was a film"]
    rewards = task.reward(["the worst, awful, terrible"] * 3, replies)
    assert rewards.dtype == torch.float32 and rewards.tolist() == build_reward()(replies).tolist()
