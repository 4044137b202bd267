"""The course, declared once: which student file holds which graded function, which TASKS.md section
explains each function, and how many points it is worth.

Everything that needs to know the course reads :data:`GRADED`: the student-file generator, the
scaffold tests, the pytest plugin, the grader, the mutation check and the student release.
:func:`load_impl` picks whose implementation runs; the instructor's answer key is reached only
through it, never imported directly.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.errors import ConfigError, ImplementationError

ROOT = PACKAGE_DIR.parent
ANSWER_DIR = ROOT / "answer"  # the instructor's answer key: not part of a student release


@dataclass(frozen=True)
class GradedFunction:
    """One graded function of the course."""

    function: str
    module: str  # "ppo", "grpo", ..., "best_of_n" or "online" (:data:`MODULES`): the student file rlhf_practice/rl/<module>.py
    section: str  # the TASKS.md section that explains it
    points: float
    # A tiny valid input, enough to tell a stub from an implementation (:func:`probe_args`): its arguments,
    # where a list of floats stands for a float tensor of that shape; or a function that returns them.
    probe: tuple | Callable[[], tuple] = field(compare=False, repr=False)

    @property
    def student_file(self) -> str:
        return f"rlhf_practice/rl/{self.module}.py"

    @property
    def answer_file(self) -> str:
        """The answer key's version of the student file (instructor's copy only), relative to the repository."""
        return answer_path(self.module).relative_to(ROOT).as_posix()


def _reply_batch() -> tuple:
    """(model, input_ids, attention_mask, prompt_lengths): a one-layer GPT-2 and one prompt + reply of two tokens each."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=8, n_positions=8, n_embd=8, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    return model, torch.tensor([[3, 4, 5, 0]]), torch.ones(1, 4, dtype=torch.long), torch.tensor([2])


def _score_batch() -> tuple:
    """(model, input_ids, attention_mask, prompt_lengths): a one-layer GPT-2 with a score head and one
    prompt + reply of two tokens each."""
    import torch
    from transformers import GPT2Config, GPT2ForSequenceClassification

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=8, n_positions=8, n_embd=8, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0, num_labels=1
    )
    model = GPT2ForSequenceClassification(config).eval()
    return model, torch.tensor([[3, 4, 5, 0]]), torch.ones(1, 4, dtype=torch.long), torch.tensor([2])


TWO = [0.5, -0.5]  # two numbers (rewards, log-probs, ...)
ROW, MASK = [[0.5, -0.5]], [[1.0, 1.0]]  # one reply of two tokens, and its mask
ORDER = ([1, 0, 2], [0, 1, 2])  # a sort prompt and a reply

