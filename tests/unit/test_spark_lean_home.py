"""The driver's lean Spark home: links to Spark's home without the ML jar (no JVM started here;
tests/integration/test_class_archive_jvm.py runs a driver from it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.settings import load_settings
from widehouse.spark import class_archive, lean_home
from widehouse.spark.lean_home import driver_environ, make_lean_home, spark_home_of

ML = "spark-mllib_2.13-4.2.0.jar"


def _spark_home(root: Path, *jars: str) -> Path:
    """A stand-in Spark home: bin/, python/lib/, conf/ and jars/ with the given jars."""
    home = root / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-class").write_text("#!/bin/sh\n")
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"zip")
    (home / "conf").mkdir()
    (home / "jars").mkdir()
    for jar in jars:
        (home / "jars" / jar).write_bytes(jar.encode())
    return home


def _settings(tmp_path: Path, **extra: str):  # type: ignore[no-untyped-def]
    return load_settings(
        {"WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), "WIDEHOUSE_VENDOR_DIR": str(tmp_path), **extra}
    )


def test_a_lean_home_links_everything_but_the_ml_jar(tmp_path: Path) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML, "spark-mllib-local_2.13-4.2.0.jar")
    lean = make_lean_home(source, tmp_path / "lean")
    assert lean is not None and lean.parent == tmp_path / "lean"
    assert sorted(p.name for p in (lean / "jars").iterdir()) == [
        "spark-core_2.13-4.2.0.jar",
        "spark-mllib-local_2.13-4.2.0.jar",
    ]
    core = "spark-core_2.13-4.2.0.jar"
    assert (lean / "jars" / core).resolve() == source / "jars" / core
    # the rest of Spark's home is the same directories, linked: scripts, Python zips, conf
    for name in ("bin", "python", "conf"):
        assert (lean / name).is_symlink() and (lean / name).resolve() == source / name
    assert (lean / "python" / "lib" / "pyspark.zip").read_bytes() == b"zip"
    # the JVM runs what it links: only this user may change it
    assert os.stat(tmp_path / "lean").st_mode & 0o777 == 0o700
    assert os.stat(lean).st_mode & 0o777 == 0o700


def test_a_lean_home_is_made_once_per_spark_build(tmp_path: Path) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML)
    first = make_lean_home(source, tmp_path / "lean")
    assert first is not None
    marker = first / "jars" / "kept"
    marker.write_text("")
    assert make_lean_home(source, tmp_path / "lean") == first and marker.exists()  # not made again
    assert not list((tmp_path / "lean").glob(".*partial"))
    # another Spark build (a jar of another size) gets one of its own, with its jars
    (source / "jars" / "spark-core_2.13-4.2.0.jar").write_bytes(b"a newer core")
    second = make_lean_home(source, tmp_path / "lean")
    assert second is not None and second != first
    assert not (second / "jars" / "kept").exists()


def test_a_spark_without_the_ml_jar_is_used_as_it_is(tmp_path: Path) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar")
    assert make_lean_home(source, tmp_path / "lean") is None
    assert not (tmp_path / "lean").exists()


def test_a_lean_home_others_could_change_is_refused(tmp_path: Path) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML)
    lean = make_lean_home(source, tmp_path / "lean")
    assert lean is not None
    lean.chmod(0o777)
    with pytest.raises(ConfigError, match=r"is not used: .* writable by its group or others"):
        make_lean_home(source, tmp_path / "lean")


def test_the_driver_gets_spark_home_set_to_the_lean_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML)
    monkeypatch.setattr(lean_home, "installed_spark_home", lambda: source)
    settings = _settings(tmp_path)
    assert settings.spark.lean_home_dir == str(tmp_path / "spark-lean")
    env = driver_environ(settings, {"PATH": "/usr/bin"})
    assert env["PATH"] == "/usr/bin"
    lean = Path(env["SPARK_HOME"])
    assert lean.parent == tmp_path / "spark-lean" and not (lean / "jars" / ML).exists()
    # a SPARK_HOME of the user's own is theirs; off runs the driver from Spark's home as it is
    assert driver_environ(settings, {"SPARK_HOME": "/opt/spark"}) == {"SPARK_HOME": "/opt/spark"}
    off = _settings(tmp_path, WIDEHOUSE_SPARK_LEAN_HOME_DIR="off")
    assert off.spark.lean_home_dir is None
    assert driver_environ(off, {}) == {}


def test_a_lean_home_that_cannot_be_made_leaves_spark_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML)
    monkeypatch.setattr(lean_home, "installed_spark_home", lambda: source)
    (tmp_path / "spark-lean").write_text("a file where the directory goes")
    assert driver_environ(_settings(tmp_path), {}) == {}
    assert "runs from Spark's own home" in caplog.text


def test_the_class_archive_is_keyed_by_the_lean_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _spark_home(tmp_path, "spark-core_2.13-4.2.0.jar", ML)
    monkeypatch.setattr(lean_home, "installed_spark_home", lambda: source)
    monkeypatch.setattr(class_archive, "installed_spark_home", lambda: source)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    environ = {"JAVA_HOME": str(java.parent.parent)}
    settings = _settings(tmp_path)
    lean = Path(driver_environ(settings, environ)["SPARK_HOME"])
    path = class_archive.archive_path(settings, environ)
    # the archive must match the class path the driver runs with: the lean home's, not Spark's own
    assert path == tmp_path / "spark-cds" / f"spark-driver-{class_archive.archive_key(java, lean)}.jsa"
    assert class_archive.archive_key(java, lean) != class_archive.archive_key(java, source)
    off = _settings(tmp_path, WIDEHOUSE_SPARK_LEAN_HOME_DIR="off")
    assert class_archive.archive_path(off, environ) == (
        tmp_path / "spark-cds" / f"spark-driver-{class_archive.archive_key(java, source)}.jsa"
    )


def test_spark_home_is_set_while_the_driver_starts_and_restored_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    with spark_home_of({"SPARK_HOME": "/lean"}):
        assert os.environ["SPARK_HOME"] == "/lean"
    assert "SPARK_HOME" not in os.environ
    monkeypatch.setenv("SPARK_HOME", "/mine")
    with spark_home_of({"SPARK_HOME": "/mine"}):
        assert os.environ["SPARK_HOME"] == "/mine"
    with pytest.raises(RuntimeError), spark_home_of({"SPARK_HOME": "/lean"}):
        raise RuntimeError("the driver failed to start")
    assert os.environ["SPARK_HOME"] == "/mine"
