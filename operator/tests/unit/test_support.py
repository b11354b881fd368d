"""The test-support module's one definition of CI, and its rule for a missing dependency."""

from __future__ import annotations

import pytest

from .. import support


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[("", False), ("0", False), ("false", False), ("False", False), (" false ", False)],
        *[("true", True), ("1", True), ("yes", True), ("gitlab", True)],
    ],
)
def test_ci_is_set_and_not_0_or_false(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert support.ci() is expected


def test_unset_ci_is_not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert support.ci() is False


def test_missing_dependency_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no such thing"):
        support.unavailable("no such thing")
    monkeypatch.setenv("CI", "0")
    with pytest.raises(pytest.skip.Exception, match="no such thing"):
        support.unavailable("no such thing")
    with pytest.raises(pytest.skip.Exception, match="missing"):
        support.need_file(support.ROOT / "no-such-file", "nothing makes it")


def test_processes_stop_what_they_started(tmp_path) -> None:
    procs = support.Processes()
    p = procs.start(["sleep", "30"], log=tmp_path / "sleep.log")
    procs.stop()
    assert p.poll() is not None and not procs.procs
