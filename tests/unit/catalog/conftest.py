"""A small valid catalog written to tmp_path, which tests break one mistake at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_samples import FILES, Writer


@pytest.fixture
def write_catalog(tmp_path: Path) -> Writer:
    """``write_catalog(edits={path: text or None}, replace={path: (old, new)})`` -> the schemas dir."""

    def write(
        edits: dict[str, str | None] | None = None, replace: dict[str, tuple[str, str]] | None = None
    ) -> Path:
        files: dict[str, str | None] = {**FILES, **(edits or {})}
        for path, (old, new) in (replace or {}).items():
            text = files[path]
            assert text is not None and old in text, f"test bug: {old!r} not in {path}"
            files[path] = text.replace(old, new)
        for path, text in files.items():
            if text is None:
                continue
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return tmp_path / "schemas"

    return write
