"""The grading book of rlhf_practice/rl/reward_model.py (task 13): get_reward (TASKS.md §13.2) and reward_loss
(§13.3).

For each graded function, in the order of the course table (rlhf_practice.course.GRADED): the builder of its
cases (registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`), so that a function's whole grading
story is in one place. Written once, read by :func:`instructor.cases.build_cases` and
:data:`instructor.mistakes.CATALOG`, which import this module only when they need its functions.

The published cases draw from their own generators (:func:`_own`), never from the shared ``g``: drawing from it
would change the cases of the functions after these. The grader's hidden cases (``fresh=True``) draw from ``g``.
"""

from __future__ import annotations

import torch

from instructor.book._gpt2_inputs import _batch, _padded_more, _random_rows, _tiny_scorer
from instructor.cases import DTYPES, F64, _adder, _grad, _name, _own, _show, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong
from rlhf_practice.checks import run_case

# ================ the inputs of get_reward ==========================================================================
#
# Batches are flush left, as in task 12: each row holds its prompt, its reply (ending with the end-of-text token
# when the reply finished), then padding. The case models pad with the end-of-text id, as GPT-2 does (EOS = pad =
# 15), so that a function telling padding by the token id (Hugging Face's own pooling among them) reads the wrong
# position. The models are tiny GPT2ForSequenceClassification with one label, recorded as data; they and the
# batches come from instructor.book._gpt2_inputs, shared with task 12.


# The rows of most cases (prompt length, reply length, finished), in 9 columns: a finished reply followed by
# end-of-text padding, a one-token reply (its end-of-text token alone), a reply cut without end-of-text that fills
# its row (no padding), a reply cut without end-of-text followed by padding, and a finished reply that fills its
# row; the prompts have 1 to 4 tokens.
SCORE_ROWS = [(3, 4, True), (2, 1, True), (4, 5, False), (1, 5, False), (2, 7, True)]
# The §13.2 example, in 6 columns: a finished reply with two columns of padding, and a reply cut without
# end-of-text with one. No row fills its columns, so that every catalogued way of reading the wrong position reads
# a position of its own on it (the last column, one past or two before the last real token, ...), and none raises.
BOOK_ROWS = [(2, 2, True), (1, 4, False)]
BOOK_COLUMNS = 6
REWARD_OUTPUTS = ["reward_logits", "final_scores", "sequence_lengths"]


# ================ get_reward (TASKS.md §13.2) =======================================================================

# --- its cases


