"""Errors the scripts turn into one readable line instead of a traceback."""

import torch


class RLHFPracticeError(Exception):
    """A predictable problem with a message that says what to change."""


class ConfigError(RLHFPracticeError, ValueError):
    """A configuration value is invalid; the message names the setting."""


class DataError(RLHFPracticeError):
    """A dataset could not be found, read or reached."""


class ModelLoadError(RLHFPracticeError):
    """A model or tokenizer could not be found, read or reached."""


class TrainingError(RLHFPracticeError):
    """Training hit a state it cannot continue from (a NaN loss, for example)."""


def check_finite(name: str, value: torch.Tensor) -> None:
    """Raise :class:`TrainingError` if ``value`` holds NaN or inf (called before each backward)."""
    if not torch.isfinite(value).all():
        raise TrainingError(
            f"{name} is {value.detach().float().cpu().tolist()} (not finite). Check your rl/ functions for a "
            "division by a zero std or exp() of large log-probs, or lower learning_rate."
        )
