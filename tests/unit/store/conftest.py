"""Fixtures for the store tests: a fresh run database per test, always closed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import Store
from store.mast.schema import MAST_SCHEMA


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "test-1.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as s:
        yield s