GRADED: tuple[GradedFunction, ...] = (
    GradedFunction("compute_advantages", "ppo", "§1.2", 25.0, (TWO, [0.0, 0.0])),
    GradedFunction("ppo_clip_loss", "ppo", "§2.2", 25.0, (TWO, TWO, TWO, 0.2)),
    GradedFunction("compute_group_advantages", "grpo", "§3.2", 25.0, (TWO, 2)),
    GradedFunction("grpo_loss", "grpo", "§3.3", 25.0, (TWO, TWO)),
    # The advanced, token-level track (tasks 7-9): points on top of the 100 of tasks 1-4.
    GradedFunction("masked_mean", "token_level", "§7.2", 5.0, (ROW, MASK)),
    GradedFunction("per_token_kl", "token_level", "§7.3", 10.0, (ROW, ROW, MASK, "k3")),
    GradedFunction("compute_gae", "token_level", "§8.2", 15.0, (ROW, ROW, MASK, 1.0, 0.95)),
    GradedFunction("token_ppo_loss", "token_level", "§8.3", 10.0, (ROW,) * 6 + (MASK, 0.2, 0.2)),
    GradedFunction("grpo_clip_loss", "token_level", "§9.2", 10.0, (ROW, ROW, ROW, [1.0], MASK, 0.2, 0.04, "grpo", 2)),
    # Task 10, the policy-gradient lecture on sorting (seed 004): points on top as well.
    GradedFunction("sort_distance_reward", "lecture", "§10.1", 5.0, ORDER),
    GradedFunction("sort_inclusion_ordering_reward", "lecture", "§10.1", 5.0, ORDER),
    GradedFunction("compute_deltas", "lecture", "§10.2", 10.0, (ROW, "centered_rewards")),
    GradedFunction("compute_loss", "lecture", "§10.3", 15.0, ([[[0.5], [-0.5]]], ROW, "clipped")),
    GradedFunction("compute_kl_penalty", "lecture", "§10.4", 5.0, (ROW, ROW)),
    # Task 12, DPO: preference pairs instead of a reward in the loop; points on top as well.
    GradedFunction("reply_logps", "dpo", "§12.2", 10.0, _reply_batch),
    GradedFunction("reference_logps", "dpo", "§12.2", 5.0, _reply_batch),
    GradedFunction("dpo_loss", "dpo", "§12.3", 10.0, (TWO, TWO, TWO[::-1], TWO[::-1], 0.1)),
    # Task 13, a reward model learned from preference pairs; points on top as well.
    GradedFunction("get_reward", "reward_model", "§13.2", 10.0, _score_batch),
    GradedFunction("reward_loss", "reward_model", "§13.3", 10.0, (TWO, TWO[::-1])),
    # Task 14, after GRPO: the baselines, ratios and filters of RLOO, DAPO, GSPO and CISPO; points on top as well.
    GradedFunction("compute_rloo_advantages", "after_grpo", "§14.2", 10.0, (TWO, 2)),
    GradedFunction(
        "clip_higher_loss", "after_grpo", "§14.3", 10.0, (ROW, ROW, ROW, [1.0], MASK, 0.2, 0.28, 0.04, "grpo", 2)
    ),
    GradedFunction("gspo_loss", "after_grpo", "§14.4", 10.0, (ROW, ROW, ROW, [1.0], MASK, 3e-4, 4e-4, 0.04)),
    GradedFunction("cispo_loss", "after_grpo", "§14.5", 10.0, (ROW, ROW, ROW, [1.0], MASK, 0.28, 0.04)),
    GradedFunction("filter_groups", "after_grpo", "§14.6", 5.0, ([1.0, 0.0], 2)),
    # Task 15, best-of-n and ensembles: over-optimization measured; points on top as well.
    GradedFunction("best_of_n_kl", "best_of_n", "§15.2", 5.0, (2,)),
    GradedFunction("best_of_n_estimate", "best_of_n", "§15.3", 15.0, (ROW, ROW)),
    GradedFunction("ensemble_reward", "best_of_n", "§15.5", 10.0, (ROW, "mean")),
    # Task 16, online RLHF: which fresh pairs get labels, and the detector that needs no gold; points on top as well.
    GradedFunction("select_pairs", "online", "§16.2", 10.0, (ROW, [[-0.5, 0.5]], 1, "uncertain")),
    GradedFunction("proxy_agreement", "online", "§16.3", 10.0, (TWO, TWO[::-1], TWO, TWO[::-1])),
)
MODULES: tuple[str, ...] = tuple(dict.fromkeys(g.module for g in GRADED))
REQUIRED_MODULES = ("ppo", "grpo")  # a folder --impl must hold these; token_level.py (tasks 7-9), lecture.py
# (task 10), dpo.py (task 12), reward_model.py (task 13), after_grpo.py (task 14), best_of_n.py (task 15) and online.py
# (task 16) only for their own runs and tests


def raised(function: str, err: Exception, when: str) -> ImplementationError:
    """The one line for ``err``, raised inside the graded ``function`` ``when`` (e.g. "on a tiny input at start-up"):
    the function, the error's type and first line, the line of its file it came from (the innermost frame in the
    file that defines ``function``), and what to do."""
    frames = traceback.extract_tb(err.__traceback__)
    module = module_of(function)
    own = [f for f in frames if Path(f.filename).stem in (module, f"{module}_answer")] or frames[-1:]
    where = f" ({own[-1].filename}, line {own[-1].lineno})" if own else ""
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    section = graded(module)[function]
    return ImplementationError(
        f"{function} raised {type(err).__name__}{': ' * bool(message)}{message}{where} {when}; "
        f"pytest -m graded -k {function} shows what goes wrong (TASKS.md {section}): fix it, then run this again."
    )


def answer_path(module: str) -> Path:
    """Where the instructor's copy keeps the answer key's version of rlhf_practice/rl/<module>.py."""
    return ANSWER_DIR / f"{module}_answer.py"  # a student release has no such file


def has_answer_key() -> bool:
    """True in the instructor's repository, False in a student release."""
    return ANSWER_DIR.is_dir()


def module_of(function: str) -> str:
    """The student file ("ppo", "grpo", ...) that holds the graded ``function``."""
    return next(g.module for g in GRADED if g.function == function)


def graded(module: str) -> dict[str, str]:
    """{function: TASKS.md section} of the graded functions in one student file."""
    return {g.function: g.section for g in GRADED if g.module == module}


