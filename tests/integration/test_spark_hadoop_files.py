"""Small text files through the session's Hadoop file systems: kept per context, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from widehouse.spark.hadoop_files import HadoopFiles

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_files_are_kept_per_context_and_read_back_what_they_wrote(spark: Any, tmp_path: Path) -> None:
    files = HadoopFiles.of(spark)
    assert HadoopFiles.of(spark) is files  # the JVM classes are resolved once per context
    path = tmp_path / "guard" / "7.json"
    assert files.read(str(path)) is None
    files.write(str(path), '{"batch": 7, "note": "héllo"}')
    assert path.read_text(encoding="utf-8") == '{"batch": 7, "note": "héllo"}'
    assert files.read(str(path)) == '{"batch": 7, "note": "héllo"}'
    assert not path.with_name("7.json.tmp").exists()  # written aside, then renamed
    files.delete(str(path))
    assert files.read(str(path)) is None and not path.exists()
    files.delete(str(path))  # deleting what is not there is fine
