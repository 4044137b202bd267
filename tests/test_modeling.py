"""PolicyValueModel (not graded): the hub loading path on a local copy, sampled Generations, evaluate_sequences."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from rlhf_practice.errors import ModelLoadError
from rlhf_practice.modeling import (
    Generation,
    PolicyValueModel,
    load_tokenizer,
    position_ids_from_mask,
    response_mask_from_ids,
)
from rlhf_practice.sampling import Sampler


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return PolicyValueModel.from_pretrained("tiny")


def _prompts(tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    return batch["input_ids"], batch["attention_mask"]


def _sample(policy, tokenizer, input_ids, attention_mask, **settings) -> Generation:
    return Sampler(policy, tokenizer, **settings).sample(input_ids, attention_mask)


def test_tokenizer_is_set_up_for_generation(tokenizer) -> None:
    assert tokenizer.padding_side == "left"
    assert tokenizer.eos_token == "<|endoftext|>" and tokenizer.pad_token == "<|pad|>"
    assert tokenizer.eos_token_id != tokenizer.pad_token_id


def test_save_and_reload_through_from_pretrained(tmp_path: Path, policy, tokenizer) -> None:
    policy.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    reloaded = PolicyValueModel.from_pretrained(str(tmp_path))
    reloaded_tok = load_tokenizer(str(tmp_path))
    assert reloaded_tok("a great film")["input_ids"] == tokenizer("a great film")["input_ids"]
    for (name, a), (_, b) in zip(policy.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_missing_model_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such folder"):
        PolicyValueModel.from_pretrained(str(tmp_path / "missing"))
    with pytest.raises(ModelLoadError, match="is a folder but not a saved model .no config.json.; give a folder"):
        load_tokenizer(str(tmp_path))  # exists, but holds no model


def test_response_mask_ends_at_first_eos() -> None:
    eos = 0
    ids = torch.tensor([[5, 6, 7, 8], [5, eos, 9, 9], [eos, 9, 9, 9], [5, 6, 7, eos], [5, eos, eos, 9]])
    expected = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
    mask = response_mask_from_ids(ids, eos)
    assert mask.dtype == torch.float32 and mask.tolist() == expected


def test_sampler_shapes_and_masks(policy, tokenizer) -> None:
    input_ids, attention_mask = _prompts(tokenizer, ["The film", "I watched this movie with my", "Bad"])
    torch.manual_seed(0)
    gen = _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=10)
    batch, prompt_length = input_ids.shape
    assert gen.prompt_length == prompt_length
    assert torch.equal(gen.sequences[:, :prompt_length], input_ids)
    t = gen.sequences.shape[1] - prompt_length
    assert 1 <= t <= 10
    assert gen.response_mask.shape == (batch, t) and gen.attention_mask.shape == (batch, prompt_length + t)
    assert torch.equal(gen.attention_mask[:, :prompt_length], attention_mask)
    assert torch.equal(gen.response_mask, response_mask_from_ids(gen.response_ids, tokenizer.eos_token_id))


def test_sampler_stops_rows_at_eos_in_the_middle(policy, tokenizer) -> None:
    # Declare a frequent token "EOS" so that replies end early and at different places.
    input_ids, attention_mask = _prompts(tokenizer, ["The film was", "A movie about", "I", "This is the"] * 4)
    space_the = tokenizer(" the")["input_ids"][0]
    fake = SimpleNamespace(eos_token_id=space_the, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(1)
    gen = _sample(policy, fake, input_ids, attention_mask, max_new_tokens=12)
    ends = gen.response_mask.sum(dim=1).long()
    assert len(set(ends.tolist())) > 1, "replies of different lengths expected"
    for row, end in zip(gen.response_ids, ends):
        if end < row.numel() or row[-1] == space_the:
            assert row[end - 1] == space_the and (row[: end - 1] != space_the).all()
            assert (row[end:] == tokenizer.pad_token_id).all(), "tokens after EOS must be padding"


def test_sampler_refuses_too_long(policy, tokenizer) -> None:
    input_ids, attention_mask = _prompts(tokenizer, ["The film"])
    with pytest.raises(ValueError, match="exceed the model's"):
        _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=policy.max_length)


def _direct_logprob_and_value(policy, tokenizer, prompt: list[int], reply: list[int]) -> tuple[float, float]:
    """Sum of reply log-probs and V(s), from one unpadded row, straight from the logits."""
    eos = tokenizer.eos_token_id
    end = reply.index(eos) + 1 if eos in reply else len(reply)
    ids = torch.tensor([prompt + reply[:end]])
    with torch.no_grad():
        out = policy.lm(input_ids=ids, output_hidden_states=True)
    logp = F.log_softmax(out.logits[0].double(), dim=-1)
    total = sum(logp[len(prompt) - 1 + i, token].item() for i, token in enumerate(reply[:end]))
    value = policy.value_head(out.hidden_states[-1][0, len(prompt) - 1]).item()
    return total, value


def test_evaluate_sequences_matches_a_direct_computation(policy, tokenizer) -> None:
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    word = lambda w: tokenizer(w)["input_ids"]
    prompts = [word("The film was"), word("Bad"), word("I watched it with my friends")]
    replies = [
        word(" great fun") + [eos, pad, pad],  # EOS in the middle, padding after it
        [eos, pad, pad, pad, pad],  # EOS at once: a one-token reply
        word(" and we loved every minute of it")[:7],  # no EOS: runs to the full width
    ]
    width_t = len(replies[2])
    replies = [r + [pad] * (width_t - len(r)) for r in replies]
    width_p = max(len(p) for p in prompts)
    sequences = torch.tensor([[pad] * (width_p - len(p)) + p + r for p, r in zip(prompts, replies)])
    prompt_mask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts])
    response_mask = response_mask_from_ids(sequences[:, width_p:], eos)
    attention_mask = torch.cat([prompt_mask, response_mask.long()], dim=1)
    assert response_mask.sum(dim=1).tolist() == [len(word(" great fun")) + 1, 1, 7]

    out = policy.evaluate_sequences(Generation(sequences, attention_mask, response_mask, width_p))
    assert out.logprobs.shape == (3,) and out.values.shape == (3,) and out.entropy.shape == ()
    for i, (p, r) in enumerate(zip(prompts, replies)):
        logprob, value = _direct_logprob_and_value(policy, tokenizer, p, r)
        assert out.logprobs[i].item() == pytest.approx(logprob, abs=1e-4), f"row {i}"
        assert out.values[i].item() == pytest.approx(value, abs=1e-5), f"row {i}"
    assert out.entropy.item() > 0


def test_evaluate_sequences_carries_gradient_to_the_policy(policy, tokenizer) -> None:
    input_ids, attention_mask = _prompts(tokenizer, ["The film", "Bad"])
    torch.manual_seed(0)
    gen = _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=4)
    out = policy.evaluate_sequences(gen)
    (out.logprobs.sum() + out.values.sum()).backward()
    assert policy.value_head.weight.grad is not None
    assert policy.lm.transformer.wte.weight.grad is not None
    policy.zero_grad(set_to_none=True)


def test_frozen_copy(policy) -> None:
    ref = policy.frozen_copy()
    assert all(not p.requires_grad for p in ref.parameters())
    assert all(p.requires_grad for p in policy.parameters())
    assert all(torch.equal(a, b) for a, b in zip(ref.parameters(), policy.parameters()))
    assert not ref.training and not policy.train().training
    assert ref.bf16 is policy.bf16 is False, "on a CPU the precision resolves to float32, and the copy keeps it"


def test_generation_rows_and_decode(policy, tokenizer) -> None:
    input_ids, attention_mask = _prompts(tokenizer, ["The film", "Bad", "I watched"])
    torch.manual_seed(0)
    gen = _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=5)
    rows = gen[torch.tensor([2, 0])]
    assert len(rows) == 2 and rows.prompt_length == gen.prompt_length
    assert torch.equal(rows.sequences, gen.sequences[[2, 0]]) and torch.equal(
        rows.response_mask, gen.response_mask[[2, 0]]
    )
    replies = gen.decode(tokenizer)
    assert rows.decode(tokenizer) == [replies[2], replies[0]]
    assert all(tokenizer.eos_token not in reply for reply in replies)


def test_scored_logprobs_are_those_of_the_distribution_sampled(policy, tokenizer) -> None:
    """Sampled at temperature 0.5, the replies must be scored with logits / 0.5: the same per-token
    log-probs as the sampler's own (HF's processed scores), so PPO's ratios start at exactly 1."""
    input_ids, attention_mask = _prompts(tokenizer, ["The film", "Bad", "I watched this movie with my"])
    torch.manual_seed(0)
    with torch.no_grad():
        out = policy.lm.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=True,
            temperature=0.5,
            top_k=0,
            max_new_tokens=8,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    prompt_length = input_ids.shape[1]
    response_mask = response_mask_from_ids(out.sequences[:, prompt_length:], tokenizer.eos_token_id)
    full_mask = torch.cat([attention_mask, response_mask.long()], dim=1)
    sampled = torch.stack([F.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1)  # (B, T, V)
    tokens = out.sequences[:, prompt_length:]
    expected = (sampled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) * response_mask).sum(dim=1)
    with torch.no_grad():
        scored = policy.evaluate_sequences(Generation(out.sequences, full_mask, response_mask, prompt_length, 0.5))
        untempered = policy.evaluate_sequences(Generation(out.sequences, full_mask, response_mask, prompt_length, 1.0))
    assert torch.allclose(scored.logprobs, expected, atol=1e-4), (scored.logprobs, expected)
    assert not torch.allclose(untempered.logprobs, expected, atol=1e-2), "the test must tell the two apart"