@cases_of("get_reward")
def get_reward_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "get_reward", fresh, outputs=REWARD_OUTPUTS)

    def draw(seed: int) -> torch.Generator:
        return g if fresh else _own(seed)

    def add_model(id: str, what: str, model: dict, batch: list, **extra) -> None:
        add(id, what, [("model", model), *batch], **extra)

    r = draw(1302)
    add_model(
        "book_example",
        "get_reward on the §13.2 example (2 rows of 6 tokens: a finished reply then two padding columns, and a "
        "reply cut without end-of-text then one padding column)"
        if not fresh
        else "get_reward on a fresh variant of the §13.2 example",
        _tiny_scorer(r),
        _batch(r, BOOK_ROWS, BOOK_COLUMNS),
        book="§13.2",
    )
    r = draw(1303)
    model = _tiny_scorer(r)
    batch = _batch(r, SCORE_ROWS, 9)
    add_model(
        "eos_is_pad",
        "get_reward on 5 rows whose padding has the end-of-text id (as GPT-2 pads): a finished reply, a one-token "
        "reply, a cut reply with no padding, a cut reply with padding, a finished reply with no padding",
        model,
        batch,
    )
    padded = _padded_more(batch, 4)
    add_model(
        "more_padding_changes_nothing",
        "get_reward on the same 5 rows with 4 more columns of padding (the scores must not change)",
        model,
        padded,
    )
    add_model(
        "padding_holds_other_ids",
        "get_reward on rows whose padding holds random token ids (attention_mask 0 there)",
        model,
        _batch(r, SCORE_ROWS, 10, junk_padding=True),
    )
    r = draw(1304)
    zero_pad = _tiny_scorer(r, pad=0)
    batch = _batch(r, [(2, 5, True), (3, 2, True), (1, 7, False)], 8, pad=0)
    batch[0][1][0, 2:4] = 0  # real reply tokens that happen to have the pad id
    add_model(
        "pad_id_differs_from_eos",
        "get_reward with pad id 0 (not the end-of-text id 15) and real reply tokens whose id is 0",
        zero_pad,
        batch,
    )
    r = draw(1305)
    add_model(
        "two_layers",
        "get_reward with a 2-layer model on 4 rows, prompts of 1 to 4 tokens",
        _tiny_scorer(r, n_layer=2, n_embd=16),
        _batch(r, [(1, 6, True), (4, 2, True), (2, 8, False), (3, 3, False)], 10),
    )
    r = draw(1306)
    add_model(
        "model_in_train_mode",
        "get_reward with the model in train mode (dropout 0): use it in the mode it comes in",
        _tiny_scorer(r, training=True),
        _batch(r, SCORE_ROWS, 9),
    )
    add_model(
        "model_with_dropout_in_eval_mode",
        "get_reward with a model in eval mode whose dropout is 0.2: use it in the mode it comes in",
        _tiny_scorer(r, dropout=0.2),
        _batch(r, SCORE_ROWS, 9),
    )
    r = draw(1307)
    model = _tiny_scorer(r)
    batch = _batch(r, SCORE_ROWS, 9)
    weights = torch.tensor([1.0, -0.5, 2.0, 0.75, -1.5])
    if fresh:
        weights = _uniform(g, -2, 2, len(SCORE_ROWS), dtype=torch.float32)
    case = {
        "args": [("model", model), *batch],
        "kwargs": {},
        "grad_of": ["model"],
        "grad_weights": weights,
        "grad_output": 1,
    }
    add_model(
        "gradient_reaches_the_model",
        "get_reward: the gradient of sum(weights * final_scores) w.r.t. the model's parameters",
        model,
        batch,
        grad_weights=weights,
        grad_output=1,
        grads={"model": _grad(run_case(key.reward_model.get_reward, case)["grads"]["model"])},
    )
    add_model("inputs_unmodified", "get_reward", model, _batch(r, SCORE_ROWS, 9), unmodified=True)
    for n_layer in (1, 2):
        r = draw(1310 + n_layer)
        model = _tiny_scorer(r, n_layer=n_layer, n_embd=8 * n_layer, dropout=0.1)
        add_model(
            f"random_{n_layer}_layers",
            f"get_reward with a random {n_layer}-layer model on 6 random rows of 12 tokens",
            model,
            _batch(r, _random_rows(r, 6, 12), 12),
        )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _reward_logits(model, input_ids, attention_mask):
    """[batch, seq] float32: the score head on every position's last hidden state (the key's)."""
    hidden = model.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.score(hidden).squeeze(-1).float()


def _read_at(reward_logits, positions):
    """(reward_logits, the scores at ``positions``, positions): the three outputs from a choice of position."""
    positions = positions.long()
    scores = reward_logits[torch.arange(reward_logits.shape[0]), positions]
    return reward_logits, scores, positions


