"""A disk too full for Pulsar's bookie is named before the broker starts and while it runs, instead
of every producer timing out without a reason (widehouse.services.disk)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from widehouse.errors import SetupError
from widehouse.services.disk import GIB, DiskUse, bookie_threshold, disk_use, full_disk_reason
from widehouse.services.pulsar import PulsarStandalone
from widehouse.settings import LocalServicesSettings


def test_the_reason_names_the_disk_its_use_and_what_to_free() -> None:
    use = DiskUse(Path("/state/services/pulsar/data/bookkeeper"), total=200 * GIB, usable=GIB)
    reason = full_disk_reason(use, 0.99)
    assert reason is not None
    assert "/state/services/pulsar/data/bookkeeper is 99.5% used (1.0 GiB free of 200.0 GiB)" in reason
    assert "above 99% (diskUsageThreshold)" in reason
    assert reason.endswith("free at least 1.0 GiB there")  # 1 % of 200 GiB is 2 GiB usable
    assert full_disk_reason(DiskUse(use.path, total=200 * GIB, usable=2 * GIB), 0.99) is None


def test_the_threshold_is_the_configurations_or_bookkeepers_default() -> None:
    assert bookie_threshold("a=1\ndiskUsageThreshold=0.99\ndiskUsageWarnThreshold=0.9\n") == 0.99
    assert bookie_threshold("# diskUsageThreshold=0.5\n") == 0.95


def test_the_use_is_the_filesystems_of_the_nearest_existing_parent(tmp_path: Path) -> None:
    use = disk_use(tmp_path / "not" / "made" / "yet")
    stdlib = shutil.disk_usage(tmp_path)
    assert use.total == stdlib.total
    assert abs(use.usable - stdlib.free) < 64 * 1024**2  # other writers on the box meanwhile
    assert 0.0 <= use.fraction <= 1.0


def _pulsar(tmp_path: Path, threshold: str) -> PulsarStandalone:
    home = tmp_path / "vendor" / "pulsar" / "apache-pulsar-4.0.8"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "pulsar").write_text("#!/bin/sh\n")
    (home / "conf").mkdir()
    (home / "conf" / "standalone.conf").write_text(f"diskUsageThreshold={threshold}\n")
    local = LocalServicesSettings(state_dir=tmp_path / "state", vendor_dir=tmp_path / "vendor")
    return PulsarStandalone(local)


def test_pulsar_refuses_to_start_on_a_disk_past_its_bookies_threshold(tmp_path: Path) -> None:
    # a threshold every real disk passes, read from the distribution's own configuration
    refusal = r"pulsar cannot start: the disk holding .*data/bookkeeper is"
    with pytest.raises(SetupError, match=refusal) as caught:
        _pulsar(tmp_path, "0.000001").command()
    assert str(tmp_path / "state") in str(caught.value)
    assert _pulsar(tmp_path / "roomy", "1.0").command()[1] == "standalone"


def test_without_a_distribution_here_nothing_is_claimed_about_the_disk(tmp_path: Path) -> None:
    """A broker run elsewhere (a test session against another Pulsar) is not judged by this disk."""
    local = LocalServicesSettings(state_dir=tmp_path / "state", vendor_dir=tmp_path / "no-vendor")
    assert PulsarStandalone(local).full_disk() is None
