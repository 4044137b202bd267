"""What several task-14 case builders and variants share (instructor.book.after_grpo): the §14.3-14.5 replies,
the published cases' own generators, the KL term and the loss_type reductions of the variants.

The published cases use hard-coded numbers or their own generators (:func:`_own`), never the shared ``g``:
drawing from it would change the recorded cases of other functions. The grader's hidden cases (``fresh=True``)
draw from ``g``.
"""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import _junk, _mask, _random_mask
from instructor.cases import F64, _bands, _grad, _grads_of, _own, _perm, _uniform  # noqa: F401 - _own: the builders import it from here


def _k3(logprobs, ref_logprobs):
    log_ratio = logprobs - ref_logprobs
    return torch.exp(-log_ratio) - 1 + log_ratio


def _reduce(loss, mask, loss_type, max_tokens):
    """The per-token loss reduced as loss_type says: for the variants whose mistake lies before it."""
    if loss_type == "grpo":
        return ((loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return (loss * mask).sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        return (loss * mask).sum() / (mask.shape[0] * max_tokens)
    raise ValueError(loss_type)


LOSS_NAMES = ("logprobs", "old_logprobs", "ref_logprobs", "advantages", "mask")
GRAD_NAMES = ["logprobs", "old_logprobs", "ref_logprobs", "advantages"]
# Ratios below, inside and above the clip ranges 0.2 (low) and 0.28 (high), away from their edges.
WIDE_BANDS = [(0.4, 0.7), (0.9, 1.1), (1.35, 1.7)]
# Ratios between the two ceilings 1.2 and 1.28 and between the floors 0.72 and 0.8: only clip-higher tells them apart.
BETWEEN_BANDS = [(0.73, 0.79), (1.21, 1.27)]


def _book_replies():
    """TASKS.md §14.3-14.5: three replies (3, 1 and 2 tokens) of one group, T = 3, junk in the padding."""
    mask = _mask([3, 1, 2], 3)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.2, -4.0, -4.0], [-0.8, -1.5, -3.0]], dtype=F64)
    ratios = torch.tensor([[1.5, 1.25, 0.9], [0.75, 1.0, 1.0], [1.1, 0.95, 1.0]], dtype=F64)
    lp = old + torch.log(ratios)
    ref = _junk(torch.tensor([[-1.0, -1.5, -0.5], [-1.0, -9.0, -9.0], [-0.6, -1.5, -9.0]], dtype=F64), mask, -9.0)
    adv = torch.tensor([1.0, -1.0, 0.5], dtype=F64)
    return lp, old, ref, adv, mask


def _fresh_replies(g: torch.Generator):
    """A fresh variant of the book's three replies: lengths 3, 1 and 2 in a drawn order, ratios in every band,
    advantages of both signs, junk in the padding."""
    mask = _mask([[3, 1, 2], [1, 2, 3], [2, 3, 1]][int(torch.randint(0, 3, (), generator=g))], 3)
    old = _uniform(g, -4, -0.2, 3, 3)
    lp = old + torch.log(_bands(g, WIDE_BANDS + BETWEEN_BANDS, 3, 3))
    ref = _junk(old + _uniform(g, -1, 1, 3, 3), mask, _uniform(g, -12, -6, 1).item())
    adv = _uniform(g, 0.3, 1.5, 3) * torch.tensor([1.0, -1.0, 1.0], dtype=F64)[_perm(g, 3)]
    return lp, old, ref, adv, mask


def _with_empty_reply(book, g: torch.Generator, fresh: bool) -> tuple[list[torch.Tensor], str]:
    """The three replies of ``book`` and a fourth with no real token (an all-zero mask row; log-probs there as
    anywhere, advantage 0.8), last in the published case and in a drawn position in a fresh one: (tensors, where
    it is, in words). Its loss is 0 and no gradient reaches it; dividing by its length (0) makes NaN."""
    lp, old, ref, adv, mask = book
    four = [torch.cat([lp, lp[:1] - 0.3]), torch.cat([old, old[:1]]), torch.cat([ref, ref[:1] - 0.2])]
    four += [
        torch.cat([adv, torch.tensor([0.8], dtype=F64)]),
        torch.cat([mask, torch.zeros(1, mask.shape[1], dtype=F64)]),
    ]
    where = "the last"
    if fresh:
        order = _perm(g, 4)
        four = [t[order] for t in four]
        where = f"reply {int((order == 3).nonzero())}"
    return four, where


def _random_replies(g: torch.Generator, rows: int, num_tokens: int, bands, dtype):
    mask = _random_mask(g, rows, num_tokens, F64)
    old = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 5
    lp = old + torch.log(_bands(g, bands, rows, num_tokens))
    ref = _junk(old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.5, mask, -30.0)
    adv = torch.randn(rows, generator=g, dtype=F64)
    return [t.to(dtype) for t in (lp, old, ref, adv, mask)]


def _zero_grads(key_fn, args) -> dict:
    """The expected gradients of a loss: the key's w.r.t. logprobs; none may reach the constants."""
    return {
        "logprobs": _grad(_grads_of(key_fn, args, GRAD_NAMES)["logprobs"]),
        "old_logprobs": _grad(torch.zeros_like(dict(args)["old_logprobs"]), OLD_NOT_DETACHED),
        "ref_logprobs": _grad(torch.zeros_like(dict(args)["ref_logprobs"]), REF_NOT_DETACHED),
        "advantages": _grad(torch.zeros_like(dict(args)["advantages"]), ADVANTAGES_NOT_DETACHED),
    }


OLD_NOT_DETACHED = "old_logprobs not detached: the old policy's log-probs are a constant (old_logprobs.detach())"
REF_NOT_DETACHED = "ref_logprobs not detached: the reference's log-probs are a constant (ref_logprobs.detach())"
ADVANTAGES_NOT_DETACHED = "advantages not detached: the advantages are constants (advantages.detach())"
