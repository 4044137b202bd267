"""The grading book of rlhf_practice/rl/dpo.py (task 12): reply_logps and reference_logps (TASKS.md §12.2) and
dpo_loss (§12.3).

For each graded function, in the order of the course table (rlhf_practice.course.GRADED): the builder of its
cases (registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`), so that a function's whole grading
story is in one place. Written once, read by :func:`instructor.cases.build_cases` and
:data:`instructor.mistakes.CATALOG`, which import this module only when they need its functions.
"""

from __future__ import annotations

import torch

from instructor.book._gpt2_inputs import _batch, _padded_more, _random_rows, _tiny_gpt2
from instructor.cases import DTYPES, F64, _adder, _grad, _name, _show, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong
from rlhf_practice.checks import build_model, run_case

# ================ the inputs of reply_logps and reference_logps =====================================================
#
# Tiny GPT-2s as data and flush-left batches (instructor.book._gpt2_inputs, shared with task 13). Most case models
# pad with the end-of-text id, as GPT-2 does (EOS = pad = 15), so that a function telling padding by the token id
# gets a wrong number.


def _parameter_count(model: dict) -> int:
    return sum(p.numel() for p in build_model(model).parameters())


# The rows of the §12.2 table: a finished reply with padding after it, a reply that is only its end-of-text
# token, and an unfinished reply that fills its row.
REPLY_ROWS = [(3, 4, True), (2, 1, True), (4, 5, False)]


# ================ reply_logps (TASKS.md §12.2) ======================================================================

# --- its cases


@cases_of("reply_logps")
def reply_logps_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "reply_logps", fresh)

    def add_model(id: str, what: str, model: dict, batch: list, **extra) -> None:
        add(id, what, [("model", model), *batch], **extra)

    model = _tiny_gpt2(g)
    batch = _batch(g, REPLY_ROWS, 9)
    add_model("eos_is_pad", "reply_logps on 3 rows whose padding has the end-of-text id (as GPT-2 pads)", model, batch)
    padded = _padded_more(batch, 4)
    add_model(
        "more_padding_changes_nothing",
        "reply_logps on the same 3 rows with 4 more columns of padding (the result must not change)",
        model,
        padded,
    )
    same = [key.dpo.reply_logps(build_model(model), *(v for _, v in b)) for b in (batch, padded)]
    assert torch.allclose(same[0], same[1], rtol=0, atol=1e-5), same
    add_model(
        "padding_holds_other_ids",
        "reply_logps on rows whose padding holds random token ids (attention_mask 0 there)",
        model,
        _batch(g, REPLY_ROWS, 10, junk_padding=True),
    )
    zero_pad = _tiny_gpt2(g, pad=0)
    batch = _batch(g, [(2, 5, True), (3, 2, True), (1, 7, False)], 8, pad=0)
    batch[0][1][0, 2:4] = 0  # real reply tokens that happen to have the pad id
    add_model(
        "pad_id_differs_from_eos",
        "reply_logps with pad id 0 (not the end-of-text id 15) and real reply tokens whose id is 0",
        zero_pad,
        batch,
    )
    two_layers = _tiny_gpt2(g, n_layer=2, n_embd=16)
    batch = _batch(g, [(1, 6, True), (4, 2, True), (2, 8, False), (3, 3, False)], 10)
    add_model("two_layers", "reply_logps with a 2-layer model on 4 rows, prompts of 1 to 4 tokens", two_layers, batch)
    add_model(
        "model_in_train_mode",
        "reply_logps with the model in train mode (dropout 0): use it in the mode it comes in",
        _tiny_gpt2(g, training=True),
        _batch(g, REPLY_ROWS, 9),
    )
    add_model(
        "model_with_dropout_in_eval_mode",
        "reply_logps with a model in eval mode whose dropout is 0.2: use it in the mode it comes in",
        _tiny_gpt2(g, dropout=0.2),
        _batch(g, REPLY_ROWS, 9),
    )
    batch = _batch(g, REPLY_ROWS, 9)
    weights = torch.tensor([1.0, -0.5, 2.0])
    if fresh:
        weights = _uniform(g, -2, 2, 3, dtype=torch.float32)
    case = {"args": [("model", model), *batch], "kwargs": {}, "grad_of": ["model"], "grad_weights": weights}
    add_model(
        "gradient_reaches_the_model",
        "reply_logps: the gradient of sum(weights * result) w.r.t. the model's parameters",
        model,
        batch,
        grad_weights=weights,
        grads={"model": _grad(run_case(key.dpo.reply_logps, case)["grads"]["model"])},
    )
    add_model("inputs_unmodified", "reply_logps", model, _batch(g, REPLY_ROWS, 9), unmodified=True)
    for n_layer in (1, 2):
        model = _tiny_gpt2(g, n_layer=n_layer, n_embd=8 * n_layer, dropout=0.1)
        add_model(
            f"random_{n_layer}_layers",
            f"reply_logps with a random {n_layer}-layer model on 5 random rows of 12 tokens",
            model,
            _batch(g, _random_rows(g, 5, 12), 12),
        )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _token_logps(model, input_ids, attention_mask):
    """[batch, seq - 1]: log pi(x_t | x_<t) for t = 1 .. seq - 1 (the logits at t - 1 predict the token at t)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def _reply_mask(input_ids, attention_mask, prompt_lengths):
    """[batch, seq] bool: the reply's real tokens (after the prompt, attention_mask 1)."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    return (positions >= prompt_lengths[:, None]) & attention_mask.bool()


