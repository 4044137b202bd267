"""A reward model learned from preferences: the "HF" (human feedback) of RLHF.

Your tasks in this file (TASKS.md, task 13):

- ``get_reward``: the reward model's score of each sequence, read at its last real token.   (TASKS.md §13.2)
- ``reward_loss``: the pairwise (Bradley-Terry) loss of the scores, and their accuracy.      (TASKS.md §13.3)

``train_reward_model.py`` shows how your functions are used, and ``train_ppo.py --reward_model`` how
the trained model then scores the policy's replies. A batch is laid out as in task 12: one sequence
per reply, flush left (the prompt's tokens, then the reply's, ending with the end-of-text token when
the reply finished), then padding on the right. Shapes: ``batch`` = sequences, ``seq`` = their padded
length, ``pairs`` = preference pairs. Run ``pytest -m graded -k reward_model`` to check your work.
"""

from __future__ import annotations

import torch
from torch import nn


def get_reward(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reward model's score of each sequence (prompt + reply): a number per position from the
    model's score head, read at the sequence's last real token (TRL's ``get_reward``, its outputs in
    its order):

        reward_logits[i, t] = score(hidden state of the last layer at position t)
        sequence_lengths[i] = the position of row i's last real token (attention_mask 1)
        final_scores[i]     = reward_logits[i, sequence_lengths[i]]

    The last real token is the one that has read the whole prompt and the whole reply; for a finished
    reply it is its end-of-text token. GPT-2 pads with that same id, so tell padding by
    ``attention_mask``, never by the token id: the model's own ``model(...).logits`` (Hugging Face's
    pooling) reads the last token whose id is not the pad id, which drops a reply's end-of-text token.

    Args:
        model: a ``GPT2ForSequenceClassification`` with one label: ``model.transformer(input_ids=...,
            attention_mask=...).last_hidden_state`` is [batch, seq, hidden] and ``model.score`` maps it
            to [batch, seq, 1]. Use it as it comes (leave its train/eval mode alone).
        input_ids: [batch, seq] long: the prompt, the reply, then padding. Rows start at position 0
            (no left padding), so the model's default positions are right.
        attention_mask: [batch, seq] long: 1 on prompt and reply tokens (end-of-text included), 0 on padding.
        prompt_lengths: [batch] long: the prompt's tokens in each row, as in task 12 (TRL's
            ``get_reward`` takes the prompt's length too). The score is of the whole sequence: read it
            where the reply ends, not where the prompt does.

    Returns:
        ``(reward_logits, final_scores, sequence_lengths)``: [batch, seq] float32 (every position's
        score), [batch] float32 (with gradient to the model's parameters) and [batch] long (an index:
        TRL's name, although it is the length minus one). Padding a row further changes nothing.
        Inputs are not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §13.2 first.
    raise NotImplementedError("get_reward is not implemented yet: see TASKS.md §13.2.")


def reward_loss(
    rewards_chosen: torch.Tensor,
    rewards_rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    center_rewards_coefficient: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Bradley-Terry loss of a batch of preference pairs (TRL's RewardTrainer), and its accuracy.

    Bradley-Terry: P(chosen preferred to rejected) = sigmoid(r_chosen - r_rejected). The loss is the
    negative log-likelihood of the labels, averaged over the pairs:

        loss = mean over pairs of -log sigmoid(rewards_chosen - rewards_rejected - margin)
             + center_rewards_coefficient * mean over pairs of (rewards_chosen + rewards_rejected) ** 2
        accuracy = mean over pairs of [rewards_chosen > rewards_rejected]     (a tie counts as wrong;
                                                                               margin or not)

    ``margin`` (optional, one number per pair, >= 0): how much better the chosen reply must score;
    the loss asks for r_chosen - r_rejected > margin. ``center_rewards_coefficient`` (optional; TRL's
    name, 0.01 in its docs): a small pull of the scores towards 0, since the loss sees only their
    differences. Either being None means that term is left out.

    Args:
        rewards_chosen: [pairs] the scores of the chosen replies (with gradient).
        rewards_rejected: [pairs] the scores of the rejected replies (with gradient).
        margin: [pairs] or None.
        center_rewards_coefficient: a float >= 0, or None.

    Returns:
        ``(loss, accuracy)``: two 0-dim tensors; ``loss`` in the rewards' dtype, carrying the gradient;
        ``accuracy`` in any floating dtype (TRL's is float32), for logging (no gradient). Equal scores give loss log 2 (without the other
        terms). Use a stable log-sigmoid (``torch.nn.functional.logsigmoid``): log(sigmoid(x)) underflows
        to -inf for very negative x. Inputs are not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §13.3 first.
    raise NotImplementedError("reward_loss is not implemented yet: see TASKS.md §13.3.")
