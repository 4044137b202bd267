"""The course, declared once: which student file holds which graded function, where the answer key
is, which TASKS.md section explains each function, and how many points it is worth.

Everything that needs to know the course reads :data:`TASKS`: the student-file generator, the
scaffold tests, the pytest plugin, the grader, the mutation check and the release
(``python -m rlhf_practice.course release OUT``). :func:`load_impl` picks whose implementation runs;
the answer key is reached only through it, never imported directly.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.errors import ConfigError

ROOT = PACKAGE_DIR.parent
ANSWER_DIR = ROOT / "answer"


@dataclass(frozen=True)
class Task:
    """One graded function of the course."""

    function: str
    module: str  # "ppo" or "grpo": rlhf_practice/rl/<module>.py, answer/<module>_answer.py
    section: str  # the TASKS.md section that explains it
    points: float

    @property
    def student_file(self) -> str:
        return f"rlhf_practice/rl/{self.module}.py"

    @property
    def answer_file(self) -> str:
        return f"answer/{self.module}_answer.py"


TASKS: tuple[Task, ...] = (
    Task("compute_advantages", "ppo", "§1.2", 25.0),
    Task("ppo_clip_loss", "ppo", "§2.2", 25.0),
    Task("compute_group_advantages", "grpo", "§3.2", 25.0),
    Task("grpo_loss", "grpo", "§3.3", 25.0),
)
MODULES: tuple[str, ...] = tuple(dict.fromkeys(task.module for task in TASKS))


def has_answer_key() -> bool:
    """True in the instructor's repository, False in a student release."""
    return ANSWER_DIR.is_dir()


def graded(module: str) -> dict[str, str]:
    """{function: TASKS.md section} of the graded functions in one student file."""
    return {task.function: task.section for task in TASKS if task.module == module}


def probe_args(task: Task) -> tuple:
    """A tiny valid input for ``task``'s function: enough to tell a stub from an implementation."""
    import torch

    two = torch.tensor([0.5, -0.5])
    return {
        "compute_advantages": (two, torch.zeros(2)),
        "ppo_clip_loss": (two, two, two, 0.2),
        "compute_group_advantages": (two, 2),
        "grpo_loss": (two, two),
    }[task.function]


class Impl:
    """The modules of one implementation (``impl.ppo``, ``impl.grpo``), and where they came from.

    Each module is imported on first use, so that a submission whose grpo.py does not even parse
    still runs (and is graded) on its ppo.py.
    """

    def __init__(self, name: str, loaders: dict[str, Callable[[], ModuleType]]):
        self.name = name
        self._loaders = loaders
        self._modules: dict[str, ModuleType] = {}

    def module(self, key: str) -> ModuleType:
        if key not in self._modules:
            self._modules[key] = self._loaders[key]()
        return self._modules[key]

    @property
    def ppo(self) -> ModuleType:
        return self.module("ppo")

    @property
    def grpo(self) -> ModuleType:
        return self.module("grpo")

    def check_implemented(self, module: str) -> None:
        """Call each graded function of ``module`` on a tiny input: an unfinished stub raises
        NotImplementedError now, before any model or data is loaded."""
        for task in TASKS:
            if task.module == module:
                getattr(self.module(module), task.function)(*probe_args(task))

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
        return Impl(name, {m: (lambda m=m: importlib.import_module(f"rlhf_practice.rl.{m}")) for m in MODULES})
    if name == "answer":
        if not has_answer_key():
            raise ConfigError(
                "impl='answer': the answer key is not part of this student release; run your own "
                "implementation (--impl student, the default)."
            )
        files = {m: ANSWER_DIR / f"{m}_answer.py" for m in MODULES}
    else:
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ConfigError(f'impl={name!r} is neither "student", "answer" nor a folder; use one of those.')
        files = {m: folder / f"{m}.py" for m in MODULES}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise ConfigError(f"impl={name!r}: missing {', '.join(missing)}; the folder needs both ppo.py and grpo.py.")
    tag = hashlib.sha1(str(files["ppo"].resolve()).encode()).hexdigest()[:10]
    return Impl(name, {m: (lambda p=p, m=m: _load_file(p, f"rlhf_impl_{tag}_{m}")) for m, p in files.items()})