@right("reply_logps")
def cross_entropy_none(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    labels = input_ids[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels, reduction="none")
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]
    return -(nll * mask).sum(dim=-1)


@right("reply_logps")
def labels_minus_100(model, input_ids, attention_mask, prompt_lengths):
    labels = input_ids.masked_fill(~_reply_mask(input_ids, attention_mask, prompt_lengths), -100)[:, 1:]
    logits = model(input_ids, attention_mask=attention_mask).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    return -nll.view(labels.shape).sum(-1)


@right("reply_logps")
def explicit_position_ids_and_a_multiplied_mask(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(input_ids.shape[1]).expand_as(input_ids)  # rows are flush left: the default ones
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).logits
    logps = torch.log_softmax(logits, dim=-1)[:, :-1].gather(2, input_ids[:, 1:].unsqueeze(2)).squeeze(2)
    return (logps * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:].to(logps.dtype)).sum(1)


@right("reply_logps")
def no_attention_mask_to_the_model_row_by_row(model, input_ids, attention_mask, prompt_lengths):
    # Right padding comes after every real token: a causal model's logits there are the same without the mask.
    logps = torch.log_softmax(model(input_ids).logits, dim=-1)
    out = []
    for i in range(input_ids.shape[0]):
        end = int(attention_mask[i].sum())
        t = torch.arange(int(prompt_lengths[i]), end)
        out.append(logps[i, t - 1, input_ids[i, t]].sum())
    return torch.stack(out)


@wrong("reply_logps", "mean over the reply's tokens; log pi(reply | prompt) is their sum")
def mean_over_reply_tokens(model, input_ids, attention_mask, prompt_lengths):
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1) / mask.sum(-1)


@wrong(
    "reply_logps",
    "padding counted: every position after the prompt was summed; count only those that attention_mask marks 1",
)
def padding_counted(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(1, input_ids.shape[1])
    mask = positions >= prompt_lengths[:, None]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong(
    "reply_logps",
    "real tokens told from padding by their id: GPT-2 pads with the end-of-text id, so the reply's own "
    "end-of-text token was dropped (or a real token with the pad id); tell padding by attention_mask == 0",
)
def end_of_text_dropped_as_padding(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(1, input_ids.shape[1])
    mask = (positions >= prompt_lengths[:, None]) & (input_ids[:, 1:] != model.config.pad_token_id)
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong(
    "reply_logps",
    "logits not shifted: the token at position t was scored by logits[t]; the logits at t - 1 predict it",
)
def logits_not_shifted(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logps = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[..., None]).squeeze(-1)
    return (logps * _reply_mask(input_ids, attention_mask, prompt_lengths)).sum(-1)


@wrong(
    "reply_logps",
    "mask not shifted with the labels: with labels input_ids[:, 1:], take mask[:, 1:] too (mask[:, :-1] "
    "drops the reply's first token and counts the position after its last)",
)
def mask_not_shifted(model, input_ids, attention_mask, prompt_lengths):
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, :-1]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong("reply_logps", "prompt tokens counted; sum over the reply's tokens only (positions t >= prompt_lengths)")
def prompt_counted(model, input_ids, attention_mask, prompt_lengths):
    return (_token_logps(model, input_ids, attention_mask) * attention_mask[:, 1:]).sum(-1)


@wrong("reply_logps", "raw logits summed; a token's log-probability is log_softmax(logits)[token]")
def raw_logits(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (picked * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]).sum(-1)


@wrong("reply_logps", "probabilities (softmax) summed; a token's log-probability is log_softmax(logits)[token]")
def probabilities(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    picked = torch.softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (picked * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]).sum(-1)


@wrong("reply_logps", "switched `model` to train mode")
def switches_to_train_mode(model, input_ids, attention_mask, prompt_lengths):
    model.train()
    return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "switched `model` to eval mode")
