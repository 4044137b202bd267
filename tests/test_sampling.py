"""The Sampler (rlhf_practice/sampling.py): its static-cache path vs Hugging Face generate, on the CPU (not graded).

On CUDA the same decode step is replayed as a CUDA graph; here it runs eagerly, so these tests check
the arithmetic and the sampling that the GPU path uses.
"""

from __future__ import annotations

import types

import pytest
import torch

from rlhf_practice.errors import ConfigError
from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
from rlhf_practice.sampling import (
    Sampler,
    StaticCacheDecoder,
    exponential_noise,
    resolve_decoding,
    sample_next_token,
    static_cache_support,
)

# Prompts of 1 to 9 tokens (left padding of several widths); two are whole short reviews, so that
# some replies end with EOS after a token or two.
PROMPTS = [
    "The plot",
    "I watched this film last week with my",
    "What a",
    "It is one of the worst musical",
    "Great",
    "The acting is really wonderful. 9 out of 10.",
    "Skip this one.",
    "David Webb is",
]


@pytest.fixture(scope="module")
def tiny():
    tokenizer = load_tokenizer("tiny")
    policy = PolicyValueModel.from_pretrained("tiny")
    batch = tokenizer(PROMPTS * 3, return_tensors="pt", padding=True)
    return tokenizer, policy, batch["input_ids"], batch["attention_mask"]


def _both(tiny, seed: int = 0, **sampling):
    tokenizer, policy, ids, mask = tiny
    out = {}
    for decoding in ("hf", "static"):
        torch.manual_seed(seed)
        generation = Sampler(policy, tokenizer, max_new_tokens=12, decoding=decoding, **sampling).sample(ids, mask)
        out[decoding] = (generation, torch.rand(3))  # the draw after it: both used the random stream alike
    return out["hf"], out["static"]


@pytest.mark.parametrize(
    "sampling",
    [
        {},
        {"temperature": 0.5},
        {"temperature": 1.7},
        {"top_k": 5},
        {"top_p": 0.8},
        {"temperature": 1.3, "top_k": 50, "top_p": 0.9},
    ],
    ids=["plain", "temperature_0.5", "temperature_1.7", "top_k", "top_p", "all_three"],
)
def test_same_samples_masks_and_logprobs_as_generate(tiny, sampling) -> None:
    (hf, hf_after), (static, static_after) = _both(tiny, seed=3, **sampling)
    assert hf.sequences.shape == static.sequences.shape
    assert torch.equal(hf.sequences, static.sequences), "the static cache sampled other tokens than generate"
    assert torch.equal(hf.response_mask, static.response_mask) and torch.equal(hf.attention_mask, static.attention_mask)
    assert torch.equal(hf_after, static_after), "the two paths consumed the random stream differently"
    policy = tiny[1]
    with torch.no_grad():
        assert torch.equal(policy.evaluate_sequences(hf).logprobs, policy.evaluate_sequences(static).logprobs)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_each_draw_is_multinomials_from_the_tempered_distribution(temperature: float) -> None:
    """sample_next_token draws from softmax(logits / temperature), the distribution whose log-probs the
    scoring pass computes: token for token what torch.multinomial draws from it under the same seed,
    with the generator left in the same state (so every later draw of a run is unchanged too)."""
    logits = torch.randn(64, 1497, generator=torch.Generator().manual_seed(0)) * 4
    logits[:3, :100] = -float("inf")  # tokens that can never be drawn
    for seed in range(20):
        torch.manual_seed(seed)
        ours, ours_after = sample_next_token(logits, temperature, 0, 1.0), torch.rand(3)
        torch.manual_seed(seed)
        want = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1).squeeze(1)
        assert torch.equal(ours, want) and torch.equal(ours_after, torch.rand(3))
        assert (ours[:3] >= 100).all()


@pytest.mark.parametrize("shape", [(64, 1497), (3, 18), (1_000_003,)])
def test_exponential_noise_is_exponential_s_numbers(shape: tuple[int, ...]) -> None:
    """The race's noise comes from exponential_noise: bit for bit the numbers torch's exponential_ draws
    under the same seed, with the global generator left in the same state."""
    for seed in range(3):
        torch.manual_seed(seed)
        ours, ours_after = exponential_noise(shape), torch.rand(3)
        torch.manual_seed(seed)
        want = torch.empty(shape).exponential_()
        assert ours.dtype == torch.float32 and ours.shape == want.shape
        assert torch.equal(ours, want), "exponential_noise drew other numbers than exponential_"
        assert torch.equal(ours_after, torch.rand(3)), "exponential_noise used the generator differently"