@right("get_reward")
def argmax_of_mask_times_positions(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    return _read_at(reward_logits, (attention_mask * positions).argmax(dim=1))


@right("get_reward")
def trl_hidden_states_then_score(model, input_ids, attention_mask, prompt_lengths):
    # TRL's get_reward: the backbone's last hidden states (after the final layer norm), then the score head.
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    reward_logits = model.score(out.hidden_states[-1]).squeeze(-1)
    sequence_lengths = attention_mask.sum(dim=1) - 1
    final = reward_logits[torch.arange(reward_logits.size(0), device=reward_logits.device), sequence_lengths]
    return reward_logits.float(), final.float(), sequence_lengths


@right("get_reward")
def last_one_of_the_flipped_mask(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    seq = attention_mask.shape[1]
    last = seq - 1 - attention_mask.flip(dims=[1]).argmax(dim=1)  # the first 1 from the right
    return reward_logits, reward_logits.gather(1, last[:, None]).squeeze(1), last


@wrong(
    "get_reward",
    "the score read at position -1, the last column: in a padded row that is padding; read it at the last real "
    "token, the last position where attention_mask is 1 (attention_mask.sum(1) - 1)",
)
def last_column(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, torch.full((input_ids.shape[0],), input_ids.shape[1] - 1))


@wrong(
    "get_reward",
    "the score read before the reply's end-of-text token: Hugging Face's own pooling (model(...).logits) and the "
    "position before the first end-of-text id both take the pad id for padding, but GPT-2 pads with its "
    "end-of-text id, so the reply's own end-of-text token was dropped; tell padding by attention_mask == 0",
)
def hugging_face_pooling(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    scores = model(input_ids, attention_mask=attention_mask).logits.squeeze(-1).float()
    pad = model.config.pad_token_id
    positions = (torch.arange(input_ids.shape[1]) * (input_ids != pad)).argmax(-1)
    return reward_logits, scores, positions


@wrong(
    "get_reward",
    "the score read before the reply's end-of-text token: Hugging Face's own pooling (model(...).logits) and the "
    "position before the first end-of-text id both take the pad id for padding, but GPT-2 pads with its "
    "end-of-text id, so the reply's own end-of-text token was dropped; tell padding by attention_mask == 0",
)
def before_the_first_end_of_text(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    is_eos = input_ids == model.config.eos_token_id
    first = torch.where(is_eos.any(1), is_eos.long().argmax(1), torch.full_like(prompt_lengths, input_ids.shape[1]))
    return _read_at(reward_logits, first - 1)


@wrong(
    "get_reward",
    "the score read one past the last real token (attention_mask.sum(1) is a count; the last real token's "
    "position is attention_mask.sum(1) - 1)",
)
def one_past_the_last_real_token(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, attention_mask.sum(1))


@wrong(
    "get_reward",
    "the score read at the prompt's last token (prompt_lengths - 1): it has not read the reply; the sequence's "
    "score is read where the reply ends, at the last real token",
)
def prompt_last_token(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, prompt_lengths - 1)


@wrong(
    "get_reward",
    "final_scores is a mean of the scores over the positions; it is the one score at the last real token",
)
def mean_over_real_positions(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    mask = attention_mask.to(reward_logits.dtype)
    return reward_logits, (reward_logits * mask).sum(1) / mask.sum(1), attention_mask.sum(1) - 1


@wrong(
    "get_reward",
    "final_scores is a mean of the scores over the positions (padding included); it is the one score at the last "
    "real token",
)
def mean_over_all_positions(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return reward_logits, reward_logits.mean(1), attention_mask.sum(1) - 1


@wrong(
    "get_reward",
    "the score read one before the last real token (attention_mask.sum(1) - 2): a finished reply's end-of-text "
    "token is dropped; the last real token is at attention_mask.sum(1) - 1",
)
def two_before_the_count(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, attention_mask.sum(1) - 2)


@wrong(
    "get_reward",
    "the score read one past the last real token (attention_mask.sum(1) is a count; the last real token's "
    "position is attention_mask.sum(1) - 1)",
)
def one_past_clamped_to_the_row(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, attention_mask.sum(1).clamp(max=input_ids.shape[1] - 1))


@wrong(
    "get_reward",
    "final_scores is the largest score over the real positions; it is the one score at the last real token",
)
def max_over_real_positions(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    masked = reward_logits.masked_fill(attention_mask == 0, float("-inf"))
    return reward_logits, masked.max(1).values, attention_mask.sum(1) - 1


@wrong(
    "get_reward",
    "final_scores is a sum of the scores over the real positions; it is the one score at the last real token",
)
def sum_over_real_positions(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return reward_logits, (reward_logits * attention_mask).sum(1), attention_mask.sum(1) - 1


@wrong(
    "get_reward",
    "the score read at position 0, the first token: it has read nothing of the reply; the sequence's score is read "
    "at the last real token",
)
def first_position(model, input_ids, attention_mask, prompt_lengths):
    reward_logits = _reward_logits(model, input_ids, attention_mask)
    return _read_at(reward_logits, torch.zeros_like(prompt_lengths))


@wrong(
    "get_reward",
    "reward_logits edited after the scores were read (its padding positions set to 0): return the score head's "
    "output at every position as it is, padding columns included",
)
def reward_logits_padding_zeroed(model, input_ids, attention_mask, prompt_lengths):
    reward_logits, final_scores, sequence_lengths = KEY.reward_model.get_reward(
        model, input_ids, attention_mask, prompt_lengths
    )
    reward_logits.masked_fill_(attention_mask == 0, 0.0)
    return reward_logits, final_scores, sequence_lengths


@wrong("get_reward", "switched `model` to eval mode")
def scorer_switched_to_eval_mode(model, input_ids, attention_mask, prompt_lengths):
    model.eval()
    return KEY.reward_model.get_reward(model, input_ids, attention_mask, prompt_lengths)


@wrong("get_reward", "the result carries no gradient to the parameters of `model`")
def scores_under_no_grad(model, input_ids, attention_mask, prompt_lengths):
    with torch.no_grad():
        return KEY.reward_model.get_reward(model, input_ids, attention_mask, prompt_lengths)


# ================ reward_loss (TASKS.md §13.3) ======================================================================

# --- its cases

RM_BOOK = ([2.0, 0.5, -1.0], [0.5, 1.5, -1.0])  # TASKS.md §13.3: a right pair, a wrong one, a tie
# The first pair's margin is above its difference (1.5): an accuracy counted on the shifted difference differs there.
# (The pairs' sums, 2.5, 2 and -2, have a mean other than 0 and 1: the centring term's variants differ too.)
RM_BOOK_MARGIN = [2.0, 0.5, 0.0]
LOSS_OUTPUTS = ["loss", "accuracy"]


def _rm_args(chosen, rejected, margin=None, coefficient=None) -> list:
    args = [("rewards_chosen", chosen), ("rewards_rejected", rejected)]
    if margin is not None or coefficient is not None:
        args.append(("margin", margin))
    if coefficient is not None:
        args.append(("center_rewards_coefficient", coefficient))
    return args


def _rm_grads(key, args) -> dict:
    names = ["rewards_chosen", "rewards_rejected"]
    case = {"args": args, "kwargs": {}, "grad_of": names, "grad_output": 0}
    return {name: _grad(grad) for name, grad in run_case(key.reward_model.reward_loss, case)["grads"].items()}


@cases_of("reward_loss")
def reward_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "reward_loss", fresh, outputs=LOSS_OUTPUTS, any_float=["accuracy"])
    own = g if fresh else _own(1330)

    def add_with_grad(id: str, what: str, args: list, **extra) -> None:
        add(id, what, args, grads=_rm_grads(key, args), grad_output=0, **extra)

    chosen, rejected = (torch.tensor(x, dtype=F64) for x in RM_BOOK)
    margin = torch.tensor(RM_BOOK_MARGIN, dtype=F64)
    example = "the §13.3 example"
    if fresh:  # a right pair, a wrong one and a tie, in another order, with other values
        example = "a fresh variant of the §13.3 example"
        tie = _uniform(g, -3, 3, 1)
        chosen = torch.cat([_uniform(g, 0.5, 3, 1), _uniform(g, -3, -0.5, 1), tie])
        rejected = torch.cat([_uniform(g, -3, 0, 1), _uniform(g, 0, 3, 1), tie.clone()])
        order = torch.randperm(3, generator=g)
        chosen, rejected = chosen[order], rejected[order]
        margin = _uniform(g, 0.1, 2, 3)
    what = f"reward_loss on {example} (rewards_chosen = {_show(chosen)}, rewards_rejected = {_show(rejected)}"
    add("book_example", what + ")", _rm_args(chosen, rejected), book="§13.3")
    add_with_grad(
        "gradient_on_the_book_example",
        f"reward_loss on {example}: the gradient of the loss",
        _rm_args(chosen, rejected),
    )
    add(
        "chosen_and_rejected_swapped",
        f"reward_loss on {example} with chosen and rejected swapped",
        _rm_args(rejected, chosen),
    )
    add_with_grad(
        "with_margin",
        f"reward_loss on {example} with margin = {_show(margin)}",
        _rm_args(chosen, rejected, margin),
    )
    for coefficient in (0.01, 0.5):
        add_with_grad(
            f"centring_{coefficient}",
            f"reward_loss on {example} with center_rewards_coefficient = {coefficient}",
            _rm_args(chosen, rejected, None, coefficient),
        )
    add_with_grad(
        "margin_and_centring",
        f"reward_loss on {example} with margin = {_show(margin)} and center_rewards_coefficient = 0.1",
        _rm_args(chosen, rejected, margin, 0.1),
    )
    add(
        "centring_coefficient_0",
        f"reward_loss on {example} with center_rewards_coefficient = 0.0 (no centring term)",
        _rm_args(chosen, rejected, None, 0.0),
    )
    for dtype in DTYPES:
        # loss log 2, accuracy 0 (a tie counts as wrong) whatever the scores: a fresh one has another number of pairs
        pairs = 5 if not fresh else [2, 3, 4, 6, 7, 8, 9][int(torch.randint(0, 7, (), generator=g))]
        scores = (torch.randn(pairs, generator=own, dtype=F64) * 3).to(dtype)
        add(
            f"equal_scores_{_name(dtype)}",
            f"reward_loss with every chosen score equal to its rejected one ({dtype}): loss log 2, accuracy 0",
            _rm_args(scores, scores.clone()),
        )
    # Very negative differences: log(sigmoid(d)) is log(0) = -inf in float32 below about d = -88.
    far = torch.tensor([-100.0, 3.0, 40.0, -2.0])
    if fresh:
        far = torch.cat([_uniform(g, -150, -110, 1, dtype=torch.float32), _uniform(g, -5, 5, 3, dtype=torch.float32)])
    args = _rm_args(far, torch.tensor([100.0, 1.0, -60.0, 0.5]))
    add_with_grad(
        "very_negative_difference_float32",
        f"reward_loss in float32 with rewards_chosen = {_show(far)} and rewards_rejected = [100, 1, -60, 0.5] "
        "(one difference of -200 or below)",
        args,
    )
    add("inputs_unmodified", "reward_loss", _rm_args(chosen, rejected, margin, 0.1), unmodified=True)
    for dtype in DTYPES:
        for pairs in (1, 7, 64):
            for extras in ("plain", "margin", "centring"):
                c, r = (torch.randn(2, pairs, generator=own, dtype=F64) * 2).to(dtype)
                m = (torch.rand(pairs, generator=own, dtype=F64) * 2).to(dtype) if extras == "margin" else None
                coefficient = 0.01 if extras == "centring" else None
                add_with_grad(
                    f"random_{_name(dtype)}_{pairs}_pairs_{extras}",
                    f"reward_loss on random {dtype} scores of {pairs} pairs"
                    + {"plain": "", "margin": ", with a margin", "centring": ", center_rewards_coefficient 0.01"}[
                        extras
                    ],
                    _rm_args(c, r, m, coefficient),
                )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _difference(rewards_chosen, rewards_rejected, margin):
    d = rewards_chosen - rewards_rejected
    return d if margin is None else d - margin


def _centring(rewards_chosen, rewards_rejected, center_rewards_coefficient):
    if center_rewards_coefficient is None:
        return 0.0
    return center_rewards_coefficient * ((rewards_chosen + rewards_rejected) ** 2).mean()


def _accuracy(rewards_chosen, rewards_rejected):
    return (rewards_chosen > rewards_rejected).to(rewards_chosen.dtype).mean()


@right("reward_loss")
def softplus_of_minus_the_difference(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    d = _difference(rewards_chosen, rewards_rejected, margin)
    loss = torch.nn.functional.softplus(-d).mean() + _centring(
        rewards_chosen, rewards_rejected, center_rewards_coefficient
    )
    return loss, _accuracy(rewards_chosen, rewards_rejected)


@right("reward_loss")
def binary_cross_entropy_with_ones(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    d = rewards_chosen - rewards_rejected - (margin if margin is not None else 0)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(d, torch.ones_like(d))
    if center_rewards_coefficient:
        loss = loss + center_rewards_coefficient * torch.mean((rewards_chosen + rewards_rejected) ** 2)
    accuracy = (rewards_chosen - rewards_rejected > 0).to(rewards_chosen.dtype).mean()
    return loss, accuracy.detach()


@right("reward_loss")
def trl_reward_trainer(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    # TRL's RewardTrainer: its accuracy is float32 whatever the scores' dtype (a metric: any float dtype will do)
    if margin is not None:
        loss = -torch.nn.functional.logsigmoid(rewards_chosen - rewards_rejected - margin).mean()
    else:
        loss = -torch.nn.functional.logsigmoid(rewards_chosen - rewards_rejected).mean()
    if center_rewards_coefficient is not None:
        loss += center_rewards_coefficient * torch.mean((rewards_chosen + rewards_rejected) ** 2)
    mean_chosen, mean_rejected = rewards_chosen.detach(), rewards_rejected.detach()
    return loss, (mean_chosen > mean_rejected).float().mean()


@right("reward_loss")
def softplus_with_a_float_accuracy(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    diff = rewards_chosen - rewards_rejected
    if margin is not None:
        diff = diff - margin
    loss = torch.nn.functional.softplus(-diff).mean()
    if center_rewards_coefficient is not None:
        loss = loss + center_rewards_coefficient * (rewards_chosen + rewards_rejected).pow(2).mean()
    return loss, (rewards_chosen > rewards_rejected).float().mean()


def _with(loss_of_d, rewards_chosen, rewards_rejected, margin, center_rewards_coefficient):
    """(loss, accuracy) with the per-pair loss ``loss_of_d(d)`` of the difference less the margin, averaged."""
    d = _difference(rewards_chosen, rewards_rejected, margin)
    loss = loss_of_d(d).mean() + _centring(rewards_chosen, rewards_rejected, center_rewards_coefficient)
    return loss, _accuracy(rewards_chosen, rewards_rejected)


def _with_centring(term, rewards_chosen, rewards_rejected, margin, center_rewards_coefficient):
    """(loss, accuracy) with ``term(rewards_chosen, rewards_rejected)`` in place of the centring term's mean of the
    squared sums: for the variants whose mistake is in the centring term."""
    loss = -torch.nn.functional.logsigmoid(_difference(rewards_chosen, rewards_rejected, margin)).mean()
    if center_rewards_coefficient is not None:
        loss = loss + center_rewards_coefficient * term(rewards_chosen, rewards_rejected)
    return loss, _accuracy(rewards_chosen, rewards_rejected)


@wrong(
    "reward_loss",
    "the sign of the difference flipped: the loss is -logsigmoid(rewards_chosen - rewards_rejected), small when "
    "the chosen reply scores higher",
)
def difference_flipped(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with(
        lambda d: -torch.nn.functional.logsigmoid(-d),
        rewards_chosen,
        rewards_rejected,
        margin,
        center_rewards_coefficient,
    )


@wrong("reward_loss", "sigmoid instead of log-sigmoid: the loss is -logsigmoid(rewards_chosen - rewards_rejected)")
def sigmoid_of_the_difference(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with(lambda d: -torch.sigmoid(d), rewards_chosen, rewards_rejected, margin, center_rewards_coefficient)


@wrong(
    "reward_loss",
    "log(sigmoid(d)) gives log(0) = -inf once sigmoid(d) rounds to 0 (d below about -88 in float32), so the loss "
    "is inf; use torch.nn.functional.logsigmoid(d), which stays finite",
)
def log_of_sigmoid(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with(
        lambda d: -torch.log(torch.sigmoid(d)), rewards_chosen, rewards_rejected, margin, center_rewards_coefficient
    )


@wrong("reward_loss", "summed over the pairs; the loss is their mean")
def sum_over_pairs(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    d = _difference(rewards_chosen, rewards_rejected, margin)
    loss = -torch.nn.functional.logsigmoid(d).sum() + _centring(
        rewards_chosen, rewards_rejected, center_rewards_coefficient
    )
    return loss, _accuracy(rewards_chosen, rewards_rejected)


@wrong(
    "reward_loss",
    "the margin added to the difference; subtract it: -logsigmoid(rewards_chosen - rewards_rejected - margin) asks "
    "the chosen reply to score at least margin higher",
)
def margin_added(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    d = rewards_chosen - rewards_rejected + (margin if margin is not None else 0)
    loss = -torch.nn.functional.logsigmoid(d).mean() + _centring(
        rewards_chosen, rewards_rejected, center_rewards_coefficient
    )
    return loss, _accuracy(rewards_chosen, rewards_rejected)


@wrong(
    "reward_loss",
    "the centring term squares the mean of the sums; it is the mean of the squared sums, "
    "center_rewards_coefficient * mean((rewards_chosen + rewards_rejected) ** 2)",
)
def centring_mean_squared(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with_centring(
        lambda c, r: (c + r).mean() ** 2, rewards_chosen, rewards_rejected, margin, center_rewards_coefficient
    )


@wrong(
    "reward_loss",
    "the centring term squares each score apart; it squares each pair's sum, "
    "center_rewards_coefficient * mean((rewards_chosen + rewards_rejected) ** 2)",
)
def centring_each_score(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with_centring(
        lambda c, r: (c**2 + r**2).mean(), rewards_chosen, rewards_rejected, margin, center_rewards_coefficient
    )


@wrong(
    "reward_loss",
    "accuracy counted a tie as right (>=); a pair counts only when rewards_chosen > rewards_rejected",
)
def tie_counted_right(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    loss = KEY.reward_model.reward_loss(rewards_chosen, rewards_rejected, margin, center_rewards_coefficient)[0]
    return loss, (rewards_chosen >= rewards_rejected).to(rewards_chosen.dtype).mean()


@wrong(
    "reward_loss",
    "a hinge loss, max(0, 1 - d); the Bradley-Terry loss is -logsigmoid(d), the negative log-likelihood of the "
    "preference",
)
def hinge_loss(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with(
        lambda d: torch.clamp(1 - d, min=0), rewards_chosen, rewards_rejected, margin, center_rewards_coefficient
    )


@wrong(
    "reward_loss",
    "the centring term is missing: with center_rewards_coefficient c the loss adds "
    "c * mean((rewards_chosen + rewards_rejected) ** 2)",
)
def centring_ignored(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with(lambda d: -torch.nn.functional.logsigmoid(d), rewards_chosen, rewards_rejected, margin, None)


@wrong(
    "reward_loss",
    "the centring term without its square: it is the mean of the SQUARED sums, "
    "center_rewards_coefficient * mean((rewards_chosen + rewards_rejected) ** 2)",
)
def centring_not_squared(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    return _with_centring(
        lambda c, r: (c + r).mean(), rewards_chosen, rewards_rejected, margin, center_rewards_coefficient
    )


@wrong(
    "reward_loss",
    "accuracy counted on the difference less the margin; it counts the pairs with rewards_chosen > rewards_rejected, "
    "margin or not (the margin only asks the loss for more)",
)
def accuracy_with_the_margin(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    loss = KEY.reward_model.reward_loss(rewards_chosen, rewards_rejected, margin, center_rewards_coefficient)[0]
    d = _difference(rewards_chosen, rewards_rejected, margin)
    return loss, (d > 0).to(rewards_chosen.dtype).mean()


@wrong("reward_loss", "do not detach rewards_chosen")
def scores_detached(rewards_chosen, rewards_rejected, margin=None, center_rewards_coefficient=None):
    loss, accuracy = KEY.reward_model.reward_loss(
        rewards_chosen.detach(), rewards_rejected.detach(), margin, center_rewards_coefficient
    )
    return loss, accuracy
