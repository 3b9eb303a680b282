"""Outputs: written whole or not at all, and readable by others as the umask says (a report on a shared
cluster file system must not be private to whoever ran the workflow)."""

from __future__ import annotations

import os
import stat

import pytest

from longrank.io.atomic import atomic_path, write_text


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_get_the_umask_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_text(tmp_path / "report" / "index.html", "<html></html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report" / "index.html").stat().st_mode) == mode


def test_a_failed_write_keeps_the_finished_output_and_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "model.run"
    write_text(out, "finished\n")
    with pytest.raises(OSError, match="No space left on device"), atomic_path(out) as tmp:
        tmp.write_text("half writ")
        raise OSError(28, "No space left on device")  # what a full disk raises in the middle of a write
    assert out.read_text() == "finished\n"
    assert [p.name for p in tmp_path.iterdir()] == ["model.run"]
