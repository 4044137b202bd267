"""The tiny GPT-2s that the laws of tasks 12 and 13 run (tests/properties/dpo.py and reward_model.py), and the laws
that reply_logps and get_reward both obey: each reads a number per row from a model and a batch of flush-left rows."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from properties import close, fmt, law
from properties.draws import _pad

VOCAB = 6
EOS = 0  # end-of-text and padding, as GPT-2 pads
BATCH = ("input_ids", "attention_mask", "prompt_lengths")
_MODELS: dict[tuple[bool, int, float], torch.nn.Module] = {}  # (score head, seed, dropout): built once, copied


@dataclass(frozen=True)
class TinyGPT2:
    """A one-layer GPT-2 over a vocabulary of 6 (id 0 is end-of-text and padding), built from a seed: a language
    model, or with ``score_head`` a GPT2ForSequenceClassification with one label (a reward model)."""

    seed: int
    train: bool = False
    dropout: float = 0.0
    score_head: bool = False

    def build(self) -> torch.nn.Module:
        """A fresh copy (the function under test may change the model's mode or parameters)."""
        key = (self.score_head, self.seed, self.dropout)
        if key not in _MODELS:
            _MODELS[key] = self._new()
        return copy.deepcopy(_MODELS[key]).train(self.train)

    def _new(self) -> torch.nn.Module:
        from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=VOCAB, n_positions=16, n_embd=8, n_layer=1, n_head=2, num_labels=1, bos_token_id=EOS,
            eos_token_id=EOS, pad_token_id=EOS, resid_pdrop=self.dropout, embd_pdrop=self.dropout,
            attn_pdrop=self.dropout,
        )  # fmt: skip
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            if not self.score_head:
                return GPT2LMHeadModel(config)
            model = GPT2ForSequenceClassification(config)
            with torch.no_grad():
                model.score.weight.normal_(0, 1.0)  # scores that differ clearly from position to position
        return model

    def __repr__(self) -> str:
        head = " with a score head" if self.score_head else ""
        return f"tiny GPT-2{head} (seed {self.seed}, {'train' if self.train else 'eval'} mode)"


def changed_in_place(fn: Callable, model: torch.nn.Module, args: tuple) -> str | None:
    """Call ``fn(model, *args)`` on a batch (:data:`BATCH`); the first input it changed in place, else None."""
    before = [a.clone() for a in args]
    fn(model, *args)
    changed = [name for name, a, b in zip(BATCH, args, before) if not torch.equal(a, b)]
    return f"{changed[0]} was changed in place" if changed else None


def model_laws(
    function: str, inputs: st.SearchStrategy, numbers: Callable, result: Callable, what: str, examples: int
) -> None:
    """The laws reply_logps and get_reward both obey, registered for ``function``: other padding changes nothing,
    the model's mode and the inputs stay unchanged, and the gradient w.r.t. the model's parameters is right.
    ``inputs`` draws a :class:`TinyGPT2` ("model") and a batch (:data:`BATCH`); ``numbers(fn, model, *batch)``
    is the function's number per row (float64, detached; it raises ``_Broken`` on an unusable result);
    ``result(out)`` is the tensor of ``fn``'s result that carries the gradient, ``what`` its name in the
    messages; ``examples``: the padding law's."""

    @law(
        function,
        "padding_changes_nothing",
        "the ids under padding (attention_mask 0, the end-of-text id included) and extra padding columns change nothing",
        st.fixed_dictionaries({"ex": inputs, "fill": st.integers(0, VOCAB - 1)}),
        examples=examples,
    )
    def _(fn, ex):
        e = ex["ex"]
        model = e["model"].build()
        ids, attention, prompts = (e[name] for name in BATCH)
        base = numbers(fn, model, ids, attention, prompts)
        other = torch.where(attention > 0, ids, ex["fill"])
        padded = numbers(fn, model, _pad(other, 2, ex["fill"]).long(), _pad(attention, 2).long(), prompts)
        return None if close(padded, base, 1e-5) else f"{fmt(padded)} with other padding, {fmt(base)} before"

    @law(
        function,
        "mode_and_inputs_unchanged",
        "the model stays in the mode it comes in (train or eval) and the inputs stay unchanged",
        st.fixed_dictionaries({"ex": inputs, "train": st.booleans()}),
        examples=8,
    )
    def _(fn, ex):
        e = ex["ex"]
        model = dataclasses.replace(e["model"], train=ex["train"], dropout=0.1).build()
        changed = changed_in_place(fn, model, tuple(e[name] for name in BATCH))
        if model.training != ex["train"]:
            return f"the model came in {'train' if ex['train'] else 'eval'} mode and left in the other"
        return changed

    @law(
        function,
        "gradient",
        f"the gradient of {what} w.r.t. the model's parameters matches central differences along a random "
        "direction (float32)",
        inputs,
        examples=6,
    )
    def _(fn, ex):
        model = ex["model"].build()
        args = tuple(ex[name] for name in BATCH)
        params = list(model.parameters())
        out = result(fn(model, *args))
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return f"{what} carries no gradient to the model's parameters"
        grads = torch.autograd.grad(out.sum(), params, allow_unused=True)
        gen = torch.Generator().manual_seed(ex["model"].seed)
        direction = [torch.randn(p.shape, generator=gen) for p in params]
        norm = math.sqrt(sum((d**2).sum().item() for d in direction))
        direction = [d / norm for d in direction]  # a unit step: the function is close to linear over h
        slope = sum((g * d).sum() for g, d in zip(grads, direction) if g is not None).item()
        h = 1e-2
        with torch.no_grad():
            values = []
            for sign in (1, -1):
                for p, d in zip(params, direction):
                    p.add_(sign * h * d)
                values.append(result(fn(model, *args)).sum().item())
                for p, d in zip(params, direction):
                    p.sub_(sign * h * d)
        numerical = (values[0] - values[1]) / (2 * h)
        if abs(slope - numerical) > 2e-2 * max(1.0, abs(numerical)):
            return f"autograd's directional derivative {slope:.4g}, central differences {numerical:.4g}"
        return None
