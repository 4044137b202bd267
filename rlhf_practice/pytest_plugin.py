"""pytest plugin: ``--impl student|answer|FOLDER`` picks whose rl/ functions the graded tests run.

Installed as a pytest11 entry point (``pip install -e .``, part of requirements.txt), so that
``pytest -m graded --impl DIR`` reads DIR as the option's value and not as a test path.
"""

from __future__ import annotations

import os

import pytest

from rlhf_practice.course import Impl, load_impl


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='implementation to grade: "student" (default; env RLHF_IMPL), "answer", or a folder with ppo.py and grpo.py',
    )


def pytest_configure(config: pytest.Config) -> None:
    # Also registered in pyproject.toml; repeated here because `pytest --impl DIR` (with a space) makes
    # pytest pick DIR as its rootdir, and then pyproject.toml is not read.
    config.addinivalue_line("markers", "graded: tests that grade the student functions in rlhf_practice/rl/")


def pytest_report_header(config: pytest.Config) -> str:
    return f"rlhf_practice implementation under test: --impl {config.getoption('--impl')}"


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Impl:
    """The implementation named by --impl."""
    return load_impl(request.config.getoption("--impl"))


@pytest.fixture(scope="session")
def answer() -> Impl:
    """The answer key, for comparisons on random inputs."""
    return load_impl("answer")
