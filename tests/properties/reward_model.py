"""Property laws of rlhf_practice/rl/reward_model.py: get_reward and reward_loss (§13), task 13."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from properties import _Broken, close, fmt, got, law
from properties.draws import floats, gradcheck, tensor, unchanged
from properties.models import EOS, VOCAB, TinyGPT2, model_laws

# --- get_reward (§13.2) -------------------------------------------------------------------------------


@st.composite
def _sequences(draw: st.DrawFn) -> dict:
    """A batch of flush-left rows: prompt, reply (a finished one ends with the end-of-text id), then padding
    (attention 0, the end-of-text id)."""
    rows = draw(st.integers(1, 3))
    prompts = draw(st.lists(st.integers(1, 3), min_size=rows, max_size=rows))
    replies = draw(st.lists(st.integers(1, 3), min_size=rows, max_size=rows))
    finished = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
    seq = max(p + r for p, r in zip(prompts, replies)) + draw(st.integers(0, 2))
    ids = torch.tensor(draw(st.lists(st.integers(1, VOCAB - 1), min_size=rows * seq, max_size=rows * seq)))
    ids = ids.view(rows, seq)
    lengths = torch.tensor([p + r for p, r in zip(prompts, replies)])
    for i, done in enumerate(finished):
        if done:
            ids[i, lengths[i] - 1] = EOS
    attention = (torch.arange(seq) < lengths[:, None]).long()
    return {
        "model": TinyGPT2(draw(st.integers(0, 2)), score_head=True),
        "input_ids": torch.where(attention > 0, ids, EOS),
        "attention_mask": attention,
        "prompt_lengths": torch.tensor(prompts),
    }


def _scores(fn: Callable, model: torch.nn.Module, ids, attention, prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """(final_scores, sequence_lengths), after checking the outputs' shapes."""
    out = fn(model, ids, attention, prompts)
    rows, seq = ids.shape
    if (
        not isinstance(out, tuple | list)
        or len(out) != 3
        or any(not isinstance(x, torch.Tensor) for x in out)
        or out[0].shape != (rows, seq)
        or out[1].shape != (rows,)
        or out[2].shape != (rows,)
    ):
        raise _Broken(
            f"{got(out)}, expected (reward_logits, final_scores, sequence_lengths) of shapes "
            f"({rows}, {seq}), ({rows},), ({rows},)"
        )
    return out[1].detach().double(), out[2]


@law(
    "get_reward",
    "read_at_the_last_real_token",
    "the score of a row is the score head on the last hidden state of its last real token (the model run on "
    "that row's real tokens alone), and sequence_lengths is that token's position",
    _sequences(),
    examples=10,
)
def _(fn, ex):
    model = ex["model"].build()
    ids, attention, prompts = ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"]
    scores, positions = _scores(fn, model, ids, attention, prompts)
    for i in range(len(ids)):
        n = int(attention[i].sum())
        with torch.no_grad():
            row = ids[i : i + 1, :n]
            hidden = model.transformer(input_ids=row, attention_mask=torch.ones_like(row)).last_hidden_state
            expected = model.score(hidden)[0, -1, 0].double()
        if int(positions[i]) != n - 1 or abs(scores[i].item() - expected.item()) > 1e-4:
            return (
                f"row {i}: its last real token is at position {n - 1}, where the score head gives "
                f"{expected.item():.4g}; you returned sequence_lengths {int(positions[i])} and final_scores "
                f"{scores[i].item():.4g} (both must point at position {n - 1})"
            )
    return None


@law(
    "get_reward",
    "reward_logits_at_every_position",
    "reward_logits is the score head on the batch's last hidden states at every position (the model run once on "
    "the batch with its attention_mask, padding columns included, nothing edited afterwards), and final_scores is "
    "reward_logits read at sequence_lengths",
    _sequences(),
    examples=8,
)
def _(fn, ex):
    model = ex["model"].build()
    ids, attention, prompts = ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"]
    scores, positions = _scores(fn, model, ids, attention, prompts)
    logits = fn(model, ids, attention, prompts)[0].detach().double()
    with torch.no_grad():
        hidden = model.transformer(input_ids=ids, attention_mask=attention).last_hidden_state
        expected = model.score(hidden)[..., 0].double()
    if not close(logits, expected, 1e-4):
        row = int((~torch.isclose(logits, expected, rtol=1e-4, atol=1e-4)).any(1).nonzero()[0])
        return f"row {row}: reward_logits {fmt(logits[row])}, the score head gives {fmt(expected[row])}"
    read = logits[torch.arange(len(ids)), positions.long().clamp(0, ids.shape[1] - 1)]
    if close(scores, read, 1e-5):
        return None
    return f"final_scores {fmt(scores)}, reward_logits at sequence_lengths {fmt(read)}"


def _final(out: object) -> torch.Tensor:
    if not isinstance(out, tuple | list) or len(out) != 3 or not isinstance(out[1], torch.Tensor):
        raise _Broken(f"{got(out)}, expected (reward_logits, final_scores, sequence_lengths)")
    return out[1]


model_laws("get_reward", _sequences(), lambda *call: _scores(*call)[0], _final, "final_scores", examples=10)


# --- reward_loss (§13.3) ------------------------------------------------------------------------------

_pairs = st.integers(1, 5).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "rewards_chosen": tensor((n,), -5, 5),
            "rewards_rejected": tensor((n,), -5, 5),
            "margin": tensor((n,), 0, 2),
            "center_rewards_coefficient": floats(0.001, 0.5),
        }
    )
)