def probe_args(g: GradedFunction) -> tuple:
    """``g``'s probe as arguments: a new call's own tensors (a list of floats as a float tensor)."""
    import torch

    if callable(g.probe):
        return g.probe()

    def floats(value: object) -> bool:
        return isinstance(value, list) and all(floats(v) if isinstance(v, list) else type(v) is float for v in value)

    return tuple(torch.tensor(a) if floats(a) else list(a) if isinstance(a, list) else a for a in g.probe)


class Impl:
    """The modules of one implementation (``impl.ppo``, ``impl.grpo``, ``impl.token_level``,
    ``impl.lecture``, ``impl.dpo``, ``impl.reward_model``, ``impl.after_grpo``, ``impl.best_of_n``, ``impl.online``), and
    where they came from.

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

    @property
    def token_level(self) -> ModuleType:
        return self.module("token_level")

    @property
    def lecture(self) -> ModuleType:
        return self.module("lecture")

    @property
    def dpo(self) -> ModuleType:
        return self.module("dpo")

    @property
    def reward_model(self) -> ModuleType:
        return self.module("reward_model")

    @property
    def after_grpo(self) -> ModuleType:
        return self.module("after_grpo")

    @property
    def best_of_n(self) -> ModuleType:
        return self.module("best_of_n")

    @property
    def online(self) -> ModuleType:
        return self.module("online")

    def check_implemented(self, module: str, functions: Sequence[str] | None = None) -> None:
        """Call each graded function of ``module`` (only those named in ``functions``, when given) on a
        tiny input: an unfinished stub raises NotImplementedError now, before any model or data is loaded,
        and a function that raises anything else is one :class:`ImplementationError` line (:func:`raised`)."""
        for g in GRADED:
            if g.module == module and (functions is None or g.function in functions):
                try:
                    getattr(self.module(module), g.function)(*probe_args(g))
                except NotImplementedError:
                    raise
                except Exception as err:
                    raise raised(g.function, err, "on a tiny input at start-up") from err

    def check_functions(self, functions: Sequence[str]) -> None:
        """:meth:`check_implemented` for the graded ``functions``, in the course's order (the earliest section's
        first), opening only the student files that hold them."""
        for module in dict.fromkeys(g.module for g in GRADED if g.function in functions):
            self.check_implemented(module, functions)

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

    ``name`` is "student" (``rlhf_practice/rl/``) or a folder that holds ``ppo.py`` and ``grpo.py`` and, for
    tasks 7-9, 10, 12, 13, 14 and 15, ``token_level.py``, ``lecture.py``, ``dpo.py``, ``reward_model.py``,
    ``after_grpo.py`` and ``best_of_n.py`` (a copy of a student's ``rlhf_practice/rl/``). The instructor's copy also takes its answer key
    (:func:`answer_path`); a student release, which has none, says so in one line. Missing ppo.py or grpo.py is
    reported at once, a missing token_level.py, lecture.py, dpo.py, reward_model.py, after_grpo.py or best_of_n.py
    when it is first needed; the modules themselves are imported on first use.
    """
    if name == "student":
        return Impl(name, {m: (lambda m=m: importlib.import_module(f"rlhf_practice.rl.{m}")) for m in MODULES})
    if name == "answer":
        if not has_answer_key():
            raise ConfigError(
                "impl='answer': the answer key is not part of this student release; run your own "
                "implementation (--impl student, the default)."
            )
        files = {m: answer_path(m) for m in MODULES}
    else:
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ConfigError(
                f'impl={name!r} is neither "student" nor a folder; give "student" (your rlhf_practice/rl/) '
                "or a folder with ppo.py and grpo.py."
            )
        files = {m: folder / f"{m}.py" for m in MODULES}
    missing = [str(files[m]) for m in REQUIRED_MODULES if not files[m].is_file()]
    if missing:
        raise ConfigError(f"impl={name!r}: missing {', '.join(missing)}; the folder needs both ppo.py and grpo.py.")
    tag = hashlib.sha1(str(files["ppo"].resolve()).encode()).hexdigest()[:10]

    def loader(path: Path, module: str) -> Callable[[], ModuleType]:
        def load() -> ModuleType:
            if not path.is_file():  # later tracks are optional: only their own runs and tests need them
                tasks = {g.section.split(".")[0] for g in GRADED if g.module == module}
                raise ConfigError(
                    f"impl={name!r}: missing {path}; the runs and tests of {', '.join(sorted(tasks))} need it."
                )
            return _load_file(path, f"rlhf_impl_{tag}_{module}")

        return load

    return Impl(name, {m: loader(p, m) for m, p in files.items()})
