"""Private local state: 0700 dirs, the passwords generated per checkout, who else could write a path.

The local services' passwords (the ClickHouse service's, the local Airflow user's) are not a
constant published in the README: the first ``widehouse services up`` / ``widehouse airflow up`` of
a state dir generates them (as ``airflow standalone`` does) into ``<state>/secrets/<name>``, one
0600 file per secret in a 0700 directory. Settings read them (never write them): an explicit
``WIDEHOUSE_*`` variable always wins, and without either the password is unknown (None).

Creation is race-safe: the value is written to a private temporary file which is then hard-linked
to its final name. ``link`` fails when the name exists, like ``O_CREAT|O_EXCL``, but the file only
ever appears complete, so two processes generating at once agree on the first one's value and a
reader never sees a half-written secret.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from widehouse.errors import ConfigError

SECRETS_DIR = "secrets"
CLICKHOUSE_PASSWORD = "clickhouse-password"  # noqa: S105 - the file name, not a password
AIRFLOW_PASSWORD = "airflow-password"  # noqa: S105 - the file name, not a password
PULSAR_ADMIN_TOKEN = "pulsar-admin-token"  # noqa: S105 - the file name, not a token
PULSAR_SECRET_KEY = "pulsar-token-secret.key"  # noqa: S105 - the file name of the local HS256 key
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
"""A file only its owner can read or write: secrets, and the launch plans a driver runs."""


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """Create ``path`` (and its missing parents) as 0700; with ``tighten``, make an existing one 0700.

    ``widehouse services up`` / ``airflow up`` tighten the state dir and the services' dirs; other
    callers (Delta root, checkpoints, Hive) only create, so a directory the user chose and opened up
    on purpose keeps its mode. Parents that already exist are left alone (``/tmp`` is not ours), and
    so is a directory owned by someone else (we could not change it anyway).
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent creator: tightened below
            directory.mkdir(mode=PRIVATE_DIR_MODE)
    if not path.is_dir():
        raise ConfigError(f"{path} exists and is not a directory")
    info = path.stat()
    if (tighten or missing) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def others_could_change(path: Path) -> str | None:
    """Why a user other than this one could change what ``path`` holds, or None when none could.

    For files whose content is run (a kept command): ``path`` must be this user's and writable by no
    one else, and each directory above it this user's or root's and writable by no one else unless
    it has the sticky bit (``/tmp``), where others cannot rename or remove what is not theirs. The
    check ssh's StrictModes makes of ``authorized_keys``.
    """
    uid = os.getuid()
    path = Path(os.path.abspath(path))
    checks: list[tuple[Path, Callable[[], os.stat_result], tuple[int, ...], bool]]
    checks = [(path, path.lstat, (uid,), False)]
    checks += [(parent, parent.stat, (uid, 0), True) for parent in path.parents]
    for where, read, owners, sticky_ok in checks:
        try:
            info = read()
        except OSError as exc:
            return f"{where} cannot be read ({exc.strerror})"
        if stat.S_ISLNK(info.st_mode):
            return f"{where} is a symbolic link"
        if info.st_uid not in owners:
            return f"{where} belongs to uid {info.st_uid}"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (sticky_ok and info.st_mode & stat.S_ISVTX):
            return f"{where} is writable by its group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def secret_path(state_dir: Path, name: str) -> Path:
    """Where the generated secret ``name`` of a state dir lives."""
    return state_dir / SECRETS_DIR / name


def read_secret(state_dir: Path, name: str) -> str | None:
    """The generated secret ``name`` of ``state_dir``, or None if none was generated. Writes nothing."""
    path = secret_path(state_dir, name)
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the generated secret {path}: {exc.strerror}") from None
    if not value:
        raise ConfigError(f"the generated secret {path} is empty; delete it to generate a new one")
    return value


def ensure_secret(state_dir: Path, name: str) -> tuple[str, bool]:
    """The secret ``name`` of ``state_dir``, generated now if it does not exist yet.

    Returns ``(value, created)``: ``created`` is True only for the one caller that generated it.
    """
    existing = read_secret(state_dir, name)
    if existing is not None:
        return existing, False
    folder = private_dir(state_dir / SECRETS_DIR, tighten=True)
    final = folder / name
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=folder)  # mkstemp: 0600, O_EXCL
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(24) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, final)
        except FileExistsError:  # another process generated it first: its value wins
            value = read_secret(state_dir, name)
            if value is None:  # deleted again in between: a broken setup, not a race to retry
                raise ConfigError(f"the generated secret {final} vanished while it was created") from None
            return value, False
    finally:
        Path(temporary).unlink(missing_ok=True)
    created = read_secret(state_dir, name)
    if created is None:  # pragma: no cover - the link above just made it
        raise ConfigError(f"the generated secret {final} vanished while it was created")
    return created, True
