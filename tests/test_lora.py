"""LoRA with peft (--lora_r, not graded): the adapter trains, the base never moves, the reference is the
base with the adapter switched off, and the adapter saves, merges and loads back trainable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError
from rlhf_practice.modeling import Generation, PolicyValueModel, load_tokenizer, position_ids_from_mask

R = 4


def _batch() -> Generation:
    """A fixed batch of 6 sequences: prompts of 5 tokens (the first two rows left-padded), replies of 7."""
    torch.manual_seed(1)
    sequences = torch.randint(1, 1000, (6, 12))
    attention_mask = torch.ones_like(sequences)
    attention_mask[:2, :2] = 0
    response_mask = torch.ones(6, 7)
    response_mask[3, 4:] = 0
    return Generation(sequences, attention_mask, response_mask, prompt_length=5)


def _lora_policy(targets: tuple[str, ...] = ("c_attn",)) -> PolicyValueModel:
    torch.manual_seed(0)
    policy = PolicyValueModel.from_pretrained("tiny")
    policy.add_lora(R, 16.0, 0.0, targets)
    return policy


def _train(policy: PolicyValueModel, generation: Generation, steps: int, lr: float = 1e-2) -> dict[str, torch.Tensor]:
    """``steps`` Adam steps on a loss that moves the log-probs and the values; returns the gradients of step 1."""
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=lr)
    first = {}
    for step in range(steps):
        out = policy(generation)
        loss = -out.logprobs.mean() + (out.values - 1).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            first = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
        optimizer.step()
    return first


@pytest.fixture(scope="module")
def trained():
    """(policy after 3 LoRA steps, its reference, the untouched starting model, the batch, first gradients)."""
    generation = _batch()
    start = PolicyValueModel.from_pretrained("tiny")
    policy = _lora_policy()
    reference = policy.reference_model()
    grads = _train(policy, generation, steps=3)
    return policy, reference, start, generation, grads


def test_few_parameters_train_and_none_counted_twice(trained) -> None:
    policy, _, start, _, _ = trained
    lora = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert lora and all("lora_" in n or n.startswith("value_head") for n in lora)
    base = sum(p.numel() for p in start.parameters())
    added = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n)
    assert sum(p.numel() for p in policy.parameters()) == base + added  # peft's wrapper adds no second count
    assert sum(p.numel() for p in policy.trainable_parameters()) < 0.10 * base
    assert isinstance(policy.lm, type(start.lm))  # policy.lm stays the causal LM every caller uses


def test_first_step_gradient_reaches_lora_b_only(trained) -> None:
    """lora_B starts at zero, so the first step's gradient of lora_A (which flows through lora_B) is exactly zero."""
    grads = trained[4]
    a = [g for n, g in grads.items() if "lora_A" in n]
    b = [g for n, g in grads.items() if "lora_B" in n]
    assert a and b and len(a) == len(b)
    assert all(torch.equal(g, torch.zeros_like(g)) for g in a)
    assert all(g.abs().max() > 0 for g in b)
    assert any(n.startswith("value_head") for n in grads)  # the value head trains fully, outside the adapter


def test_base_weights_never_move(trained) -> None:
    policy, _, start, _, _ = trained
    base = dict(start.lm.named_parameters())
    for name, param in policy.lm.named_parameters():
        if "lora_" not in name:
            assert torch.equal(param, base[name.replace(".base_layer", "")]), name


def test_reference_is_the_starting_model_exactly(trained) -> None:
    policy, reference, start, generation, _ = trained
    with torch.no_grad():
        moved = policy.evaluate_tokens(generation).logprobs
        want = start.evaluate_tokens(generation).logprobs
    assert not torch.equal(moved, want)  # the adapter trained
    assert torch.equal(reference.evaluate_tokens(generation).logprobs, want)
    assert torch.equal(reference.evaluate_sequences(generation).logprobs, start.evaluate_sequences(generation).logprobs)
    # no second copy of the weights: the reference runs the policy's own tensors
    ref_storages = {p.data_ptr() for p in reference.policy.lm.parameters()}
    assert {p.data_ptr() for p in policy.lm.parameters()} == ref_storages
    assert torch.equal(policy.evaluate_tokens(generation).logprobs, moved)  # and the adapter is back on after


