"""The addition task (``--task add``): the prompt is ``a+b=`` with a, b in [0, 49]; the correct reply
is ``<answer>S</answer>`` with S = a + b, then EOS.

Reward (TASKS.md §11), seed 002's scheme: a small format reward plus an answer reward,

    format = (tags in place) / 2      "<answer>" opening the reply, "</answer>" closing it
    answer = 1 if the first number in the reply is a + b, else 0
    reward = 0.4 * format + answer    (0.2 per tag in place)

``reward/format`` and ``reward/answer`` log the two scores (each in [0, 1]) averaged over the step's replies.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import torch

from rlhf_practice.tasks.verifiable import ANSWER_CLOSE, ANSWER_OPEN, VerifiableTask

MAX_OPERAND = 49  # sums below 100: SFT learns them in a few hundred steps, chance almost never hits one
FORMAT_WEIGHT = 0.4  # 0.2 for each of the two tags in place


def format_score(reply: str) -> float:
    """Half a point for ``<answer>`` opening the reply and half for ``</answer>`` closing it."""
    return (reply.startswith(ANSWER_OPEN) + reply.endswith(ANSWER_CLOSE)) / 2


def answer_score(prompt: str, reply: str) -> float:
    """1 if the first run of digits in ``reply`` is the sum that ``prompt`` ("a+b=") asks for, else 0."""
    a, b = prompt.rstrip("=").split("+")
    number = re.search(r"\d+", reply)
    return float(number is not None and number.group() == str(int(a) + int(b)))


class AddTask(VerifiableTask):
    """Add two numbers below 50; the reply's format and its sum are scored separately."""

    name = "add"
    max_prompt_tokens = 2 * len(str(MAX_OPERAND)) + 2

    def draw_prompt(self, rng: random.Random) -> str:
        return f"{rng.randint(0, MAX_OPERAND)}+{rng.randint(0, MAX_OPERAND)}="

    def solution(self, prompt: str) -> str:
        a, b = prompt.rstrip("=").split("+")
        return f"{ANSWER_OPEN}{int(a) + int(b)}{ANSWER_CLOSE}"

    def reward_parts(self, prompts: Sequence[str], replies: Sequence[str]) -> dict[str, torch.Tensor]:
        return {
            "reward/format": torch.tensor([format_score(r) for r in replies], dtype=torch.float32),
            "reward/answer": torch.tensor([answer_score(p, r) for p, r in zip(prompts, replies)], dtype=torch.float32),
        }

    def reward(self, prompts: Sequence[str], replies: Sequence[str]) -> torch.Tensor:
        parts = self.reward_parts(prompts, replies)
        return FORMAT_WEIGHT * parts["reward/format"] + parts["reward/answer"]
