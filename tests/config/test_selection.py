"""`on_halt` and `verifier_samples`: read from a stage or [defaults], refused
with one line (78) when out of range."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError

STAGE = '[[pipelines.default.stages]]\nname = "s"\nverifier = ["true"]\n'


def settings(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "orchestrator.toml"
    path.write_text(text)
    return load_settings(config=path, require_config=True)


def test_defaults_and_overrides(tmp_path: Path) -> None:
    stage = settings(tmp_path, STAGE).pipelines["default"].stages[0]
    assert (stage.on_halt, stage.verifier_samples) == ("last", 1)
    text = '[defaults]\non_halt = "best"\n\n' + STAGE + "verifier_samples = 5\n"
    stage = settings(tmp_path, text).pipelines["default"].stages[0]
    assert (stage.on_halt, stage.verifier_samples) == ("best", 5)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('on_halt = "first"', "on_halt"),
        ("on_halt = true", "on_halt"),
        ("verifier_samples = 0", "verifier_samples"),
        ("verifier_samples = 101", "at most 100"),
        ('verifier_samples = "3"', "verifier_samples"),
    ],
)
def test_bad_values_are_config_errors(tmp_path: Path, line: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as raised:
        settings(tmp_path, STAGE + line + "\n")
    assert raised.value.exit_code == 78
    assert "\n" not in str(raised.value)
