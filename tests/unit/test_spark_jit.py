"""The driver JVM's JIT profile: the setting, the options it adds, and a real JVM that accepts them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.jvm import JIT_OPTIONS
from widehouse.settings import load_settings
from widehouse.settings.parsers import JVM_JIT_PROFILES
from widehouse.spark.class_archive import java_binary
from widehouse.spark.jit import Workload, jit_profile, with_jit

DERBY = {"spark.master": "local[*]", "spark.driver.extraJavaOptions": "-Dderby.system.home=/s/hive"}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), **extra}


def test_auto_is_c1_for_the_stream_and_tiered_for_other_jobs(tmp_path: Path) -> None:
    settings = load_settings(_env(tmp_path))
    assert settings.spark.driver_jit == "auto"
    stream = with_jit(DERBY, jit_profile(settings.spark.driver_jit, "stream"))
    assert stream["spark.driver.extraJavaOptions"] == "-Dderby.system.home=/s/hive -XX:TieredStopAtLevel=1"
    assert stream["spark.master"] == "local[*]"
    assert DERBY["spark.driver.extraJavaOptions"] == "-Dderby.system.home=/s/hive"  # not mutated
    assert with_jit(DERBY, jit_profile(settings.spark.driver_jit, "batch")) == DERBY


def test_a_chosen_profile_holds_for_every_job(tmp_path: Path) -> None:
    settings = load_settings(_env(tmp_path, WIDEHOUSE_SPARK_DRIVER_JIT=" Late-C2 "))
    assert settings.spark.driver_jit == "late-c2"
    workloads: tuple[Workload, ...] = ("stream", "batch")
    for workload in workloads:
        assert jit_profile(settings.spark.driver_jit, workload) == "late-c2"
    late = with_jit({}, "late-c2")["spark.driver.extraJavaOptions"].split()
    assert late == [
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=150000",
        "-XX:Tier4BackEdgeThreshold=400000",
    ]
    assert jit_profile("tiered", "stream") == "tiered"
    assert with_jit(DERBY, "tiered") == DERBY


@pytest.mark.parametrize(
    "own",
    ["-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation", "-XX:Tier4InvocationThreshold=9", "-Xint"],
)
def test_a_users_own_compilation_choice_wins(own: str) -> None:
    conf = {"spark.driver.extraJavaOptions": f"-Dx=1 {own}"}
    for profile in JIT_OPTIONS:
        assert with_jit(conf, profile) == conf


def test_every_profile_has_its_options() -> None:
    assert set(JIT_OPTIONS) == set(JVM_JIT_PROFILES)


def test_an_unknown_profile_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_SPARK_DRIVER_JIT.*c3.*auto, c1, late-c2, tiered"):
        load_settings(_env(tmp_path, WIDEHOUSE_SPARK_DRIVER_JIT="c3"))


@pytest.mark.parametrize("profile", sorted(p for p, options in JIT_OPTIONS.items() if options))
def test_the_jvm_takes_every_profiles_options(profile: str) -> None:
    """A misspelt flag would stop every driver from starting: the installed JVM must accept each
    option and report the value the profile sets."""
    java = java_binary()
    if java is None:
        pytest.skip("no java here")
    options = JIT_OPTIONS[profile].split()
    done = subprocess.run(
        [str(java), *options, "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    final = dict(re.findall(r"^\s*\S+\s+(\w+)\s+=\s+(\S+)", done.stdout, flags=re.MULTILINE))
    for option in options:
        name, value = option.removeprefix("-XX:").split("=")
        assert final[name] == value, (name, final.get(name))


def test_the_stream_app_asks_for_a_stream_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream app is the one job whose session ``auto`` gives C1 only."""
    from tests.conftest import settings_for
    from widehouse.spark import session
    from widehouse.stream.options import GroupSpec, RunOptions
    from widehouse.stream.spark.job import StreamApp

    asked: list[str] = []
    monkeypatch.setattr(session, "build_session", lambda *_a, workload="batch", **_k: asked.append(workload))
    app = StreamApp(settings_for(tmp_path), [GroupSpec("g001", ("a",))], RunOptions())
    _ = app.spark
    assert asked == ["stream"]
