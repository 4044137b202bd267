"""The RL algorithms, and :func:`load_impl`, which picks whose implementation runs.

``rl/ppo.py`` and ``rl/grpo.py`` are the student files. The answer key lives in ``answer/`` at the
repository root; it is reached only through :func:`load_impl`, never imported directly.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
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


class Impl:
    """The two modules of one implementation (``impl.ppo``, ``impl.grpo``), and where they came from.

    Each module is imported on first use, so that a submission whose grpo.py does not even parse
    still runs (and is graded) on its ppo.py.
    """

    def __init__(self, name: str, loaders: dict[str, Callable[[], ModuleType]]):
        self.name = name
        self._loaders = loaders
        self._modules: dict[str, ModuleType] = {}

    def _module(self, key: str) -> ModuleType:
        if key not in self._modules:
            self._modules[key] = self._loaders[key]()
        return self._modules[key]

    @property
    def ppo(self) -> ModuleType:
        return self._module("ppo")

    @property
    def grpo(self) -> ModuleType:
        return self._module("grpo")

    def __repr__(self) -> str:
        return f"Impl({self.name!r})"


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
    that holds ``ppo.py`` and ``grpo.py`` (a copy of a student's ``rlhf_practice/rl/``). Missing
    files are reported at once; the modules themselves are imported on first use.
    """
    if name == "student":
        return Impl(
            name,
            {
                "ppo": lambda: importlib.import_module("rlhf_practice.rl.ppo"),
                "grpo": lambda: importlib.import_module("rlhf_practice.rl.grpo"),
            },
        )
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
    return Impl(
        name,
        {key: (lambda path=path, key=key: _load_file(path, f"rlhf_impl_{tag}_{key}")) for key, path in files.items()},
    )
