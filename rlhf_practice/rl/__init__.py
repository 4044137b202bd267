"""The RL algorithms, and :func:`load_impl`, which picks whose implementation runs.

``rl/ppo.py`` and ``rl/grpo.py`` are the student files. The answer key lives in ``answer/`` at the
repository root; it is reached only through :func:`load_impl`, never imported directly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.errors import ConfigError

ANSWER_DIR = PACKAGE_DIR.parent / "answer"

# The graded functions of each student file, and the TASKS.md section that explains each.
GRADED_FUNCTIONS: dict[str, dict[str, str]] = {
    "ppo": {"compute_advantages": "§1.2", "ppo_clip_loss": "§2.2"},
    "grpo": {"compute_group_advantages": "§3.2", "grpo_loss": "§3.3"},
}


@dataclass(frozen=True)
class Impl:
    """The two modules of one implementation, and where they came from."""

    name: str
    ppo: ModuleType
    grpo: ModuleType


def _load_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def load_impl(name: str = "student") -> Impl:
    """The ppo and grpo modules of ``name``.

    ``name`` is "student" (``rlhf_practice/rl/``), "answer" (``answer/*_answer.py``) or a folder
    that holds ``ppo.py`` and ``grpo.py`` (a copy of a student's ``rlhf_practice/rl/``).
    """
    if name == "student":
        from rlhf_practice.rl import grpo, ppo

        return Impl(name, ppo, grpo)
    if name == "answer":
        files = {"ppo": ANSWER_DIR / "ppo_answer.py", "grpo": ANSWER_DIR / "grpo_answer.py"}
    else:
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ConfigError(f'impl={name!r} is neither "student", "answer" nor a folder; use one of those.')
        files = {"ppo": folder / "ppo.py", "grpo": folder / "grpo.py"}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise ConfigError(f"impl={name!r}: missing {', '.join(missing)}; the folder needs both ppo.py and grpo.py.")
    tag = hashlib.sha1(str(files["ppo"].resolve()).encode()).hexdigest()[:10]
    modules = {key: _load_file(path, f"rlhf_impl_{tag}_{key}") for key, path in files.items()}
    return Impl(name, modules["ppo"], modules["grpo"])
