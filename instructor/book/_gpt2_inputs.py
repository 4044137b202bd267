"""The inputs that the case builders of tasks 12 and 13 both draw (instructor.book.dpo, instructor.book.reward_model):
tiny GPT-2s recorded as data (rlhf_practice.checks.model_data: a case costs milliseconds) and flush-left batches.

Batches are flush left, as train_dpo.py and train_reward_model.py build them: each row holds its prompt, its reply
(ending with the end-of-text token when the reply finished), then padding. The models pad with the end-of-text id
unless told otherwise, as GPT-2 does (EOS = pad = 15), so that a function telling padding by the token id gets a
wrong number.
"""

from __future__ import annotations

import torch

from instructor.cases import F64
from rlhf_practice.checks import model_data

VOCAB = 16
EOS = VOCAB - 1


def _tiny_gpt2(g, *, score_head=False, n_layer=1, n_embd=8, dropout=0.0, pad=EOS, training=False) -> dict:
    """A GPT-2 of ``n_layer`` layers as data, its weights drawn from ``g``: large enough that the tokens'
    log-probs (and the positions' scores) differ clearly (GPT-2's own initialisation, std 0.02, puts every token
    near log 1/16). A language model (task 12), or with ``score_head`` a GPT2ForSequenceClassification with one
    label (task 13's reward model)."""
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_positions=16, n_embd=n_embd, n_layer=n_layer, n_head=2, num_labels=1,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=EOS, eos_token_id=EOS, pad_token_id=pad,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        model = (GPT2ForSequenceClassification if score_head else GPT2LMHeadModel)(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=g, dtype=F64)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                param.copy_(1 + 0.1 * noise)
            elif name.startswith("score"):
                param.copy_(noise * 0.5)
            else:
                param.copy_(noise * (0.5 if name.startswith(("transformer.wte", "transformer.wpe")) else 0.2))
    return model_data(model.train(training))


def _tiny_scorer(g, **kwargs) -> dict:
    """:func:`_tiny_gpt2` with a one-label score head: task 13's reward model."""
    return _tiny_gpt2(g, score_head=True, **kwargs)


def _batch(g, rows, seq: int, pad: int = EOS, junk_padding: bool = False) -> list:
    """(input_ids, attention_mask, prompt_lengths) of flush-left rows; ``rows`` = [(prompt length, reply
    length, finished)]: a finished reply's last token is the end-of-text token. Other tokens are drawn from
    0 .. 14 (never EOS); ``junk_padding``: the padding holds random ids instead of ``pad``."""
    ids = torch.full((len(rows), seq), pad)
    mask = torch.zeros(len(rows), seq, dtype=torch.long)
    for i, (prompt, reply, finished) in enumerate(rows):
        n = prompt + reply
        ids[i, :n] = torch.randint(0, EOS, (n,), generator=g)
        ids[i, n - 1] = EOS if finished else ids[i, n - 1]
        mask[i, :n] = 1
        if junk_padding:
            ids[i, n:] = torch.randint(0, EOS, (seq - n,), generator=g)
    lengths = torch.tensor([prompt for prompt, _, _ in rows])
    return [("input_ids", ids), ("attention_mask", mask), ("prompt_lengths", lengths)]


def _random_rows(g, batch: int, seq: int) -> list[tuple]:
    """Random rows for a batch of ``seq`` columns: prompts of 1-4 tokens, replies that fill the row or stop early."""
    rows = []
    for _ in range(batch):
        prompt = int(torch.randint(1, 5, (), generator=g))
        reply = int(torch.randint(1, seq - prompt + 1, (), generator=g))
        rows.append((prompt, reply, bool(torch.rand((), generator=g) < 0.7)))
    return rows


def _padded_more(batch: list, extra: int, pad: int = EOS) -> list:
    """The same rows with ``extra`` more columns of padding."""
    (_, ids), (_, mask), lengths = batch
    ids = torch.cat([ids, torch.full((ids.shape[0], extra), pad)], dim=1)
    mask = torch.cat([mask, torch.zeros(mask.shape[0], extra, dtype=mask.dtype)], dim=1)
    return [("input_ids", ids), ("attention_mask", mask), lengths]