def test_sampler_records_its_temperature(policy, tokenizer) -> None:
    input_ids, attention_mask = _prompts(tokenizer, ["The film", "Bad"])
    gen = _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=3, temperature=0.7)
    assert gen.temperature == 0.7 and gen[torch.tensor([1])].temperature == 0.7


def test_mixed_precision_keeps_the_lm_head_in_float32(policy, tokenizer, monkeypatch) -> None:
    """bfloat16 autocast (emulated on the CPU): the transformer runs in bf16, the LM head and the
    log-softmax in fp32, so scored log-probs stay closer to full precision than an all-bf16 pass."""
    input_ids, attention_mask = _prompts(tokenizer, ["The film was", "Bad", "I watched this movie with my"] * 4)
    torch.manual_seed(0)
    gen = _sample(policy, tokenizer, input_ids, attention_mask, max_new_tokens=12)
    with torch.no_grad():
        reference = policy.evaluate_sequences(gen).logprobs
        monkeypatch.setattr(policy, "autocast", lambda: torch.autocast("cpu", dtype=torch.bfloat16))
        mixed = policy.evaluate_sequences(gen).logprobs
        with torch.autocast("cpu", dtype=torch.bfloat16):  # everything in bf16, the head included
            logits = policy.lm(
                input_ids=gen.sequences,
                attention_mask=gen.attention_mask,
                position_ids=position_ids_from_mask(gen.attention_mask),
            ).logits
        logp = F.log_softmax(logits[:, gen.prompt_length - 1 : -1].to(torch.bfloat16).float(), dim=-1)
        all_bf16 = (logp.gather(-1, gen.response_ids.unsqueeze(-1)).squeeze(-1) * gen.response_mask).sum(dim=1)
    assert mixed.dtype == torch.float32
    assert (mixed - reference).abs().max() < (all_bf16 - reference).abs().max()
