"""The fault matrix is complete: every cell that applies has a test in this run's collection (selected or not)."""

from __future__ import annotations

import pytest

from tests.faults.conftest import APPLIES, DESELECTED, cell


def test_every_applicable_cell_has_a_test(request: pytest.FixtureRequest) -> None:
    covered = {found for found in (cell(item) for item in request.session.items) if found is not None} | DESELECTED
    if not any(item.nodeid.startswith("tests/faults/") and item.name != request.node.name for item in request.session.items):
        pytest.skip("only this test was selected: the matrix is checked when tests/faults runs as a whole")
    missing = [(fault, transport) for fault, transports in APPLIES.items() for transport in transports
               if (fault, transport) not in covered]
    assert not missing, f"{len(missing)} cells of the fault matrix have no test: {missing}"
