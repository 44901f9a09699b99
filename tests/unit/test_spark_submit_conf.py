"""The audit's driver options: the class archive joins them only when setup dumped one."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.checker.submit import DRIVER_OPTIONS, class_archive, with_class_archive, with_driver_options


def test_driver_options_are_added_to_the_existing_ones() -> None:
    assert with_driver_options({DRIVER_OPTIONS: "-XX:+UseParallelGC", "a": "b"}, "-Xshare:on") == {
        DRIVER_OPTIONS: "-XX:+UseParallelGC -Xshare:on", "a": "b"
    }
    assert with_driver_options({}, "-Xshare:on") == {DRIVER_OPTIONS: "-Xshare:on"}


def test_the_class_archive_is_used_only_once_dumped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKLAB_CACHE", str(tmp_path))
    conf = {DRIVER_OPTIONS: "-XX:+UseParallelGC"}
    assert with_class_archive(conf) == conf
    class_archive().parent.mkdir(parents=True)
    class_archive().write_bytes(b"")
    assert with_class_archive(conf)[DRIVER_OPTIONS] == f"-XX:+UseParallelGC -XX:SharedArchiveFile={tmp_path}/spark/{class_archive().parent.name}/driver.jsa"
