"""The interface every task implements: see :class:`Task` and the package docstring."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

import torch

from rlhf_practice.config import TrainConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from rlhf_practice.modeling import PolicyValueModel


class Task(ABC):
    """One task; built from the run's config by :func:`build_task`.

    A prompt batch (what :meth:`prompt_batches` yields) is a dict:

    - ``input_ids``:      LongTensor (B, P), left-padded with the tokenizer's pad token;
    - ``attention_mask``: LongTensor (B, P), 1 on real tokens, 0 on padding;
    - ``prompt_text``:    list of B strings, the prompts as text (what :meth:`reward` receives).
    """

    name: ClassVar[str]
    prompt_length_setting: ClassVar[str]
    """The setting that bounds :attr:`max_prompt_length`, as errors name it (e.g. "data.max_prompt_length")."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config

    def describe(self) -> str:
        """The model and prompts in a few words, for the line a run prints when it starts."""
        return f"model={self.config.model.model_name} | data={self.config.data.dataset_name}"

    def hub_names(self) -> list[str]:
        """Model and dataset names that may have to come from the Hugging Face Hub (none by default)."""
        return []

    @abstractmethod
    def load_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer, set up for generation: left padding and a pad token."""

    @abstractmethod
    def load_policy(self, device: torch.device) -> PolicyValueModel:
        """The policy to start from (a causal LM plus a value head), on ``device``."""

    @property
    @abstractmethod
    def max_prompt_length(self) -> int:
        """The longest prompt, in tokens: with max_new_tokens it must fit the model's positions."""

    @abstractmethod
    def prompt_batches(self, tokenizer: PreTrainedTokenizerBase, batch_size: int, seed: int) -> Iterator[dict]:
        """Batches of ``batch_size`` prompts, forever (see the class docstring); the same seed, the same batches."""

    @abstractmethod
    def reward(self, prompts: Sequence[str], replies: Sequence[str]) -> torch.Tensor:
        """FloatTensor (N,): the reward of each reply (its text up to the first EOS) to its prompt."""

    # Optional: tasks whose rewards are computed from the prompt (sort, add) say more. The defaults
    # (no parts, no held-out set, no known solutions) are the sentiment task's.

    def reward_parts(self, prompts: Sequence[str], replies: Sequence[str]) -> dict[str, torch.Tensor]:
        """The parts the reward is made of, by tag (e.g. ``reward/format``): FloatTensor (N,) each; none by default."""
        return {}

    def heldout_prompts(self) -> list[str]:
        """A fixed set of prompts that :meth:`prompt_batches` never yields, for ``accuracy/heldout``; none by default."""
        return []

    def solutions(self, prompts: Sequence[str]) -> list[str] | None:
        """The correct reply to each prompt (without EOS), for the warm-up and exact match; None if the
        task has no single correct reply (the default)."""
        return None

    def correct(self, prompts: Sequence[str], replies: Sequence[str]) -> torch.Tensor | None:
        """FloatTensor (N,): 1 where the reply is exactly the prompt's correct reply (the exact match that
        ``accuracy/heldout`` counts), else 0; None for a task without one correct reply (sentiment)."""
        solutions = self.solutions(prompts)
        if solutions is None:
            return None
        return torch.tensor([float(r == s) for r, s in zip(replies, solutions)], dtype=torch.float32)
