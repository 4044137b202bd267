"""Property laws of rlhf_practice/rl/dpo.py: reply_logps, reference_logps and dpo_loss (§12), task 12."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, _Broken, _Override, close, fmt, got, law
from properties.draws import floats, gradcheck, tensor, unchanged
from properties.models import VOCAB, TinyGPT2, changed_in_place, model_laws

NO_GRADIENT["reference_logps"] = "the law: nothing requires grad"

# --- reply_logps and reference_logps (§12.2) ----------------------------------------------------------


@st.composite
def _replies(draw: st.DrawFn, least_reply: int = 1) -> dict:
    """A batch of flush-left rows: prompt, reply, then padding (attention 0, any id)."""
    rows = draw(st.integers(1, 2))
    prompts = draw(st.lists(st.integers(1, 3), min_size=rows, max_size=rows))
    replies = draw(st.lists(st.integers(least_reply, 3), min_size=rows, max_size=rows))
    seq = max(p + r for p, r in zip(prompts, replies)) + draw(st.integers(0, 1))
    ids = draw(st.lists(st.integers(0, VOCAB - 1), min_size=rows * seq, max_size=rows * seq))
    lengths = torch.tensor([p + r for p, r in zip(prompts, replies)])
    return {
        "model": TinyGPT2(draw(st.integers(0, 2))),
        "input_ids": torch.tensor(ids).view(rows, seq),
        "attention_mask": (torch.arange(seq) < lengths[:, None]).long(),
        "prompt_lengths": torch.tensor(prompts),
    }


def _logps(
    fn: Callable, model: torch.nn.Module, ids: torch.Tensor, attention: torch.Tensor, prompts: torch.Tensor
) -> torch.Tensor:
    out = fn(model, ids, attention, prompts)
    if not isinstance(out, torch.Tensor) or out.shape != (ids.shape[0],):
        raise _Broken(f"{got(out)}, expected one number per row, shape ({ids.shape[0]},)")
    return out.detach().double()


def _one_token(fn: Callable, ex: dict) -> str | None:
    model = ex["model"].build()
    ids, prompts = ex["input_ids"], ex["prompt_lengths"]
    for i in range(len(ids)):
        p = int(prompts[i])
        row = ids[i : i + 1, : p + 1]
        out = _logps(fn, model, row, torch.ones_like(row), prompts[i : i + 1])
        with torch.no_grad():
            logits = model(row[:, :p], attention_mask=torch.ones_like(row[:, :p])).logits
            expected = torch.log_softmax(logits[0, -1].double(), -1)[row[0, p]]
        if abs(out.item() - expected.item()) > 1e-4:
            return f"row {i} cut after its first reply token: {fmt(out)}, but the model gives that token log-prob {expected.item():.4g}"
    return None


@law(
    "reply_logps",
    "one_token_reply",
    "the log-prob of a one-token reply is the model's log-probability of that token after the prompt",
    _replies(),
    examples=8,
)
def _(fn, ex):
    return _one_token(fn, ex)


@law(
    "reply_logps",
    "chain_rule",
    "log pi(reply | prompt) = log pi(first reply token | prompt) + log pi(rest of the reply | prompt and that token)",
    _replies(least_reply=2),
    examples=8,
)
def _(fn, ex):
    model = ex["model"].build()
    ids, attention, prompts = ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"]
    whole = _logps(fn, model, ids, attention, prompts)
    rest = _logps(fn, model, ids, attention, prompts + 1)
    for i in range(len(ids)):
        p = int(prompts[i])
        row = ids[i : i + 1, : p + 1]
        first = _logps(fn, model, row, torch.ones_like(row), prompts[i : i + 1])
        if abs(whole[i].item() - first.item() - rest[i].item()) > 1e-4:
            return f"row {i}: {whole[i].item():.4g} for the reply, but {first.item():.4g} + {rest[i].item():.4g} for its first token and the rest"
    return None


model_laws("reply_logps", _replies(), _logps, lambda out: out, "the result", examples=8)


@law(
    "reference_logps",
    "no_gradient",
    "nothing requires grad: the result carries no gradient to the reference model",
    _replies(),
    examples=8,
)
def _(fn, ex):
    model = ex["model"].build()
    out = fn(model, ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    if not isinstance(out, torch.Tensor):
        return got(out)
    return "the result requires grad (a graph back to the reference model was built)" if out.requires_grad else None


@law(
    "reference_logps",
    "deterministic",
    "a reference that arrives in train mode, with dropout, gives the same numbers on every call, those of eval mode",
    _replies(),
    examples=8,
)
def _(fn, ex):
    args = (ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    seed = ex["model"].seed
    calm = _logps(fn, TinyGPT2(seed, False, 0.3).build(), *args)
    first = _logps(fn, TinyGPT2(seed, True, 0.3).build(), *args)
    again = _logps(fn, TinyGPT2(seed, True, 0.3).build(), *args)
    if close(first, calm, 1e-5) and close(again, calm, 1e-5):
        return None
    return f"{fmt(first)} then {fmt(again)} from train mode, {fmt(calm)} from eval mode"


@law(
    "reference_logps",
    "one_token_reply",
    "the log-prob of a one-token reply is the reference's log-probability of that token after the prompt",
    _replies(),
    examples=8,
)
def _(fn, ex):
    return _one_token(fn, ex)


@law(
    "reference_logps",
    "inputs_unchanged",
    "input_ids, attention_mask and prompt_lengths stay unchanged",
    _replies(),
    examples=6,
)
def _(fn, ex):
    return changed_in_place(fn, ex["model"].build(), (ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"]))


# --- dpo_loss (§12.3) ---------------------------------------------------------------------------------

_dpo = st.integers(1, 4).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "policy_chosen_logps": tensor((n,), -20, 0),
            "policy_rejected_logps": tensor((n,), -20, 0),
            "ref_chosen_logps": tensor((n,), -20, 0),
            "ref_rejected_logps": tensor((n,), -20, 0),
            "beta": floats(0.05, 0.5),
            "shift": floats(-5, 5),
            "step": floats(0.1, 3.0),
        }
    )
)
_DPO = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _dpo_call(fn: Callable, ex: dict, **change: torch.Tensor) -> tuple[torch.Tensor, ...]:
    ex = _Override(ex, change)
    out = fn(*(ex[name] for name in _DPO), ex["beta"])
    n = ex["policy_chosen_logps"].shape
    if (
        not isinstance(out, tuple | list)
        or len(out) != 3
        or any(not isinstance(x, torch.Tensor) or x.shape != n for x in out)
    ):
        raise _Broken(f"{got(out)}, expected (losses, chosen_rewards, rejected_rewards), each of shape {tuple(n)}")
    return tuple(x.detach() for x in out)


@law(
    "dpo_loss",
    "policy_equals_reference",
    "when the policy equals the reference every loss is log 2 and every reward 0",
    _dpo,
)
def _(fn, ex):
    losses, chosen, rejected = _dpo_call(
        fn,
        ex,
        ref_chosen_logps=ex["policy_chosen_logps"].clone(),
        ref_rejected_logps=ex["policy_rejected_logps"].clone(),
    )
    zeros = torch.zeros_like(losses)
    if close(losses, zeros + math.log(2)) and close(chosen, zeros) and close(rejected, zeros):
        return None
    return f"losses {fmt(losses)}, rewards {fmt(chosen)} and {fmt(rejected)}"


@law(
    "dpo_loss",
    "loss_of_the_rewards",
    "the rewards are beta-scaled log-ratios and each loss is -log sigmoid(chosen_reward - rejected_reward) of the returned rewards",
    _dpo,
)
def _(fn, ex):
    losses, chosen, rejected = _dpo_call(fn, ex)
    expected = -torch.nn.functional.logsigmoid(chosen - rejected)
    return None if close(losses, expected) else f"losses {fmt(losses)}, rewards {fmt(chosen)} and {fmt(rejected)}"


@law(
    "dpo_loss",
    "log_ratios_only",
    "adding the same constant to a reply's policy and reference log-probs changes nothing (only log-ratios count)",
    _dpo,
)
def _(fn, ex):
    base = _dpo_call(fn, ex)
    c = ex["shift"]
    for side in ("chosen", "rejected"):
        pol, ref = f"policy_{side}_logps", f"ref_{side}_logps"
        out = _dpo_call(fn, ex, **{pol: ex[pol] + c, ref: ex[ref] + c})
        if not all(close(a, b) for a, b in zip(out, base)):
            return f"shifting the {side} reply by {c:.4g}: {[fmt(x) for x in out]} instead of {[fmt(x) for x in base]}"
    return None


@law(
    "dpo_loss",
    "prefers_the_chosen",
    "raising the policy's log-prob of the chosen reply lowers every loss and raises the chosen reward; raising the rejected one raises the loss",
    _dpo,
)
def _(fn, ex):
    losses, chosen, _ = _dpo_call(fn, ex)
    up, up_chosen, _ = _dpo_call(fn, ex, policy_chosen_logps=ex["policy_chosen_logps"] + ex["step"])
    worse, _, _ = _dpo_call(fn, ex, policy_rejected_logps=ex["policy_rejected_logps"] + ex["step"])
    if (up < losses).all() and (up_chosen > chosen).all() and (worse > losses).all():
        return None
    return f"losses {fmt(losses)}; {fmt(up)} with the chosen log-prob raised, {fmt(worse)} with the rejected one raised"


@law(
    "dpo_loss",
    "gradcheck",
    "autograd's gradient of the losses w.r.t. the policy's log-probs equals float64 central differences",
    _dpo,
    examples=10,
)
def _(fn, ex):
    ref_c, ref_r, beta = ex["ref_chosen_logps"], ex["ref_rejected_logps"], ex["beta"]

    def losses(c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        out = fn(c, r, ref_c, ref_r, beta)
        return out[0] if isinstance(out, tuple | list) else out

    return gradcheck(losses, [ex["policy_chosen_logps"], ex["policy_rejected_logps"]], "the policy's log-probs")


@law("dpo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _dpo)
def _(fn, ex):
    return unchanged(fn, (*(ex[name] for name in _DPO), ex["beta"]))
