"""The driver JVM's class-data-sharing archive: its key, where it is, the options (no JVM started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from widehouse.errors import ConfigError, SetupError
from widehouse.settings import load_settings
from widehouse.spark import class_archive
from widehouse.spark.class_archive import archive_key, driver_java_options, with_driver_options


def _jdk_and_spark(root: Path) -> tuple[Path, Path]:
    """A stand-in JDK (bin/java, lib/server/libjvm.so) and Spark home (jars/*.jar) under ``root``."""
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    lib = root / "jdk" / "lib" / "server" / "libjvm.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"jvm-1")
    home = root / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core_2.13-4.2.0.jar").write_bytes(b"core")
    return java, home


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), "WIDEHOUSE_VENDOR_DIR": str(tmp_path), **extra}


def test_the_key_follows_the_jvm_build_and_sparks_jars(tmp_path: Path) -> None:
    java, home = _jdk_and_spark(tmp_path)
    first = archive_key(java, home)
    assert archive_key(java, home) == first  # stable
    lib = java.parent.parent / "lib" / "server" / "libjvm.so"
    lib.write_bytes(b"jvm-22")  # a JDK update replaces libjvm
    updated = archive_key(java, home)
    assert updated != first
    (home / "jars" / "delta-extra.jar").write_bytes(b"x")  # another jar on Spark's class path
    assert archive_key(java, home) not in (first, updated)


def test_the_archive_is_named_by_the_key_under_the_vendor_dir_by_default(tmp_path: Path) -> None:
    java, home = _jdk_and_spark(tmp_path)
    settings = load_settings(_env(tmp_path))
    assert settings.spark.class_archive_dir == str(tmp_path / "spark-cds")
    environ = {"JAVA_HOME": str(java.parent.parent), "SPARK_HOME": str(home)}
    path = class_archive.archive_path(settings, environ)
    assert path == tmp_path / "spark-cds" / f"spark-driver-{archive_key(java, home)}.jsa"
    assert driver_java_options(settings, environ) is None  # not built yet: the JVM starts as before
    path.parent.mkdir()
    path.write_bytes(b"archive")
    assert driver_java_options(settings, environ) == (
        f"-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"
    )


def test_an_archive_another_user_could_have_written_is_not_mapped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    java, home = _jdk_and_spark(tmp_path)
    settings = load_settings(_env(tmp_path))
    environ = {"JAVA_HOME": str(java.parent.parent), "SPARK_HOME": str(home)}
    path = class_archive.archive_path(settings, environ)
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"archive")
    path.chmod(0o444)  # as the JVM writes it
    assert driver_java_options(settings, environ) is not None
    path.chmod(0o666)
    assert driver_java_options(settings, environ) is None
    assert f"the class archive {path} is not used" in caplog.text
    path.chmod(0o444)
    path.parent.chmod(0o777)
    assert driver_java_options(settings, environ) is None


def test_off_means_no_archive_and_nothing_to_build(tmp_path: Path) -> None:
    java, home = _jdk_and_spark(tmp_path)
    settings = load_settings(_env(tmp_path, WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR="off"))
    assert settings.spark.class_archive_dir is None
    environ = {"JAVA_HOME": str(java.parent.parent), "SPARK_HOME": str(home)}
    assert class_archive.archive_path(settings, environ) is None
    assert driver_java_options(settings, environ) is None
    with pytest.raises(SetupError, match="WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR is off"):
        class_archive.build(settings)


def test_no_java_means_no_archive(tmp_path: Path) -> None:
    settings = load_settings(_env(tmp_path))
    assert class_archive.java_binary({"PATH": str(tmp_path / "empty")}) is None
    assert driver_java_options(settings, {"PATH": str(tmp_path / "empty")}) is None


@pytest.mark.parametrize("value", ["relative/dir", "/with space/dir"])
def test_a_bad_directory_is_refused_by_name(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR"):
        load_settings(_env(tmp_path, WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR=value))


def test_the_options_join_the_drivers_own_and_yield_to_a_users_choice() -> None:
    options = "-XX:SharedArchiveFile=/v/a.jsa -Xlog:cds=off"
    derby = {"spark.driver.extraJavaOptions": "-Dderby.system.home=/s/hive", "spark.master": "local[*]"}
    merged = with_driver_options(derby, options)
    assert merged["spark.driver.extraJavaOptions"] == f"-Dderby.system.home=/s/hive {options}"
    assert merged["spark.master"] == "local[*]"
    assert derby["spark.driver.extraJavaOptions"] == "-Dderby.system.home=/s/hive"  # not mutated
    assert with_driver_options({}, options) == {"spark.driver.extraJavaOptions": options}
    assert with_driver_options(derby, None) == derby
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/new.jsa"):
        conf = {"spark.driver.extraJavaOptions": own}
        assert with_driver_options(conf, options) == conf


def test_a_failed_training_leaves_no_archive_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java, home = _jdk_and_spark(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    monkeypatch.setenv("SPARK_HOME", str(home))
    # the stand-in java cannot start Spark: the training fails and nothing is left in the directory
    monkeypatch.setenv("PATH", f"{java.parent}{os.pathsep}{os.environ['PATH']}")
    settings = load_settings(_env(tmp_path))
    with pytest.raises(SetupError, match=r"training the class archive failed \(exit [1-9]"):
        class_archive.build(settings)
    assert list((tmp_path / "spark-cds").iterdir()) == []


def test_unfinished_archives_of_an_interrupted_training_are_removed_once_old(tmp_path: Path) -> None:
    old = tmp_path / "spark-driver-0123456789abcdef.4242.partial"
    young = tmp_path / "spark-driver-0123456789abcdef.4343.partial"
    done = tmp_path / "spark-driver-0123456789abcdef.jsa"
    for path in (old, young, done):
        path.write_bytes(b"x")
    now = 1_800_000_000.0
    os.utime(old, (now - 301, now - 301))  # older than a training may take: abandoned
    os.utime(young, (now - 10, now - 10))  # a training that may still be running
    os.utime(done, (now - 10_000, now - 10_000))
    assert class_archive.remove_abandoned(tmp_path, now) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([young.name, done.name])
