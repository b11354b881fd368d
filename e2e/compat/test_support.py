"""The test support's own rules (e2e/testsupport/harness.py): what counts
as CI, and "fail under CI, else skip"."""

from __future__ import annotations

import socket

import pytest
from _pytest.outcomes import Failed, Skipped

import harness


@pytest.mark.parametrize(
    "value, ci",
    [
        (None, False), ("", False), ("0", False), ("false", False), ("False", False),
        ("FALSE", False), (" false ", False), ("true", True), ("1", True), ("yes", True),
        ("True", True), ("on", True), ("anything", True),
    ],
)
def test_in_ci(monkeypatch, value, ci):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert harness.in_ci() is ci


@pytest.mark.parametrize("value, outcome", [("true", Failed), ("1", Failed), ("", Skipped), ("0", Skipped), ("false", Skipped)])
def test_need_fails_under_ci_and_skips_elsewhere(monkeypatch, value, outcome):
    monkeypatch.setenv("CI", value)
    harness.need(True, "present")  # a met need never ends the test
    with pytest.raises(outcome) as info:
        harness.need(None, "frobnicator is not installed")
    assert "frobnicator is not installed" in str(info.value)


def test_free_port_is_bindable():
    port = harness.free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
