"""Fixtures shared by the tests/core suites.

Why here: the schema registry of the sample tool definitions is used by two tagging suites
(test_tagging.py, test_tagging_registry.py), and a fixture imported into a test module would read
as an unused import to ruff.
"""

from __future__ import annotations

import pytest

from stream_pairer.core.toolschemas import ToolSchemaRegistry
from tests.core.tagging_helpers import SAMPLES


@pytest.fixture(scope="module")
def registry() -> ToolSchemaRegistry:
    return ToolSchemaRegistry.load(SAMPLES)
