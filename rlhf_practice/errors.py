"""Errors the scripts turn into one readable line instead of a traceback."""


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


class ImplementationError(TrainingError):
    """A graded function (rl/*.py, or the --impl folder's copy) raised on a valid input; the message names the
    function, its error, the line of the implementation it came from and the test that shows it."""
