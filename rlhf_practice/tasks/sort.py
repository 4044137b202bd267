"""The sort task (``--task sort``): the prompt is n = 4 random digits and a colon, ``3141:``; the
correct reply is the same digits in ascending order, ``1134``, then EOS.

Reward (TASKS.md §11): the share of positions at which the reply holds the sorted digit,

    reward = #{ i < n : reply[i] == sorted(prompt)[i] } / max(n, len(reply))        in [0, 1]

(the lecture's position-matching reward of task 10, divided by n; a reply longer than n, one that
does not stop, is divided by its length, so that stopping after n digits pays). Exact match, the reply
being the sorted digits and nothing else, is what ``accuracy/heldout`` counts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from rlhf_practice.tasks.verifiable import VerifiableTask

NUM_DIGITS = 4


class SortTask(VerifiableTask):
    """Sort n = 4 digits; the reward counts the positions that hold the right digit."""

    name = "sort"
    max_prompt_tokens = NUM_DIGITS + 1

    def draw_prompt(self, rng: random.Random) -> str:
        return "".join(rng.choice("0123456789") for _ in range(NUM_DIGITS)) + ":"

    def solution(self, prompt: str) -> str:
        return "".join(sorted(prompt.rstrip(":")))

    def reward(self, prompts: Sequence[str], replies: Sequence[str]) -> torch.Tensor:
        scores = []
        for prompt, reply in zip(prompts, replies):
            target = self.solution(prompt)
            scores.append(sum(a == b for a, b in zip(reply, target)) / max(len(target), len(reply)))
        return torch.tensor(scores, dtype=torch.float32)
