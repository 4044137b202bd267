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
        help='implementation to grade: "student" (your rlhf_practice/rl/; the default, or env RLHF_IMPL) or a folder with ppo.py and grpo.py (and token_level.py, lecture.py, dpo.py)',
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


def pytest_report_header(config: pytest.Config) -> str:
    return f"rlhf_practice implementation under test: --impl {config.getoption('--impl')}"


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Impl:
    """The implementation named by --impl."""
    return load_impl(request.config.getoption("--impl"))