def _loss(fn: Callable, chosen, rejected, margin=None, coefficient=None) -> tuple[torch.Tensor, torch.Tensor]:
    out = fn(chosen, rejected, margin, coefficient)
    if (
        not isinstance(out, tuple | list)
        or len(out) != 2
        or any(not isinstance(x, torch.Tensor) or x.dim() != 0 for x in out)
    ):
        raise _Broken(f"{got(out)}, expected (loss, accuracy), two 0-dim tensors")
    return out[0].detach(), out[1].detach()


@law(
    "reward_loss",
    "equal_scores",
    "when every chosen score equals its rejected one the loss is log 2 and the accuracy 0 (a tie counts as wrong)",
    _pairs,
)
def _(fn, ex):
    scores = ex["rewards_chosen"]
    loss, accuracy = _loss(fn, scores, scores.clone())
    if close(loss, torch.tensor(math.log(2), dtype=loss.dtype)) and accuracy.item() == 0:
        return None
    return f"loss {fmt(loss)}, accuracy {fmt(accuracy)}"


@law(
    "reward_loss",
    "swapping_the_pair",
    "swapping chosen and rejected changes the loss by the mean difference: loss(c, r) - loss(r, c) = -mean(c - r), "
    "and the two accuracies count the pairs that differ",
    _pairs,
)
def _(fn, ex):
    c, r = ex["rewards_chosen"], ex["rewards_rejected"]
    loss, accuracy = _loss(fn, c, r)
    swapped, swapped_accuracy = _loss(fn, r, c)
    differ = (c != r).double().mean()
    if close(loss - swapped, -(c - r).mean()) and close(accuracy + swapped_accuracy, differ):
        return None
    return f"loss {fmt(loss)} and {fmt(swapped)} swapped; accuracy {fmt(accuracy)} and {fmt(swapped_accuracy)} swapped"


@law(
    "reward_loss",
    "margin_shifts_the_chosen",
    "a margin m is the same as lowering the chosen scores by m: loss(c, r, m) = loss(c - m, r)",
    _pairs,
)
def _(fn, ex):
    c, r, m = ex["rewards_chosen"], ex["rewards_rejected"], ex["margin"]
    with_margin, _ = _loss(fn, c, r, m)
    shifted, _ = _loss(fn, c - m, r)
    return None if close(with_margin, shifted) else f"{fmt(with_margin)} with the margin, {fmt(shifted)} shifted"


@law(
    "reward_loss",
    "centring_term",
    "center_rewards_coefficient k adds k * mean((c + r) ** 2) to the loss and leaves the accuracy alone",
    _pairs,
)
def _(fn, ex):
    c, r, k = ex["rewards_chosen"], ex["rewards_rejected"], ex["center_rewards_coefficient"]
    plain, accuracy = _loss(fn, c, r)
    centred, centred_accuracy = _loss(fn, c, r, None, k)
    expected = plain + k * ((c + r) ** 2).mean()
    if close(centred, expected) and close(accuracy, centred_accuracy):
        return None
    return f"{fmt(centred)} with the centring term, expected {fmt(plain)} + {fmt(expected - plain)}"


@law(
    "reward_loss",
    "finite_for_far_apart_scores",
    "float32 scores 200 or more apart the wrong way give a finite loss, about the mean of their differences",
    st.fixed_dictionaries({"gaps": st.lists(floats(200, 400), min_size=1, max_size=4)}),
    examples=6,
)
def _(fn, ex):
    gaps = torch.tensor(ex["gaps"], dtype=torch.float32)
    loss, _ = _loss(fn, -gaps / 2, gaps / 2)
    if torch.isfinite(loss) and abs(loss.item() - gaps.mean().item()) <= 1e-3 * gaps.mean().item():
        return None
    return f"loss {fmt(loss)}, expected about {gaps.mean().item():.4g}"


@law(
    "reward_loss",
    "gradcheck",
    "autograd's gradient of the loss (margin and centring term included) w.r.t. both scores equals float64 "
    "central differences",
    _pairs,
    examples=10,
)
def _(fn, ex):
    m, k = ex["margin"], ex["center_rewards_coefficient"]

    def loss(c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        out = fn(c, r, m, k)
        return out[0] if isinstance(out, tuple | list) else out

    return gradcheck(loss, [ex["rewards_chosen"], ex["rewards_rejected"]], "the scores")


@law(
    "reward_loss",
    "accuracy_ignores_the_margin",
    "the accuracy is the share of pairs with rewards_chosen > rewards_rejected, with or without a margin or the "
    "centring term (they only change the loss)",
    _pairs,
)
def _(fn, ex):
    c, r = ex["rewards_chosen"], ex["rewards_rejected"]
    expected = (c > r).double().mean()
    for margin, k in ((None, None), (ex["margin"], None), (ex["margin"], ex["center_rewards_coefficient"])):
        _, accuracy = _loss(fn, c, r, margin, k)
        if not accuracy.is_floating_point() or not close(accuracy.double(), expected):
            extras = "" if margin is None else " with a margin" + (" and the centring term" if k else "")
            return f"accuracy {fmt(accuracy)}{extras}, expected {fmt(expected)}"
    return None


@law(
    "reward_loss",
    "inputs_unchanged",
    "the inputs stay unchanged and float64 scores give a float64 loss (the accuracy: any float dtype)",
    _pairs,
)
def _(fn, ex):
    names = ("rewards_chosen", "rewards_rejected", "margin", "center_rewards_coefficient")
    return unchanged(fn, tuple(ex[name] for name in names), any_float=(1,))