@pytest.mark.parametrize("how", ["no_grad", "inference_mode", "requires_grad_"])
def test_dpo_reference_lm_cannot_freeze_the_adapter(trained, how: str) -> None:
    """DPO's reference_logps gets reference.lm: what a right answer may do to it (eval(), requires_grad_(False),
    a call under no_grad or inference_mode) gives the starting model's logits and leaves the adapter trainable."""
    policy, reference, start, generation, _ = trained
    ids, mask = generation.sequences[2:], generation.attention_mask[2:]  # rows without left padding
    ref_lm = reference.lm.eval()
    if how == "requires_grad_":
        ref_lm.requires_grad_(False)
    with torch.inference_mode() if how == "inference_mode" else torch.no_grad():
        got = ref_lm(input_ids=ids, attention_mask=mask).logits
        want = start.lm(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(got, want)
    assert all(p.requires_grad for n, p in policy.named_parameters() if "lora_" in n)
    assert policy.lm(input_ids=ids, attention_mask=mask).logits.requires_grad


def test_save_load_trainable_and_merge(tmp_path: Path) -> None:
    generation = _batch()
    policy = _lora_policy(("c_attn", "c_proj", "c_fc"))
    _train(policy, generation, steps=2)
    with torch.no_grad():
        want = policy.evaluate_tokens(generation)
    policy.save_pretrained(tmp_path / "adapter")
    saved = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert (
        saved["r"] == R and saved["fan_in_fan_out"] and (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    )
    assert not (tmp_path / "adapter" / "model.safetensors").exists()  # the adapter alone, not the full model

    loaded = PolicyValueModel.from_pretrained(str(tmp_path / "adapter"))
    assert loaded.peft_model is not None and loaded.trainable_parameters()
    assert all(p.requires_grad == ("lora_" in n or n.startswith("value_head")) for n, p in loaded.named_parameters())
    with torch.no_grad():
        got = loaded.evaluate_tokens(generation)
    assert torch.equal(got.logprobs, want.logprobs) and torch.equal(got.values, want.values)

    policy.save_pretrained(tmp_path / "merged", merge=True)
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = PolicyValueModel.from_pretrained(str(tmp_path / "merged"))
    assert merged.peft_model is None
    with torch.no_grad():
        ids, mask = generation.sequences, generation.attention_mask
        kwargs = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids_from_mask(mask)}
        # W + (alpha / r) B A folded into W: the same function, summed in another order (float32 rounding)
        torch.testing.assert_close(merged.lm(**kwargs).logits, policy.lm(**kwargs).logits, rtol=0, atol=1e-4)
    assert policy.peft_model is not None  # saving merged leaves the policy's adapter as it was


def test_in_process_base_is_saved_along(tmp_path: Path) -> None:
    """A base on no disk (--task sort/add build theirs; a warm-up changes it) goes into policy/base."""
    policy = _lora_policy()
    policy.base_source = None
    policy.save_pretrained(tmp_path / "p")
    assert json.loads((tmp_path / "p" / "adapter_config.json").read_text())["base_model_name_or_path"] == "base"
    assert (tmp_path / "p" / "base" / "config.json").is_file()
    loaded = PolicyValueModel.from_pretrained(str(tmp_path / "p"))
    assert loaded.peft_model is not None and loaded.base_source is None  # saved along again next time


@pytest.mark.parametrize(
    ("algorithm", "extra"),
    [
        ("ppo", []),
        ("ppo", ["--level", "token"]),
        ("grpo", []),
        ("grpo", ["--level", "token"]),
        ("dpo", ["--rounds", "2"]),
    ],
)
def test_scripts_run_with_lora(tmp_path: Path, algorithm: str, extra: list[str], impl: Impl, working_impl: str) -> None:
    from _runs import run_script

    needs = "dpo" if algorithm == "dpo" else "token_level" if extra else None
    try:
        if needs:
            impl.check_implemented(needs)
    except (NotImplementedError, ConfigError):  # a stub, or a folder without that file
        pytest.skip(f"runs {algorithm} {' '.join(extra)} with LoRA: finish the functions of rl/{needs}.py first")
    code, _, run = run_script(algorithm, tmp_path, "--impl", working_impl, "--lora_r", str(R), *extra)
    assert code == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["lora"]["r"] == R and summary["trainable_percent"] < 10
    assert (run / "policy" / "adapter_config.json").is_file()


def test_adapter_folder_with_another_r_is_one_line(tmp_path: Path, capsys, working_impl: str) -> None:
    from _runs import run_script

    policy = _lora_policy()
    policy.save_pretrained(tmp_path / "adapter")
    load_tokenizer("tiny").save_pretrained(tmp_path / "adapter")  # as a run's policy folder holds it
    code, _, _ = run_script(
        "grpo", tmp_path, "--impl", working_impl, "--model.model_name", str(tmp_path / "adapter"), "--lora_r", "8"
    )
    assert code == 2
    assert f"holds a LoRA adapter of r={R}" in capsys.readouterr().err


def test_lora_run_starts_as_the_full_run(tmp_path: Path, working_impl: str) -> None:
    """lora_B = 0 and lora_A drawn without advancing the seed's stream: step 1 samples and scores
    exactly as the same run without LoRA (the runs part from the first update on)."""
    from _runs import _metrics, run_script

    full = _metrics(run_script("grpo", tmp_path, "--impl", working_impl, name="full")[2])
    lora = _metrics(run_script("grpo", tmp_path, "--impl", working_impl, "--lora_r", str(R), name="lora")[2])
    assert full[0]["reward/mean"] == lora[0]["reward/mean"]
    assert full[0]["response/length"] == lora[0]["response/length"]


def test_lora_sets_its_own_learning_rate_default() -> None:
    from rlhf_practice.config import LORA_LEARNING_RATE_FACTOR, GRPOConfig, parse_config, preset_config

    full = preset_config(GRPOConfig, "tiny").learning_rate
    assert parse_config(GRPOConfig, ["--preset", "tiny", "--lora_r", "8"]).learning_rate == pytest.approx(
        full * LORA_LEARNING_RATE_FACTOR
    )
    assert parse_config(GRPOConfig, ["--preset", "tiny", "--lora_r=8", "--learning_rate", "1e-4"]).learning_rate == 1e-4
    assert parse_config(GRPOConfig, ["--preset", "tiny"]).learning_rate == full
