"""Direct Preference Optimization (DPO): learn from preference pairs, with no reward and no sampling in the loop.

Your tasks in this file (TASKS.md, task 12):

- ``reply_logps``: log pi(reply | prompt), summed over the reply's real tokens.             (TASKS.md §12.2)
- ``reference_logps``: the same under the frozen reference: no gradient, no dropout.         (TASKS.md §12.2)
- ``dpo_loss``: the DPO loss of each pair and the implicit rewards of its two replies.       (TASKS.md §12.3)

``train_dpo.py`` shows how your functions are used. A batch holds one sequence per reply, flush left:
the prompt's tokens, then the reply's (ending with the end-of-text token when the reply finished), then
padding on the right. Shapes: ``batch`` = sequences, ``seq`` = their padded length, ``pairs`` =
preference pairs. Run ``pytest -m graded -k dpo`` to check your work.
"""

from __future__ import annotations

import torch
from torch import nn


def reply_logps(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_lengths: torch.Tensor
) -> torch.Tensor:
    """log pi(reply | prompt) of each row: the sum, over the reply's real tokens, of the log-probability
    of the token given everything before it:

        logps[i] = sum over t with t >= prompt_lengths[i] and attention_mask[i, t] == 1 of
                   log_softmax(logits[i, t - 1])[input_ids[i, t]]

    The logits at position t - 1 predict the token at position t. The reply's real tokens are the
    positions after the prompt that attention_mask marks 1. The end-of-text token that ends a finished
    reply is one of them, although GPT-2's tokenizer pads with the same id: tell padding by
    attention_mask, never by the token id.

    Args:
        model: a causal LM: ``model(input_ids=..., attention_mask=...).logits`` is [batch, seq, vocab].
            Use it as it comes (leave its train/eval mode alone).
        input_ids: [batch, seq] long: the prompt, the reply, then padding. Rows start at position 0
            (no left padding), so the model's default positions are right.
        attention_mask: [batch, seq] long: 1 on prompt and reply tokens (end-of-text included), 0 on padding.
        prompt_lengths: [batch] long: the number of prompt tokens of each row (>= 1); its reply starts there.

    Returns:
        [batch] float32: one summed log-prob per row (<= 0), with gradient to the model's parameters.
        Padding a row further (more columns of padding) changes nothing. Inputs are not modified.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()  # predict t = 1 .. seq-1
    token_logps = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    positions = torch.arange(1, input_ids.shape[1], device=input_ids.device)  # the position of each label
    in_reply = (positions >= prompt_lengths[:, None]) & attention_mask[:, 1:].bool()  # [batch, seq - 1]
    return token_logps.masked_fill(~in_reply, 0.0).sum(dim=-1)


def reference_logps(
    ref_model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_lengths: torch.Tensor
) -> torch.Tensor:
    """log pi_ref(reply | prompt) of each row: :func:`reply_logps` under the reference policy, which DPO
    never trains. Two things make it the reference:

    - frozen: no gradient reaches ``ref_model`` (compute without building a graph);
    - deterministic: dropout off, i.e. ``ref_model`` in eval mode (where it then stays).

    Args: as :func:`reply_logps`, with ``ref_model`` in place of ``model``; it may arrive in train mode.

    Returns:
        [batch] float32 with no gradient (``requires_grad`` False): the same numbers on every call.
    """
    ref_model.eval()
    with torch.no_grad():
        return reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPO loss of each preference pair (the paper's sigmoid loss) and the implicit rewards:

        chosen_rewards   = beta * (policy_chosen_logps - ref_chosen_logps)
        rejected_rewards = beta * (policy_rejected_logps - ref_rejected_logps)
        losses           = -log sigmoid(chosen_rewards - rejected_rewards)

    Args:
        policy_chosen_logps: [pairs] log pi(chosen | prompt) under the policy (with gradient).
        policy_rejected_logps: [pairs] log pi(rejected | prompt) under the policy (with gradient).
        ref_chosen_logps: [pairs] the same under the reference (constants).
        ref_rejected_logps: [pairs] the same under the reference (constants).
        beta: the strength of the KL regularisation (TRL's default 0.1).

    Returns:
        ``(losses, chosen_rewards, rejected_rewards)``, each [pairs]. ``losses`` carries the gradient to
        the policy's log-probs; the rewards are for logging (detaching them, as TRL does, is fine).
        Policy = reference gives losses log 2 and rewards 0. Use a stable log-sigmoid (``torch.nn.functional.logsigmoid``):
        log(sigmoid(x)) underflows to -inf for very negative x. Inputs are not modified.
    """
    chosen_logratios = policy_chosen_logps - ref_chosen_logps
    rejected_logratios = policy_rejected_logps - ref_rejected_logps
    losses = -torch.nn.functional.logsigmoid(beta * (chosen_logratios - rejected_logratios))
    return losses, beta * chosen_logratios.detach(), beta * rejected_logratios.detach()