def switches_to_eval_mode(model, input_ids, attention_mask, prompt_lengths):
    model.eval()
    return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "the result carries no gradient to the parameters of `model`")
def reply_under_no_grad(model, input_ids, attention_mask, prompt_lengths):
    with torch.no_grad():
        return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "in place")
def prompt_zeroed_in_the_mask_in_place(model, input_ids, attention_mask, prompt_lengths):
    logps = _token_logps(model, input_ids, attention_mask)
    for i, length in enumerate(prompt_lengths.tolist()):
        attention_mask[i, :length] = 0
    return (logps * attention_mask[:, 1:]).sum(-1)


# ================ reference_logps (TASKS.md §12.2) ==================================================================

# --- its cases


@cases_of("reference_logps")
def reference_logps_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "reference_logps", fresh)

    def add_ref(id: str, what: str, model: dict, batch: list, **extra) -> None:
        frozen = _grad(
            torch.zeros(_parameter_count(model)),
            "the reference is frozen: compute it under torch.no_grad() (or detach the result), so that DPO's "
            "gradient never trains it",
        )
        add(id, what, [("ref_model", model), *batch], grads={"ref_model": frozen}, **extra)

    model = _tiny_gpt2(g, dropout=0.2, training=True)
    add_ref(
        "arrives_in_train_mode",
        "reference_logps with ref_model in train mode (dropout 0.2), 3 rows padded with the end-of-text id",
        model,
        _batch(g, REPLY_ROWS, 9),
    )
    add_ref(
        "arrives_in_eval_mode",
        "reference_logps with ref_model already in eval mode (dropout 0.2)",
        _tiny_gpt2(g, dropout=0.2),
        _batch(g, REPLY_ROWS, 9),
    )
    add_ref(
        "two_layers",
        "reference_logps with a 2-layer ref_model in train mode (dropout 0.1), 4 rows",
        _tiny_gpt2(g, n_layer=2, n_embd=16, dropout=0.1, training=True),
        _batch(g, [(1, 6, True), (4, 2, True), (2, 8, False), (3, 3, False)], 10),
    )
    add_ref("inputs_unmodified", "reference_logps", model, _batch(g, REPLY_ROWS, 9), unmodified=True)
    model = _tiny_gpt2(g, n_layer=2, n_embd=16, dropout=0.1, training=True)
    add_ref(
        "random_2_layers",
        "reference_logps with a random 2-layer ref_model in train mode (dropout 0.1) on 5 random rows",
        model,
        _batch(g, _random_rows(g, 5, 12), 12),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("reference_logps")
def inference_mode(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    with torch.inference_mode():
        return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@right("reference_logps")
def parameters_frozen(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval().requires_grad_(False)
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@right("reference_logps")
def result_detached(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths).detach()


@wrong("reference_logps", "the reference is frozen")
def reference_not_frozen(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@wrong("reference_logps", "in train mode, with its dropout on")
def reference_with_dropout_on(ref_model, input_ids, attention_mask, prompt_lengths):
    with torch.no_grad():
        return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


# ================ dpo_loss (TASKS.md §12.3) =========================================================================
# Margins stay within |beta * margin| <= 20, where -log(sigmoid(x)) is as accurate as
# logsigmoid(x) (a right answer too); the docstring asks for logsigmoid, which stays finite beyond.

# --- its cases


DPO_BOOK = ([-5.0, -7.0, -3.0], [-9.0, -4.0, -6.0], [-6.0, -6.0, -3.0], [-8.0, -5.0, -6.0])  # TASKS.md §12.3
DPO_NAMES = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _dpo_args(pc, pr, rc, rr, beta=0.1) -> list:
    return [*zip(DPO_NAMES, (pc, pr, rc, rr)), *([("beta", beta)] if beta is not None else [])]


def _dpo_grads(key, args, names=("policy_chosen_logps", "policy_rejected_logps")) -> dict:
    case = {"args": args, "kwargs": {}, "grad_of": list(names), "grad_output": 0}
    return {name: _grad(grad) for name, grad in run_case(key.dpo.dpo_loss, case)["grads"].items()}


@cases_of("dpo_loss")
def dpo_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "dpo_loss", fresh, outputs=["losses", "chosen_rewards", "rejected_rewards"])

    def add_with_grad(id: str, what: str, args: list, **extra) -> None:
        add(id, what, args, grads=_dpo_grads(key, args), grad_output=0, **extra)

    book, example, shown = [torch.tensor(x, dtype=F64) for x in DPO_BOOK], "the §12.3 example", DPO_BOOK
    if fresh:
        book, example = list(_uniform(g, -10, -2, 4, 3)), "a fresh variant of the §12.3 example"
        shown = [_show(t) for t in book]
    what = f"dpo_loss on {example} (" + ", ".join(f"{n} = {v}" for n, v in zip(DPO_NAMES, shown))
    add("book_example", what + ", beta=0.1)", _dpo_args(*book), book="§12.3")
    add_with_grad(
        "gradient_on_the_book_example",
        f"dpo_loss on {example}: the gradient of the losses",
        _dpo_args(*book),
    )
    add_with_grad(
        "gradient_when_every_input_requires_grad",
        f"dpo_loss on {example} when every input requires grad: the gradient of the losses",
        _dpo_args(*book),
        grad_of=list(DPO_NAMES),
    )
    pc, pr, rc, rr = book
    swapped = _dpo_args(pr, pc, rr, rc)
    add("chosen_and_rejected_swapped", f"dpo_loss on {example} with chosen and rejected swapped", swapped)
    margin = 0.1 * ((pc - rc) - (pr - rr))
    assert torch.allclose(key.dpo.dpo_loss(pr, pc, rr, rc)[0], -torch.nn.functional.logsigmoid(-margin))
    add("default_beta", f"dpo_loss on {example} without beta (its default is 0.1)", _dpo_args(*book, None))
    for beta in (0.5, 0.02):
        add(f"book_example_beta_{beta}", f"dpo_loss on {example}, beta={beta}", _dpo_args(*book, beta))
    for dtype in DTYPES:
        # losses log 2 and rewards 0 whatever the log-probs: a fresh variant has another number of pairs
        pairs = 6 if not fresh else [2, 3, 4, 5, 7, 8, 9][int(torch.randint(0, 7, (), generator=g))]
        policy = (-torch.rand(2, pairs, generator=g, dtype=F64) * 40).to(dtype)
        add(
            f"policy_equals_reference_{_name(dtype)}",
            f"dpo_loss with the policy's log-probs equal to the reference's ({dtype}): losses log 2, rewards 0",
            _dpo_args(policy[0], policy[1], policy[0].clone(), policy[1].clone()),
        )
    ref = -torch.rand(4, generator=g) * 60 - 20
    margins = torch.tensor([30.0, -30.0, 5.0, -36.0])
    if fresh:
        margins = _uniform(g, -36, 30, 4, dtype=torch.float32)
    args = _dpo_args(ref + margins, ref - 6.0, ref, ref - 6.0, 0.5)
    add_with_grad("large_margins_float32", "dpo_loss in float32 with beta * margin from -18 to 15", args)
    add("inputs_unmodified", "dpo_loss", _dpo_args(*book), unmodified=True)
    for dtype in DTYPES:
        for pairs in (1, 7, 64):
            for beta in (0.1, 0.5):
                ref = -torch.rand(2, pairs, generator=g, dtype=F64) * 50 - 5
                policy = ref + torch.randn(2, pairs, generator=g, dtype=F64) * 4
                add_with_grad(
                    f"random_{_name(dtype)}_{pairs}_pairs_beta_{beta}",
                    f"dpo_loss on random {dtype} log-probs of {pairs} pairs, beta={beta}",
                    _dpo_args(*(t.to(dtype) for t in (policy[0], policy[1], ref[0], ref[1])), beta),
                )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _dpo(chosen_logratios, rejected_logratios, beta):
    """The key's outputs from the two log-ratios: for the variants whose mistake is in a log-ratio."""
    losses = -torch.nn.functional.logsigmoid(beta * (chosen_logratios - rejected_logratios))
    return losses, beta * chosen_logratios.detach(), beta * rejected_logratios.detach()


@right("dpo_loss")
def softplus_rewards_not_detached(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen_rewards = beta * (policy_chosen_logps - ref_chosen_logps)
    rejected_rewards = beta * (policy_rejected_logps - ref_rejected_logps)
    return torch.nn.functional.softplus(rejected_rewards - chosen_rewards), chosen_rewards, rejected_rewards


@right("dpo_loss")
def naive_log_of_sigmoid(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    # Accurate while |beta * margin| <= ~20, as in every graded case; logsigmoid stays finite beyond.
    logits = (policy_chosen_logps - policy_rejected_logps) - (ref_chosen_logps - ref_rejected_logps)  # TRL's form
    losses = -torch.log(torch.sigmoid(beta * logits))
    return losses, beta * (policy_chosen_logps - ref_chosen_logps), beta * (policy_rejected_logps - ref_rejected_logps)


@right("dpo_loss")
def binary_cross_entropy_with_logits(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen = beta * (policy_chosen_logps - ref_chosen_logps.detach())
    rejected = beta * (policy_rejected_logps - ref_rejected_logps.detach())
    margin = chosen - rejected
    losses = torch.nn.functional.binary_cross_entropy_with_logits(margin, torch.ones_like(margin), reduction="none")
    return losses, chosen.detach(), rejected.detach()


@wrong(
    "dpo_loss",
    "beta on one side only: beta multiplies the whole margin, beta * (chosen log-ratio - rejected log-ratio)",
)
def beta_on_one_side(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -torch.nn.functional.logsigmoid(beta * chosen - rejected)
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong("dpo_loss", "beta outside the log-sigmoid; it scales the margin inside: -logsigmoid(beta * margin)")
def beta_outside(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -beta * torch.nn.functional.logsigmoid(chosen - rejected)
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong(
    "dpo_loss",
    "the margin's sign flipped: the loss is -logsigmoid(beta * (chosen log-ratio - rejected log-ratio)), "
    "small when the chosen reply gained more",
)
def margin_sign_flipped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -torch.nn.functional.logsigmoid(beta * (rejected - chosen))
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong(
    "dpo_loss",
    "policy and reference swapped: a log-ratio is policy minus reference, log pi(y|x) - log pi_ref(y|x)",
)
def policy_and_reference_swapped(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    return _dpo(ref_chosen_logps - policy_chosen_logps, ref_rejected_logps - policy_rejected_logps, beta)


@wrong(
    "dpo_loss",
    "the references crossed: the chosen reply's log-ratio subtracts ref_chosen_logps, the rejected one's ref_rejected_logps",
)
def references_crossed(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    return _dpo(policy_chosen_logps - ref_rejected_logps, policy_rejected_logps - ref_chosen_logps, beta)


@wrong("dpo_loss", "sigmoid instead of log-sigmoid: the loss is -logsigmoid(beta * margin)")
def sigmoid_instead_of_log_sigmoid(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    return -torch.sigmoid(beta * (chosen - rejected)), beta * chosen.detach(), beta * rejected.detach()


@wrong("dpo_loss", "one value per row (per pair, per reply), not their mean")
def mean_of_the_losses(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    losses, chosen, rejected = _dpo(
        policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps, beta
    )
    return losses.mean(), chosen, rejected


@wrong("dpo_loss", "rewards without beta: a reward is beta * (log pi - log pi_ref)")
def rewards_without_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    return _dpo(chosen, rejected, beta)[0], chosen.detach(), rejected.detach()


@wrong("dpo_loss", "rewards without the reference: a reward is beta * (log pi - log pi_ref), not beta * log pi")
def rewards_without_the_reference(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    losses = _dpo(policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps, beta)[0]
    return losses, beta * policy_chosen_logps.detach(), beta * policy_rejected_logps.detach()


@wrong(
    "dpo_loss",
    "the reference terms were dropped: the margin is (pi_c - ref_c) - (pi_r - ref_r), not pi_c - pi_r",
)
def reference_dropped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    losses = -torch.nn.functional.logsigmoid(beta * (policy_chosen_logps - policy_rejected_logps))
    return losses, beta * policy_chosen_logps.detach(), beta * policy_rejected_logps.detach()


@wrong("dpo_loss", "do not detach policy_chosen_logps")
def losses_detached(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    return _dpo(
        (policy_chosen_logps - ref_chosen_logps).detach(), (policy_rejected_logps - ref_rejected_logps).detach(), beta
    )
