"""What the verifiable tasks (``--task sort``, ``--task add``) share: rewards computed from the prompt,
a character-level tokenizer and a small GPT-2 built in code, a fixed held-out prompt set, and the
correct reply to every prompt (for the supervised warm-up and for exact match).

Nothing is downloaded and nothing large is stored: the vocabulary is a dozen symbols, the model
(:data:`MODEL_SIZE`, about 100k parameters) starts from random weights drawn from the run's seed.
It is the same class as the sentiment task's GPT-2 (``GPT2LMHeadModel``), so sampling, scoring,
``save_pretrained`` and the token level work unchanged.
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

import torch

from rlhf_practice.config import TrainConfig
from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
from rlhf_practice.tasks.base import Task

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
VOCABULARY = [PAD, EOS, UNK, *"0123456789", "+", "=", ":", ANSWER_OPEN, ANSWER_CLOSE]
"""Every token of both tasks: one symbol each, the two answer tags being one token each."""
MODEL_SIZE = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 32, "tie_word_embeddings": False}
"""The small GPT-2 of the verifiable tasks: 2 layers, width 64, 4 heads, about 100k parameters. The
output layer is its own (GPT-2 ties it to the input embeddings): on sort, the untied model learned
faster in the warm-up and in RL (measured on seeds 0 and 2)."""
HELDOUT_SEED = 12345
"""The held-out prompts are drawn with this seed, whatever the run's: every run is tested on the same set."""


def build_tokenizer() -> PreTrainedTokenizerBase:
    """A character-level tokenizer over :data:`VOCABULARY` (the answer tags are one token each), as a
    ``PreTrainedTokenizerFast``: left padding, ``<pad>`` and ``<eos>``; decoding joins tokens without spaces."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({token: i for i, token in enumerate(VOCABULARY)}, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"</?answer>|."), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, eos_token=EOS, unk_token=UNK, padding_side="left"
    )


def build_policy(tokenizer: PreTrainedTokenizerBase, device: torch.device) -> PolicyValueModel:
    """A new GPT-2 of :data:`MODEL_SIZE` with random weights (from torch's seed) and a value head."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        **MODEL_SIZE,
    )
    return PolicyValueModel(GPT2LMHeadModel(config)).to(device)


class VerifiableTask(Task):
    """A task whose prompts are drawn at random, whose every prompt has one correct reply, and whose
    reward is computed from prompt and reply. Subclasses say how to draw a prompt, what its correct
    reply is, and how a reply is scored."""

    prompt_length_setting = "the task's prompt length"
    heldout_size: ClassVar[int] = 256
    max_prompt_tokens: ClassVar[int]

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        rng = random.Random(HELDOUT_SEED)
        heldout: dict[str, None] = {}  # insertion-ordered set
        while len(heldout) < self.heldout_size:
            heldout[self.draw_prompt(rng)] = None
        self._heldout = list(heldout)

    @abstractmethod
    def draw_prompt(self, rng: random.Random) -> str:
        """One prompt drawn at random with ``rng`` (held-out prompts included)."""

    @abstractmethod
    def solution(self, prompt: str) -> str:
        """The correct reply to ``prompt`` (without the EOS)."""

    def describe(self) -> str:
        name = self.config.model.model_name
        model = "a small GPT-2 from scratch (2 layers, width 64)" if name == "tiny" else name
        return f"model={model} | prompts drawn at random, {self.heldout_size} held out"

    def load_tokenizer(self) -> PreTrainedTokenizerBase:
        name = self.config.model.model_name
        return build_tokenizer() if name == "tiny" else load_tokenizer(name)

    def load_policy(self, device: torch.device) -> PolicyValueModel:
        model = self.config.model
        if model.model_name == "tiny":
            return build_policy(build_tokenizer(), device)
        return PolicyValueModel.from_pretrained(model.model_name, device, model.value_head_init, mixed_precision=False)

    @property
    def max_prompt_length(self) -> int:
        return self.max_prompt_tokens

    def heldout_prompts(self) -> list[str]:
        return list(self._heldout)

    def solutions(self, prompts: Sequence[str]) -> list[str]:
        return [self.solution(p) for p in prompts]

    def training_prompts(self, rng: random.Random) -> Iterator[str]:
        """Prompts drawn with ``rng`` forever, the held-out ones skipped."""
        heldout = set(self._heldout)
        while True:
            prompt = self.draw_prompt(rng)
            if prompt not in heldout:
                yield prompt

    def prompt_batches(self, tokenizer: PreTrainedTokenizerBase, batch_size: int, seed: int) -> Iterator[dict]:
        prompts = self.training_prompts(random.Random(seed))
        while True:
            texts = [next(prompts) for _ in range(batch_size)]
            encoded = tokenizer(texts, padding=True, return_tensors="pt")
            yield {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask, "prompt_text": texts}
