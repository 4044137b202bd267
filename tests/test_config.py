"""Config: presets, the command line, and one clear message per bad value (not graded)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from rlhf_practice.config import (
    CONFIGS,
    Bound,
    GRPOConfig,
    PPOConfig,
    TokenGRPOConfig,
    TokenPPOConfig,
    _helps,
    parse_config,
    preset_config,
)
from rlhf_practice.course import load_impl
from rlhf_practice.errors import ConfigError

HELP_MAX_CHARS = 200  # a sentence or two: what the setting is, its unit, its bound


@pytest.mark.parametrize("cls", CONFIGS.values())
def test_every_help_is_a_sentence_or_two(cls) -> None:
    """--help says what a setting is, its unit and its bound; measurements belong in TASKS.md."""
    classes = [cls, *(type(v) for v in vars(preset_config(cls, "tiny")).values() if dataclasses.is_dataclass(v))]
    long = {f"{c.__name__}.{name}": len(text) for c in classes for name, text in _helps(c).items()}
    long = {name: n for name, n in long.items() if n > HELP_MAX_CHARS}
    assert not long, f"help texts over {HELP_MAX_CHARS} characters: {long}; say the rest in TASKS.md"


@pytest.mark.parametrize("cls", CONFIGS.values())
@pytest.mark.parametrize("preset", ["tiny", "gpt2"])
def test_presets_are_valid(cls, preset) -> None:
    config = preset_config(cls, preset)
    config.validate()
    assert config.preset == preset
    assert config.model.model_name == ("tiny" if preset == "tiny" else "gpt2")
    assert config.data.dataset_name == ("tiny" if preset == "tiny" else "imdb")


def test_preset_defaults_are_not_shared_between_instances() -> None:
    a, b = preset_config(PPOConfig, "tiny"), preset_config(PPOConfig, "tiny")
    a.data.max_prompt_length = 99
    assert b.data.max_prompt_length != 99


def test_parse_config_reads_flags_and_announces_preset(capsys) -> None:
    config = parse_config(
        PPOConfig, ["--preset", "tiny", "--ppo_clip_range", "0.1", "--model.model_name", "gpt2", "--seed", "7"]
    )
    assert (config.ppo_clip_range, config.model.model_name, config.seed, config.preset) == (0.1, "gpt2", 7, "tiny")
    assert "preset: tiny" in capsys.readouterr().err


@pytest.mark.parametrize(("cls", "token_cls"), [(PPOConfig, TokenPPOConfig), (GRPOConfig, TokenGRPOConfig)])
def test_level_token_picks_the_token_config(cls, token_cls) -> None:
    config = parse_config(cls, ["--preset", "tiny", "--level", "token", "--beta", "0.3"])
    assert type(config) is token_cls and (config.level, config.beta) == ("token", 0.3)
    assert type(parse_config(cls, ["--preset", "tiny", "--level=sequence"])) is cls
    assert not hasattr(config, "kl_coef") and not hasattr(parse_config(cls, ["--preset", "tiny"]), "beta")


@pytest.mark.parametrize(
    ("cls", "args", "message"),
    [
        (PPOConfig, ["--beta", "0.1"], "--beta is a token-level setting of train_ppo.py; add --level token."),
        (GRPOConfig, ["--loss_type=dapo"], "--loss_type is a token-level setting of train_grpo.py; add --level token."),
        (
            PPOConfig,
            ["--level", "token", "--kl_coef", "0"],
            "--kl_coef is a sequence-level setting of train_ppo.py; drop it, or drop --level token.",
        ),
        (GRPOConfig, ["--level", "tokens"], 'level=\'tokens\' is unknown; use "sequence" or "token".'),
    ],
)
def test_a_flag_of_the_other_level_is_one_clear_error(cls, args: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(cls, ["--preset", "tiny", *args])
    assert str(info.value) == message


def test_level_must_match_the_class() -> None:
    config = preset_config(PPOConfig, "tiny")
    config.level = "token"
    with pytest.raises(ConfigError, match=r"level='token' needs a TokenPPOConfig \(on the command line, --level token"):
        config.validate()


def test_parse_config_auto_preset_without_cuda(capsys, monkeypatch) -> None:
    monkeypatch.setattr("rlhf_practice.config._cuda_available", lambda: False)
    config = parse_config(GRPOConfig, [])
    assert config.preset == "tiny"
    assert "preset: tiny (auto: no CUDA device found" in capsys.readouterr().err


def test_parse_config_auto_preset_with_cuda(capsys, monkeypatch) -> None:
    monkeypatch.setattr("rlhf_practice.config._cuda_available", lambda: True)
    config = parse_config(PPOConfig, [])
    assert config.preset == "gpt2" and config.model.model_name == "gpt2"
    assert "CUDA is available" in capsys.readouterr().err


BAD_VALUES = [
    (PPOConfig, {"train_batch_size": 0}, "train_batch_size=0 must be a positive integer"),
    (PPOConfig, {"max_new_tokens": -1}, "max_new_tokens=-1 must be a positive integer"),
    (PPOConfig, {"num_steps": 0}, "num_steps=0 must be a positive integer"),
    (PPOConfig, {"learning_rate": 0.0}, "learning_rate=0.0 must lie in (0, 1]"),
    (PPOConfig, {"learning_rate": 1e30}, "learning_rate=1e+30 must lie in (0, 1]"),
    (PPOConfig, {"learning_rate": float("inf")}, "learning_rate=inf must be a finite number"),
    (PPOConfig, {"kl_coef": float("inf")}, "kl_coef=inf must be a finite number"),
    (PPOConfig, {"max_grad_norm": float("inf")}, "max_grad_norm=inf must be a finite number"),
    (PPOConfig, {"temperature": 1e-30}, "temperature=1e-30 must lie in [0.01, 100]"),
    (PPOConfig, {"temperature": float("inf")}, "temperature=inf must be a finite number"),
    (PPOConfig, {"top_k": 10**7}, "top_k=10000000 must lie in [0, vocabulary size]"),
    (PPOConfig, {"seed": -1}, "seed=-1 must lie in [0, 4294967295]"),
    (PPOConfig, {"seed": 10**23}, "seed=100000000000000000000000 must lie in [0, 4294967295]"),
    (PPOConfig, {"run_name": "a/b/c"}, "run_name='a/b/c' must be one folder name"),
    (PPOConfig, {"run_name": "../x"}, "run_name='../x' must be one folder name"),
    (PPOConfig, {"run_name": "/abs"}, "run_name='/abs' must be one folder name"),
    (PPOConfig, {"run_name": ".."}, "run_name='..' must be one folder name"),
    (GRPOConfig, {"grpo_group_size": 100000}, "grpo_group_size=100000 means 1600000 replies per step"),
    (PPOConfig, {"train_batch_size": 10000}, "train_batch_size=10000 means 10000 replies per step"),
    (PPOConfig, {"temperature": 0.0}, "temperature=0.0 must lie in [0.01, 100]"),
    (PPOConfig, {"top_p": 1.5}, "top_p=1.5 must lie in (0, 1]"),
    (PPOConfig, {"top_k": -3}, "top_k=-3 must lie in [0, vocabulary size]"),
    (PPOConfig, {"ppo_clip_range": 0.0}, "ppo_clip_range=0.0 must lie in (0, 1)"),
    (PPOConfig, {"ppo_clip_range": 1.5}, "ppo_clip_range=1.5 must lie in (0, 1)"),
    (PPOConfig, {"ppo_epochs": 0}, "ppo_epochs=0 must be a positive integer"),
    (PPOConfig, {"ppo_num_minibatches": 3}, "train_batch_size=64 must be divisible by ppo_num_minibatches (3)"),
    (PPOConfig, {"value_loss_coef": -1.0}, "value_loss_coef=-1.0 must be >= 0"),
    (PPOConfig, {"kl_coef": -0.1}, "kl_coef=-0.1 must be >= 0"),
    (PPOConfig, {"device": "gpu"}, "device='gpu' is not a device"),
    (PPOConfig, {"preset": "huge"}, "preset='huge' is unknown"),
    (GRPOConfig, {"grpo_group_size": 1}, "grpo_group_size=1 must be >= 2"),
    (TokenGRPOConfig, {"grpo_num_minibatches": 3}, "grpo_num_minibatches=3 must divide the 64 replies per step"),
    (TokenPPOConfig, {"ppo_num_minibatches": 5}, "train_batch_size=64 must be divisible by ppo_num_minibatches (5)"),
    (GRPOConfig, {"max_grad_norm": 0.0}, "max_grad_norm=0.0 must be > 0"),
    (TokenGRPOConfig, {"advantage": "ppo"}, "advantage='ppo' is unknown"),
    (TokenGRPOConfig, {"importance_sampling_level": "reply"}, "importance_sampling_level='reply' is unknown"),
    (TokenGRPOConfig, {"grpo_clip_range_high": 0.0}, "grpo_clip_range_high=0.0 must be > 0 (DAPO: 0.28)"),
    (TokenGRPOConfig, {"grpo_clip_range_high": float("inf")}, "grpo_clip_range_high=inf must be a finite number"),
    (TokenGRPOConfig, {"max_num_gen_batches": 0}, "max_num_gen_batches=0 must be a positive integer"),
    (
        TokenGRPOConfig,
        {"importance_sampling_level": "sequence", "loss_type": "cispo"},
        "importance_sampling_level='sequence' (GSPO) averages one term per reply, which loss_type='cispo' does not",
    ),
    (TokenGRPOConfig, {"dynamic_sampling": True}, "dynamic_sampling=True keeps groups by exact correctness"),
    (
        TokenGRPOConfig,
        {"dynamic_sampling": True, "task": "sort", "reward_model": "rm"},
        "dynamic_sampling=True filters on the task's correctness",
    ),
]


@pytest.mark.parametrize(
    ("cls", "change", "message"),
    BAD_VALUES,
    ids=[",".join(f"{k}={v}" for k, v in c.items()) for _, c, _ in BAD_VALUES],
)
def test_each_bad_value_has_its_message(cls, change, message) -> None:
    config = preset_config(cls, "tiny")
    for key, value in change.items():
        setattr(config, key, value)
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert message in str(info.value)


def _bounded_fields(config: object, prefix: str = "") -> list[tuple[str, object, str, Bound]]:
    """(dotted name, the (nested) config that holds it, field name, bound) of every field that declares a bound."""
    out = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out += _bounded_fields(value, f"{prefix}{f.name}.")
        elif f.metadata.get("bound") is not None:
            out.append((prefix + f.name, config, f.name, f.metadata["bound"]))
    return out


# A bad value for each bound given as a rule.
RULE_BREAKERS = {"impl": "  ", "device": "gpu", "run_name": "a/b", "pairs_file": "pairs.txt", "lora_target_modules": []}
RULE_BREAKERS["reward_model"] = "  "  # train_ppo.py / train_grpo.py: blank (the folder is checked at start-up)
RULE_BREAKERS["grpo_clip_range_high"] = -0.1  # train_grpo.py --level token: None or > 0


def _just_outside(bound: Bound, is_int: bool, name: str) -> list[object]:
    if bound.rule is not None:
        return [RULE_BREAKERS[name]]
    if bound.choices:
        return ["nope"]
    step = 1 if is_int else 1e-6
    values = []
    if bound.low > -math.inf:
        values.append(bound.low if bound.open_low else bound.low - step)
    if bound.high < math.inf:
        values.append(bound.high if bound.open_high else bound.high + step)
    return [int(v) if is_int else float(v) for v in values]


BOUNDED = [(cls, *field) for cls in CONFIGS.values() for field in _bounded_fields(preset_config(cls, "tiny"))]


@pytest.mark.parametrize(
    ("cls", "name", "holder", "attr", "bound"), BOUNDED, ids=[f"{c.__name__}-{n}" for c, n, *_ in BOUNDED]
)
def test_every_declared_bound_is_enforced(cls, name, holder, attr, bound: Bound) -> None:
    """A value just outside each bound gives exactly that bound's message; its closed ends are inside."""
    is_int = type(getattr(holder, attr)) is int
    for value in _just_outside(bound, is_int, name):
        config = preset_config(cls, "tiny")
        owner = config
        for part in name.split(".")[:-1]:
            owner = getattr(owner, part)
        setattr(owner, attr, value)
        with pytest.raises(ConfigError) as info:
            config.validate()
        assert str(info.value) == f"{name}={value!r} {bound.problem()}."
    for end, open_end in ((bound.low, bound.open_low), (bound.high, bound.open_high)):
        if math.isfinite(end) and bound.rule is None and not bound.choices:
            assert bound.accepts(end) != open_end, f"{name}: {bound.shown()} and accepts({end}) disagree"


