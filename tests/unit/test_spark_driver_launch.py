"""The driver's launch plans: their key, the launcher's answer, when a plan is kept and used.

No JVM here: a stand-in ``java`` prints what Spark's launcher prints (a NUL line, then the command's
words, NUL-terminated) and counts its runs. The real launcher and driver are in
``tests/integration/test_driver_launch_jvm.py``.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from widehouse.spark import driver_launch
from widehouse.spark.driver_launch import (
    SUBMIT_CLASS,
    direct_launch,
    masked_args,
    parse_launcher_output,
    plan_head,
    plan_key,
    script_env,
)

FAKE_LAUNCHER = r"""#!/bin/sh
# stand-in for `java -Xmx128m -cp <jars> org.apache.spark.launcher.Main <class> <args...>`
echo run >> "$FAKE_RUNS"
[ -n "$FAKE_EXIT" ] && exit "$FAKE_EXIT"
while [ "$1" != "org.apache.spark.launcher.Main" ]; do shift; done
shift 2
printf 'a message spark-class would echo\n\0\n'
printf '%s\0' /jdk/bin/java -cp '/spark/conf:/spark/jars/*' -Xmx2g \
    org.apache.spark.deploy.SparkSubmit "$@" $FAKE_EXTRA
"""

ARGS = [
    "--conf",
    "spark.app.name=first",
    "--conf",
    "spark.driver.memory=2g",
    "--conf",
    "spark.sql.warehouse.dir=/state/one/warehouse",
    "pyspark-shell",
]


def _spark(root: Path) -> tuple[Path, Path, dict[str, str]]:
    """A stand-in JDK whose java is the fake launcher, a Spark home, and an environment naming both."""
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(FAKE_LAUNCHER)
    java.chmod(0o755)
    (root / "jdk" / "lib" / "server").mkdir(parents=True)
    (root / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    home = root / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core_2.13-4.2.0.jar").write_bytes(b"core")
    (home / "bin").mkdir()
    script = '#!/bin/sh\nexport SPARK_SCALA_VERSION=2.13\nexport X="y"\n'
    (home / "bin" / "load-spark-env.sh").write_text(script)
    env = {
        "PATH": os.environ["PATH"],
        "JAVA_HOME": str(root / "jdk"),
        "SPARK_HOME": str(home),
        "FAKE_RUNS": str(root / "runs"),
    }
    return java, home, env


def _runs(root: Path) -> int:
    path = root / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _with(args: list[str], name: str, value: str) -> list[str]:
    """``args`` with ``--conf name=value`` set (replaced, or added before the resource)."""
    out = [a if not a.startswith(f"{name}=") else f"{name}={value}" for a in args]
    if out == args and f"{name}={value}" not in args:
        out = [*args[:-1], "--conf", f"{name}={value}", args[-1]]
    return out


def test_settings_the_launcher_never_reads_are_left_out_of_the_key() -> None:
    args = [*ARGS[:-1], "--conf", "spark.launcher.port=7", "--master", "local[2]", "pyspark-shell"]
    assert masked_args(args) == [
        "--conf",
        "spark.driver.memory=2g",
        "--conf",
        "spark.launcher.port=7",
        "--master",
        "local[2]",
        "pyspark-shell",
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [("spark.app.name", "another"), ("spark.sql.warehouse.dir", "/state/two"), ("spark.local.dir", "/tmp/x")],
)
def test_a_plan_serves_every_run_whatever_its_own_settings(tmp_path: Path, name: str, value: str) -> None:
    java, home, env = _spark(tmp_path)
    assert plan_key(_with(ARGS, name, value), env, home, java) == plan_key(ARGS, env, home, java)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("spark.driver.memory", "4g"),
        ("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1"),
        ("spark.driver.extraClassPath", "/extra"),
        ("spark.master", "spark://host:7077"),
        ("spark.submit.deployMode", "cluster"),
    ],
)
def test_what_the_launcher_reads_changes_the_key(tmp_path: Path, name: str, value: str) -> None:
    java, home, env = _spark(tmp_path)
    assert plan_key(_with(ARGS, name, value), env, home, java) != plan_key(ARGS, env, home, java)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SPARK_DRIVER_MEMORY", "3g"), ("SPARK_SUBMIT_OPTS", "-Da=b"), ("JAVA_TOOL_OPTIONS", "-Xss4m"),
     ("HADOOP_CONF_DIR", "/etc/hadoop"), ("SPARK_DIST_CLASSPATH", "/x.jar")],
)  # fmt: skip
def test_the_environment_the_launcher_reads_changes_the_key(
    tmp_path: Path, variable: str, value: str
) -> None:
    java, home, env = _spark(tmp_path)
    assert plan_key(ARGS, {**env, variable: value}, home, java) != plan_key(ARGS, env, home, java)
    assert plan_key(ARGS, {**env, "UNRELATED": value}, home, java) == plan_key(ARGS, env, home, java)


def test_the_conf_dir_the_jars_and_the_jdk_change_the_key(tmp_path: Path) -> None:
    java, home, env = _spark(tmp_path)
    before = plan_key(ARGS, env, home, java)
    (home / "conf").mkdir()
    (home / "conf" / "spark-defaults.conf").write_text("spark.driver.memory 8g\n")
    after_defaults = plan_key(ARGS, env, home, java)
    assert after_defaults != before
    (home / "conf" / "java-opts").write_text("-Dx=1\n")
    after_opts = plan_key(ARGS, env, home, java)
    assert after_opts != after_defaults
    (home / "jars" / "delta-spark.jar").write_bytes(b"delta")
    after_jar = plan_key(ARGS, env, home, java)
    assert after_jar != after_opts
    (tmp_path / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"jvm-17.0.16")
    assert plan_key(ARGS, env, home, java) != after_jar


def test_the_launchers_output_is_read_as_spark_class_reads_it() -> None:
    out = b"Note: a message\n\x00\n/jdk/bin/java\x00-cp\x00/s/jars/*\x00-Xmx2g\x00" + SUBMIT_CLASS.encode()
    out += b"\x00--conf\x00spark.app.name=a b\x00pyspark-shell\x00"
    assert parse_launcher_output(out) == [
        "/jdk/bin/java",
        "-cp",
        "/s/jars/*",
        "-Xmx2g",
        SUBMIT_CLASS,
        "--conf",
        "spark.app.name=a b",
        "pyspark-shell",
    ]


def test_a_plan_is_the_head_when_the_launcher_only_echoes_the_arguments() -> None:
    head = ["/jdk/bin/java", "-cp", "/s/jars/*", "-Xmx2g", SUBMIT_CLASS]
    # the launcher puts spark.driver.memory first: a reordering is an echo
    echoed = [*head, "--conf", "spark.driver.memory=2g", "--conf", "spark.app.name=first", *ARGS[4:]]
    assert plan_head(echoed, ARGS) == head
    assert plan_head([*head, *ARGS, "--conf", "spark.added=1"], ARGS) is None  # it added one
    changed = [*head, *ARGS[:3], "spark.driver.memory=1g", *ARGS[4:]]
    assert plan_head(changed, ARGS) is None  # it changed a value
    # the same words paired otherwise: --conf takes another value
    swapped = [*head, "--conf", "spark.driver.memory=2g", "--conf", "spark.app.name=first", *ARGS[4:]]
    assert plan_head(swapped, [*ARGS[:2], "--conf", "--conf", *ARGS[3:]]) is None
    assert plan_head(ARGS, ARGS) is None  # no SparkSubmit class at all


def test_the_scripts_exports_reach_the_driver(tmp_path: Path) -> None:
    _, home, env = _spark(tmp_path)
    exported = script_env(env, home)
    assert exported is not None
    assert exported["SPARK_ENV_LOADED"] == "1"
    assert exported["SPARK_CONF_DIR"] == str(home / "conf")
    assert exported["SPARK_SCALA_VERSION"] == "2.13"
    assert exported["PYTHONHASHSEED"] == "0"
    assert exported["SPARK_HOME"] == str(home)
    assert "X" not in exported  # only what spark-submit's scripts export, read from the script
    own = script_env({**env, "SPARK_CONF_DIR": "/etc/spark"}, home)
    assert own is not None and own["SPARK_CONF_DIR"] == "/etc/spark"


@pytest.mark.parametrize("switch", ["SPARK_TESTING", "SPARK_SQL_TESTING", "SPARK_PREPEND_CLASSES"])
def test_what_the_scripts_would_do_more_goes_through_spark_submit(tmp_path: Path, switch: str) -> None:
    _, home, env = _spark(tmp_path)
    assert script_env({**env, switch: "1"}, home) is None
    (home / "conf").mkdir()
    (home / "conf" / "spark-env.sh").write_text("export SPARK_LOCAL_IP=10.0.0.1\n")
    assert script_env(env, home) is None  # a spark-env.sh to source
    assert driver_launch.driver_launch(ARGS, env, tmp_path / "plans") is None
    assert _runs(tmp_path) == 0


def test_a_plan_is_kept_and_then_used_without_the_launcher(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    first = driver_launch.driver_launch(ARGS, env, plans)
    assert first is not None and not first.planned
    assert _runs(tmp_path) == 1
    head = ("/jdk/bin/java", "-cp", "/spark/conf:/spark/jars/*", "-Xmx2g", SUBMIT_CLASS)
    assert first.command == (*head, *ARGS)
    assert first.env["SPARK_ENV_LOADED"] == "1" and first.env["PYTHONHASHSEED"] == "0"
    assert len(list(plans.glob("plan-*.json"))) == 1
    # another run's own settings: the same plan, no launcher, this run's arguments
    other = _with(ARGS, "spark.app.name", "second")
    second = driver_launch.driver_launch(other, env, plans)
    assert second is not None and second.planned
    assert second.command == (*head, *other)
    assert _runs(tmp_path) == 1
    # the driver's memory is the launcher's business: a new plan
    third = driver_launch.driver_launch(_with(ARGS, "spark.driver.memory", "4g"), env, plans)
    assert third is not None and not third.planned
    assert _runs(tmp_path) == 2
    assert len(list(plans.glob("plan-*.json"))) == 2


def test_a_launcher_that_adds_arguments_is_used_but_not_kept(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    env["FAKE_EXTRA"] = "--verbose"
    plans = tmp_path / "plans"
    launch = driver_launch.driver_launch(ARGS, env, plans)
    assert launch is not None and not launch.planned
    assert launch.command[-1] == "--verbose"
    assert not list(plans.glob("plan-*.json")) if plans.exists() else True
    driver_launch.driver_launch(ARGS, env, plans)
    assert _runs(tmp_path) == 2  # asked again each time


def test_a_failing_launcher_leaves_the_start_to_spark_submit(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    assert driver_launch.driver_launch(ARGS, {**env, "FAKE_EXIT": "1"}, tmp_path / "plans") is None
    with_file = [*ARGS[:-1], "--properties-file", "/x", "pyspark-shell"]
    assert driver_launch.driver_launch(with_file, env, tmp_path) is None
    with_file = [*ARGS[:-1], "--properties-file=/x", "pyspark-shell"]
    assert driver_launch.driver_launch(with_file, env, tmp_path) is None
    assert _runs(tmp_path) == 1  # a properties file's content is not in a key: never planned


def test_a_damaged_plan_is_asked_for_again(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    driver_launch.driver_launch(ARGS, env, plans)
    (plan,) = plans.glob("plan-*.json")
    for damaged in ("{not json", '{"head": ["/jdk/bin/java"]}', '{"head": [1, "' + SUBMIT_CLASS + '"]}'):
        plan.write_text(damaged)
        launch = driver_launch.driver_launch(ARGS, env, plans)
        assert launch is not None and not launch.planned
    assert _runs(tmp_path) == 4
    assert driver_launch.driver_launch(ARGS, env, plans).planned  # type: ignore[union-attr]


def test_a_directory_keeps_the_newest_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_launch, "PLANS_KEPT", 2)
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    for memory in ("1g", "2g", "3g"):
        driver_launch.driver_launch(_with(ARGS, "spark.driver.memory", memory), env, plans)
    assert len(list(plans.glob("plan-*.json"))) == 2
    assert not list(plans.glob("*.partial"))


def test_only_spark_submit_is_replaced_and_only_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyspark.java_gateway as gateway

    _, _, env = _spark(tmp_path)
    started: list[tuple[list[str], dict[str, Any]]] = []

    def recorder(command: list[str], **kwargs: Any) -> str:
        started.append((command, kwargs))
        return "process"

    monkeypatch.setattr(gateway, "Popen", recorder)
    with direct_launch(tmp_path / "plans"):
        assert gateway.Popen is not recorder
        assert gateway.Popen(["/spark/bin/spark-submit", *ARGS], env=env, stdin=-1) == "process"
        gateway.Popen(["/bin/true"], env=env)
    assert gateway.Popen is recorder
    (driver, driver_kwargs), (other, _) = started
    assert driver[0] == "/jdk/bin/java" and driver[-len(ARGS) :] == ARGS
    assert driver_kwargs["stdin"] == -1 and driver_kwargs["env"]["SPARK_ENV_LOADED"] == "1"
    assert other == ["/bin/true"]
    with direct_launch(None):  # off: nothing replaced
        assert gateway.Popen is recorder
    with pytest.raises(RuntimeError), direct_launch(tmp_path / "plans"):
        raise RuntimeError("the session failed")
    assert gateway.Popen is recorder


def test_a_plan_that_cannot_be_kept_does_not_stop_the_start(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    blocked = tmp_path / "plans"
    blocked.write_text("a file where the directory would be")
    launch = driver_launch.driver_launch(ARGS, env, blocked)
    assert launch is not None and not launch.planned and launch.command[-len(ARGS) :] == tuple(ARGS)


def test_plans_are_private_to_their_user(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    driver_launch.driver_launch(ARGS, env, plans)
    (plan,) = plans.glob("plan-*.json")
    assert stat.S_IMODE(plans.stat().st_mode) == 0o700
    assert stat.S_IMODE(plan.stat().st_mode) == 0o600


def test_a_leftover_partial_does_not_lend_its_mode_to_the_plan(tmp_path: Path) -> None:
    """A partial file left by a crashed start of the same process and thread is rewritten, and the
    plan it becomes is owner-only whatever mode the leftover had."""
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    driver_launch.driver_launch(ARGS, env, plans)
    (plan,) = plans.glob("plan-*.json")
    plan.unlink()
    leftover = plan.with_name(f"{plan.name}.{os.getpid()}.{threading.get_ident()}.partial")
    leftover.write_text("half a plan")
    leftover.chmod(0o666)
    driver_launch.driver_launch(ARGS, env, plans)
    assert stat.S_IMODE(plan.stat().st_mode) == 0o600
    assert not leftover.exists()
    assert driver_launch.driver_launch(ARGS, env, plans).planned  # type: ignore[union-attr]


def test_a_plan_someone_else_could_have_written_is_not_run(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "plans"
    driver_launch.driver_launch(ARGS, env, plans)
    (plan,) = plans.glob("plan-*.json")
    plan.write_text(plan.read_text().replace("-Xmx2g", "-Xmx2g-from-someone-else"))
    plan.chmod(0o666)
    launch = driver_launch.driver_launch(ARGS, env, plans)
    assert launch is not None and not launch.planned and "-Xmx2g" in launch.command
    assert _runs(tmp_path) == 2
    assert stat.S_IMODE(plan.stat().st_mode) == 0o600  # the launcher's answer replaced it
    assert driver_launch.driver_launch(ARGS, env, plans).planned  # type: ignore[union-attr]
    # nor one reached through a symbolic link
    elsewhere = tmp_path / "elsewhere.json"
    plan.rename(elsewhere)
    plan.symlink_to(elsewhere)
    assert not driver_launch.driver_launch(ARGS, env, plans).planned  # type: ignore[union-attr]


@pytest.mark.parametrize(("where", "mode"), [("plans", 0o777), ("plans", 0o770), ("above", 0o777)])
def test_plans_in_a_directory_others_can_write_are_neither_kept_nor_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str, mode: int
) -> None:
    _, _, env = _spark(tmp_path)
    plans = tmp_path / "above" / "plans"
    driver_launch.driver_launch(ARGS, env, plans)  # kept while the directories were private
    (tmp_path / where if where == "above" else plans).chmod(mode)
    for _ in range(2):
        launch = driver_launch.driver_launch(_with(ARGS, "spark.driver.memory", "4g"), env, plans)
        assert launch is not None and not launch.planned
        assert launch.command[-len(ARGS) :] == tuple(_with(ARGS, "spark.driver.memory", "4g"))
        assert not driver_launch.driver_launch(ARGS, env, plans).planned  # type: ignore[union-attr]
    assert _runs(tmp_path) == 5
    assert len(list(plans.glob("plan-*.json"))) == 1  # nothing more kept
    assert "writable by its group or others" in caplog.text


def test_a_sticky_directory_above_is_safe(tmp_path: Path) -> None:
    _, _, env = _spark(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: others cannot rename or remove this user's plans dir
    driver_launch.driver_launch(ARGS, env, shared / "plans")
    assert driver_launch.driver_launch(ARGS, env, shared / "plans").planned  # type: ignore[union-attr]
