"""The real fleet fixtures (fixtures/fleet/), read without their `source:` and `note:` lines."""

from __future__ import annotations

from tests.conftest import FIXTURES

FLEET_FIXTURES = FIXTURES / "fleet"


def fixture_text(name: str) -> str:
    """A fixture's data: every line after its two header lines (`source:`, `note:`)."""
    lines = (FLEET_FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0].startswith("source:") and lines[1].startswith("note:"), name
    return "".join(lines[2:])
