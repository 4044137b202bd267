"""What a run trains on: a *task* is prompts, a reward computed from prompt and reply, and the model
and tokenizer they need. The RL loops never look inside one: they ask it for batches of prompts and
for the reward of each reply, so the same PPO and GRPO code trains on any task.

``--task sentiment`` (the default, :mod:`rlhf_practice.tasks.sentiment`) continues movie reviews and
rewards positive words. ``--task sort`` and ``--task add`` (:mod:`rlhf_practice.tasks.sort`,
:mod:`rlhf_practice.tasks.add`) have rewards computed from the prompt, a small GPT built in code, a
held-out prompt set and a correct reply for each prompt (:mod:`rlhf_practice.tasks.verifiable`).

The task list is written once, as ``config.TASK_NAMES`` (what ``--task`` accepts): task ``NAME`` is the
:class:`Task` subclass whose ``name`` is ``NAME`` in the module ``rlhf_practice.tasks.NAME``, and
:data:`TASK_CLASSES` is read from those modules. To add a task, write that module and add its name to
``config.TASK_NAMES``; the maintainers' manual lists the steps.
"""

from __future__ import annotations

import importlib

from rlhf_practice.config import TASK_NAMES, TrainConfig
from rlhf_practice.tasks.base import Task


def _task_class(name: str) -> type[Task]:
    """The one :class:`Task` subclass named ``name`` in the module ``rlhf_practice.tasks.<name>``."""
    module = importlib.import_module(f"{__name__}.{name}")
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Task) and value.__dict__.get("name") == name
    ]
    if len(found) != 1:
        raise ImportError(f"{module.__name__} must define one Task subclass with name = {name!r}; found {len(found)}")
    return found[0]


TASK_CLASSES: dict[str, type[Task]] = {name: _task_class(name) for name in TASK_NAMES}


def build_task(config: TrainConfig) -> Task:
    """The task ``config.task`` names (one of config.TASK_NAMES, checked with the config), set up from ``config``."""
    return TASK_CLASSES[config.task](config)


__all__ = ["TASK_CLASSES", "Task", "build_task"]
