"""The README is the user's entry point: its commands and configuration table must be true."""

from __future__ import annotations

import re
from pathlib import Path

from widehouse.commands.config_cmd import variables_markdown

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()


def test_configuration_table_matches_the_settings_module() -> None:
    block = README.split("<!-- BEGIN VARIABLES", 1)[1].split("-->", 1)[1].split("<!-- END VARIABLES -->")[0]
    assert block.strip() == variables_markdown().strip(), (
        "regenerate: widehouse config --variables --markdown"
    )


def test_the_two_commands_exist_and_ci_runs_the_test_one() -> None:
    assert "make demo" in README and "make test" in README
    targets = set(re.findall(r"^([a-z-]+):", MAKEFILE, flags=re.MULTILINE))
    assert {"setup", "demo", "test", "up", "down", "lint", "bench", "help"} <= targets
    assert re.search(r"^demo: setup", MAKEFILE, flags=re.MULTILINE)  # the demo sets up itself
    assert re.search(r"^test: setup", MAKEFILE, flags=re.MULTILINE)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == "make test"


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([a-z-]+):", MAKEFILE, flags=re.MULTILINE))
    named = set(re.findall(r"`make ([a-z-]+)`", README))
    listed = README.split("`make help` lists the make targets:", 1)[1].split(".", 1)[0]
    named |= set(re.findall(r"[a-z-]+", listed.replace("`", " ")))
    assert named <= targets, named - targets