def test_every_rule_has_a_value_that_breaks_it() -> None:
    rules = {name for _, name, _, _, bound in BOUNDED if bound.rule is not None}
    assert rules == set(RULE_BREAKERS)


@pytest.mark.parametrize(
    "name",
    ["short_penalty_weight", "long_penalty_weight", "short_min_words", "long_max_words", "praise_penalty_weight",
     "praise_free_words"],
)  # fmt: skip
def test_reward_term_settings_must_not_be_negative(name: str) -> None:
    config = preset_config(PPOConfig, "tiny")
    setattr(config.reward, name, -1)
    with pytest.raises(ConfigError, match=rf"reward\.{name}=-1 must be >= 0"):
        config.validate()


def test_bad_prompt_lengths() -> None:
    config = preset_config(GRPOConfig, "tiny")
    config.data.min_prompt_length = 9
    with pytest.raises(ConfigError, match=r"data.min_prompt_length=9 must not exceed data.max_prompt_length \(6\)"):
        config.validate()


def test_unknown_preset_on_the_command_line() -> None:
    with pytest.raises(ConfigError, match='preset=\'huge\' is unknown; use "auto", "tiny" or "gpt2"'):
        parse_config(PPOConfig, ["--preset", "huge"])


def test_load_impl_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'impl=.nope. is neither "student" nor a folder; give "student"'):
        load_impl("nope")
    (tmp_path / "ppo.py").write_text("")
    with pytest.raises(ConfigError, match=r"missing .*grpo\.py; the folder needs both ppo\.py and grpo\.py"):
        load_impl(str(tmp_path))


def test_value_head_init_is_checked() -> None:
    config = preset_config(PPOConfig, "tiny")
    config.model.value_head_init = "gaussian"
    with pytest.raises(ConfigError, match=r"model.value_head_init='gaussian' is unknown; use \"zero\" or \"random\""):
        config.validate()


def test_value_head_starts_at_zero_or_random() -> None:
    from rlhf_practice.modeling import PolicyValueModel

    assert PolicyValueModel.from_pretrained("tiny").value_head.weight.abs().sum() == 0
    assert PolicyValueModel.from_pretrained("tiny", value_head_init="random").value_head.weight.abs().sum() > 0
