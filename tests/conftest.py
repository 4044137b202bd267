"""Loads the project's pytest plugin (the --impl option and the impl fixture), and says which working
implementation the end-to-end tests (training scripts, walkthrough) run: the one --impl names, once
the functions those runs call are written.

pyproject.toml's addopts already loads the plugin (``-p rlhf_practice.pytest_plugin``), so that line is
a no-op there; it keeps a run with other options working.
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _runs import _not_done
from _selection import module_may_match

from rlhf_practice.course import REQUIRED_MODULES, Impl

pytest_plugins = ["rlhf_practice.pytest_plugin"]

# The tests run a tiny model (4 layers of width 128) on a few short replies: a second CPU thread gains
# nothing there, and while it waits for its share it spins, which on a busy 2-core machine makes a
# training step tens of times slower. One thread here (torch reads OMP_NUM_THREADS when it is first
# imported) and in the scripts the tests start; an OMP_NUM_THREADS of your own is kept.
if "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:  # imported before this file (by another plugin): too late for the variable
        sys.modules["torch"].set_num_threads(1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection imported (torch, Hypothesis, the tests) stays for the whole run: freezing it keeps
    the full garbage collections that Hypothesis and pytest make (a tenth of a second each over torch's
    objects) from walking it again."""
    gc.freeze()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip importing a test module none of whose tests -m can select (``pytest -m graded`` imports only the
    modules that mark a test graded): see tests/_selection.py."""
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not module_may_match(collection_path, config.option.markexpr) or None
    return None


REPO_PAIRS = Path(__file__).resolve().parents[1] / "pairs"  # train_dpo.py's default --pairs_dir, the student's own


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.is_dir() else set()


@pytest.fixture(autouse=True)
def _tests_leave_the_repository_pairs_alone(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests write only to temporary folders: a DPO run in a test must give --pairs_dir (tests/_runs.py
    gives one), or the pairs it builds land in the student's pairs/."""
    before = _files(REPO_PAIRS)
    yield
    new = sorted(str(p.relative_to(REPO_PAIRS.parent)) for p in _files(REPO_PAIRS) - before)
    assert not new, f"{request.node.nodeid} wrote {new} into the repository; give --pairs_dir a temporary folder"


def _is_done(impl: Impl, modules: tuple[str, ...]) -> bool:
    return _not_done(impl, modules) is None


@pytest.fixture(scope="session")
def working_impl(impl: Impl) -> str:
    """--impl value for end-to-end runs: the implementation under test, once tasks 1-3 are done."""
    if _is_done(impl, REQUIRED_MODULES):
        return impl.name
    pytest.skip("runs the training scripts end to end: finish the four functions of tasks 1-3 first")


@pytest.fixture(scope="session")
def working_token_impl(impl: Impl, working_impl: str) -> str:
    """Like working_impl, for the token-level runs: they also need the functions of tasks 7-9."""
    if not _is_done(impl, ("token_level",)):  # lecture.py (task 10) is not needed here
        pytest.skip("runs the token-level scripts end to end: finish the functions of tasks 7-9 first")
    return working_impl


@pytest.fixture(scope="session")
def working_lecture_impl(impl: Impl) -> str:
    """--impl value for the lecture's runs (task 10): the implementation under test, once rl/lecture.py is done."""
    if _is_done(impl, ("lecture",)):
        return impl.name
    pytest.skip("runs the lecture's experiment end to end: finish the functions of task 10 first")


@pytest.fixture(scope="session")
def working_sources(impl: Impl, working_impl: str) -> dict[str, str]:
    """{"ppo.py": source, "grpo.py": source} of the working implementation, to copy and patch."""
    return {f"{m}.py": inspect.getsource(impl.module(m)) for m in REQUIRED_MODULES}


def _make_reward_model(folder: Path, task: str = "sentiment", zero_head: bool = False, record: bool = True) -> Path:
    """A reward-model folder as train_reward_model.py writes one, made without training: the tiny policy's
    weights in a GPT2ForSequenceClassification with one label (a new score head, seeded), its tokenizer,
    and a reward_model.json for ``task`` (unless not ``record``) whose score_mean and score_std are the raw
    scores' over a few fixed texts. ``zero_head``: a score head of zeros, so every sequence scores 0 and
    the normalised reward is 0 for every reply."""
    import json

    import torch
    from transformers import GPT2ForSequenceClassification
    from transformers.utils import logging as hf_logging

    from rlhf_practice.modeling import TINY_MODEL_DIR, load_tokenizer

    tokenizer = load_tokenizer("tiny")
    hf_logging.set_verbosity_error()  # the new score head's load report
    hf_logging.disable_progress_bar()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2ForSequenceClassification.from_pretrained(TINY_MODEL_DIR, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    if zero_head:
        torch.nn.init.zeros_(model.score.weight)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if record:
        texts = ["The film was great fun.", "A dull movie.", "I loved it", "bad, bad, bad", "It was a film"]
        with torch.no_grad():
            scores = torch.cat([model(**tokenizer(text, return_tensors="pt")).logits[:, 0] for text in texts])
        mean, std = scores.mean().item(), (1.0 if zero_head else scores.std().item())
        (folder / "reward_model.json").write_text(
            json.dumps({"task": task, "score_mean": mean, "score_std": std, "normalization_samples": len(texts)})
        )
    return folder


@pytest.fixture(scope="session")
def make_reward_model() -> Callable[..., Path]:
    """:func:`_make_reward_model`, for tests that need a folder of their own (a fixture: ``import conftest``
    in a test module may find another conftest.py of the suite, which shares the module name)."""
    return _make_reward_model


@pytest.fixture(scope="session")
def reward_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reward-model folder for the tiny preset's sentiment task (see :func:`_make_reward_model`)."""
    return _make_reward_model(tmp_path_factory.mktemp("reward_model"))
