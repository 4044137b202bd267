"""pytest plugin: ``--impl student|FOLDER`` picks whose rl/ functions the graded tests run.

Loaded before the command line is read (pyproject.toml's addopts: ``-p rlhf_practice.pytest_plugin``; it is
also a pytest11 entry point), so that ``pytest -m graded --impl=DIR`` reads DIR as the option's value and not
as a test path.
"""

from __future__ import annotations

import os

import pytest

from rlhf_practice.course import ROOT, Impl, load_impl
from rlhf_practice.errors import ConfigError


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='implementation to grade: "student" (your rlhf_practice/rl/; the default, or env RLHF_IMPL) or a folder with ppo.py and grpo.py (and token_level.py, lecture.py, dpo.py, reward_model.py, after_grpo.py, best_of_n.py, online.py)',
    )


def pytest_configure(config: pytest.Config) -> None:
    # Also registered in pyproject.toml, which pytest does not read when it picks another rootdir.
    config.addinivalue_line("markers", "graded: tests that grade the student functions in rlhf_practice/rl/")
    impl_given = any(arg.startswith("--impl") for arg in config.invocation_params.args)
    if impl_given and config.rootpath.resolve() != ROOT.resolve():
        # `pytest --impl DIR` (a space) makes pytest take DIR for a test path and its rootdir, and obey
        # any pytest.ini or conftest.py planted there.
        pytest.exit(
            f"error: pytest's rootdir is {config.rootpath}, not this repository ({ROOT}); "
            "run pytest from the repository and write --impl=DIR (with '=').",
            returncode=2,
        )
    try:
        load_impl(config.getoption("--impl"))
    except ConfigError as err:
        pytest.exit(f"error: {err}", returncode=2)


WHOLE_RUNS = ("not slow and not processes", "graded", "not graded")  # -m of runs worth several processes
MAX_WORKERS = 4  # tests run one file per process at a time: past a few, processes wait for the longest file


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many processes ``-n auto`` (pyproject.toml's addopts) starts: for the whole suite, ``-m graded`` or
    ``-m "not graded"``, one per CPU up to :data:`MAX_WORKERS`; 0 (this process alone) for anything narrower:
    ``-k``, named files, ``--collect-only``, ``-m slow`` or ``-m processes`` (those start processes of their own).
    Checking one function (``-k``) would spend more on starting workers than on its tests.
    PYTEST_XDIST_AUTO_NUM_WORKERS sets the number by hand."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    narrow = (
        config.option.keyword
        or config.option.collectonly
        or config.args_source == pytest.Config.ArgsSource.ARGS
        or (config.option.markexpr or "") not in WHOLE_RUNS
    )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 0 if narrow else min(MAX_WORKERS, cpus)


def pytest_report_header(config: pytest.Config) -> str:
    return f"rlhf_practice implementation under test: --impl {config.getoption('--impl')}"


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Impl:
    """The implementation named by --impl."""
    return load_impl(request.config.getoption("--impl"))
