"""What a run trains on: a *task* is prompts, a reward computed from prompt and reply, and the model
and tokenizer they need. The RL loops never look inside one: they ask it for batches of prompts and
for the reward of each reply, so the same PPO and GRPO code trains on any task.

``--task sentiment`` (the default, :mod:`rlhf_practice.tasks.sentiment`) continues movie reviews and
rewards positive words. ``--task sort`` and ``--task add`` (:mod:`rlhf_practice.tasks.sort`,
:mod:`rlhf_practice.tasks.add`) have rewards computed from the prompt, a small GPT built in code, a
held-out prompt set and a correct reply for each prompt (:mod:`rlhf_practice.tasks.verifiable`). To add a task, write a subclass of :class:`Task` in a module of this package,
add it to :data:`TASK_CLASSES` and its name to ``config.TASK_NAMES``; README.md (maintainers) lists the steps.
"""

from __future__ import annotations

from rlhf_practice.config import TrainConfig
from rlhf_practice.tasks.add import AddTask
from rlhf_practice.tasks.base import Task
from rlhf_practice.tasks.sentiment import SentimentTask
from rlhf_practice.tasks.sort import SortTask

TASK_CLASSES: dict[str, type[Task]] = {cls.name: cls for cls in (SentimentTask, SortTask, AddTask)}


def build_task(config: TrainConfig) -> Task:
    """The task ``config.task`` names (one of config.TASK_NAMES, checked with the config), set up from ``config``."""
    return TASK_CLASSES[config.task](config)


__all__ = ["TASK_CLASSES", "Task", "build_task"]