def test_greedy_matches_generate_without_sampling(tiny) -> None:
    """top_k = 1 leaves one token to draw: the static path then decodes greedily, as do_sample=False does."""
    tokenizer, policy, ids, mask = tiny
    greedy = policy.lm.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=12,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    static = StaticCacheDecoder(policy.lm).generate(
        ids, mask, max_new_tokens=12, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, top_k=1
    )
    assert torch.equal(greedy, static)


def test_finished_rows_stop_and_sampling_stops_when_all_have_ended(tiny) -> None:
    tokenizer, policy, ids, mask = tiny
    seen_early_end = False
    for seed in range(4):
        _, (static, _) = _both(tiny, seed=seed)
        replies, lengths = static.response_ids, static.response_mask.sum(dim=1).long()
        for row, length in zip(replies, lengths):
            if length < replies.shape[1]:
                seen_early_end = True
                assert row[length - 1] == tokenizer.eos_token_id
                assert (row[length:] == tokenizer.pad_token_id).all(), "tokens after EOS must be padding"
        assert replies.shape[1] == lengths.max(), "sampling went on after every row had ended"
    assert seen_early_end, "no reply ended early: the test prompts no longer exercise EOS"
    one_row = StaticCacheDecoder(policy.lm)
    torch.manual_seed(0)
    short = one_row.generate(ids[5:6], mask[5:6], max_new_tokens=12, eos_token_id=0, pad_token_id=1, top_k=1)
    assert short.shape[1] < ids.shape[1] + 12  # a finished review: greedy says EOS soon, and the loop stops


def test_prompt_width_a_multiple_of_eight_and_not(tiny) -> None:
    tokenizer, policy, _, _ = tiny
    for texts in (["The plot is"], ["I watched this film last week with my kids and", "Great"]):
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        runs = []
        for decoding in ("hf", "static"):
            torch.manual_seed(1)
            sampler = Sampler(policy, tokenizer, max_new_tokens=6, decoding=decoding)
            runs.append(sampler.sample(batch["input_ids"], batch["attention_mask"]))
        assert torch.equal(runs[0].sequences, runs[1].sequences)


def test_which_path_a_run_uses(tiny) -> None:
    policy = tiny[1]
    assert resolve_decoding("auto", policy) == ("static", "static KV cache")  # on a CPU too: it is the faster
    assert resolve_decoding("static", policy) == ("static", "static KV cache")
    assert resolve_decoding("hf", policy)[0] == "hf"
    other = types.SimpleNamespace(lm=types.SimpleNamespace(config=types.SimpleNamespace(model_type="llama")))
    assert "GPT-2 models only" in static_cache_support(other.lm)
    decoding, how = resolve_decoding("auto", other)
    assert decoding == "hf" and "GPT-2 models only, not 'llama'" in how
    with pytest.raises(ConfigError, match="decoding='static'.*--decoding hf"):
        resolve_decoding("static", other)


def test_frozen_copy_after_static_sampling_shares_nothing_with_the_sampler(tiny) -> None:
    """The sampler owns its decoder and caches, the policy holds none: a copy made after sampling on the
    static path is a plain deep copy, and updating the policy (which the sampler follows) leaves it as it was."""
    tokenizer, _, ids, mask = tiny
    policy = PolicyValueModel.from_pretrained("tiny")
    sampler = Sampler(policy, tokenizer, max_new_tokens=6, decoding="static")
    torch.manual_seed(0)
    before = sampler.sample(ids, mask).sequences
    start = [p.clone() for p in policy.parameters()]
    reference = policy.frozen_copy()
    assert not any(isinstance(v, (Sampler, StaticCacheDecoder)) for m in reference.modules() for v in vars(m).values())
    assert sampler.decoder.lm is policy.lm and reference.lm is not policy.lm
    policy_storage = {p.untyped_storage().data_ptr() for p in policy.parameters()}
    assert not any(p.untyped_storage().data_ptr() in policy_storage for p in reference.parameters())

    with torch.no_grad():
        for p in policy.parameters():
            p.mul_(0.5)  # an update in place, as the optimizer makes it
    torch.manual_seed(0)
    assert not torch.equal(sampler.sample(ids, mask).sequences, before), "the sampler must follow the policy"
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), start)), "the copy moved with the policy"
    torch.manual_seed(0)
    copy_sampler = Sampler(reference, tokenizer, max_new_tokens=6, decoding="static")
    assert torch.equal(copy_sampler.sample(ids, mask).sequences, before), "the copy samples as the policy did"
