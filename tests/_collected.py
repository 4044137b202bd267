"""A pytest plugin for tests/test_selection.py: once collection is done, writes each test's module, name,
-k keywords and markers as JSON lines to the file that $RLHF_COLLECTED names."""

from __future__ import annotations

import json
import os

import pytest
from _pytest.mark import KeywordMatcher  # pytest is pinned (requirements.txt)


def pytest_collection_finish(session: pytest.Session) -> None:
    with open(os.environ["RLHF_COLLECTED"], "w", encoding="utf-8") as out:
        for item in session.items:
            row = {
                "path": str(item.path),
                "name": item.name,
                "keywords": sorted(KeywordMatcher.from_item(item)._names),
                "markers": sorted({m.name for m in item.iter_markers()}),
            }
            out.write(json.dumps(row) + "\n")
