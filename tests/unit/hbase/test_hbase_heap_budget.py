"""The local HBase's heap budget (hbase-site.xml): what the daily merge's writes may ask of it."""

from __future__ import annotations

from pathlib import Path

from widehouse.services.hbase import hbase_site
from widehouse.settings import LocalServicesSettings


def test_memstores_block_cache_and_queued_calls_are_bounded(tmp_path: Path) -> None:
    props = hbase_site(LocalServicesSettings(state_dir=tmp_path, vendor_dir=tmp_path), tmp_path / "data")
    # HBase's defaults: 0.4 + 0.4 of the heap, and up to 1 GB of queued calls (more than the heap)
    memstores = float(props["hbase.regionserver.global.memstore.size"])
    cache = float(props["hfile.block.cache.size"])
    assert memstores + cache <= 0.5
    assert int(props["hbase.ipc.server.max.callqueue.size"]) == 64 << 20
    assert int(props["hbase.hregion.memstore.flush.size"]) == 32 << 20
