"""`memory_mb`: read, checked, defaulted from the agent kind, and what
`MemAvailable` the host has (`/proc/meminfo`, or the test's file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import StageConfig, load_settings
from orchestrator.errors import ConfigError
from orchestrator.features.memory import meminfo
from orchestrator.features.memory.gate import gigabytes, needed_mb, waiting_line

PASS = '["sh", "-c", "echo {}"]'


def stage_of(tmp_path: Path, keys: str, defaults: str = "") -> StageConfig:
    path = tmp_path / "orchestrator.toml"
    path.write_text(
        f"[defaults]\n{defaults}\n"
        f'[[pipelines.default.stages]]\nname = "work"\nworker = ["true"]\n{keys}\n'
    )
    return load_settings(config=path).pipelines["default"].stages[0]


@pytest.mark.parametrize(
    ("keys", "needed"),
    [
        ("", 0),  # a plain command reserves nothing
        ('output = "claude-json"', 2048),
        ('output = "codex-jsonl"', 2048),
        (f'verifier = {PASS}\nverifier_output = "claude-json"', 2048),  # an LLM judge
        ('output = "claude-json"\nmemory_mb = 512', 512),
        ('output = "codex-jsonl"\nmemory_mb = 0', 0),
        ("memory_mb = 4096", 4096),
    ],
)
def test_what_an_attempt_reserves(tmp_path: Path, keys: str, needed: int) -> None:
    assert needed_mb(stage_of(tmp_path, keys)) == needed


def test_a_stage_inherits_memory_mb_from_defaults(tmp_path: Path) -> None:
    assert needed_mb(stage_of(tmp_path, "", defaults="memory_mb = 1024")) == 1024


def test_a_negative_memory_mb_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        stage_of(tmp_path, "memory_mb = -1")
    assert caught.value.exit_code == 78
    assert "memory_mb" in str(caught.value)


MEMINFO = b"MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:    3145728 kB\n"


def test_mem_available_is_read_in_mib() -> None:
    assert meminfo.parse(MEMINFO) == 3072
    assert meminfo.parse(b"MemTotal: 1 kB\nMemFree: 1 kB\n") is None  # before Linux 3.14
    assert meminfo.parse(b"MemAvailable: lots kB\n") is None


def test_the_test_file_replaces_proc_meminfo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "meminfo"
    fake.write_bytes(MEMINFO)
    monkeypatch.setenv(meminfo.TEST_MEMINFO, str(fake))
    assert meminfo.available_mb() == 3072
    monkeypatch.setenv(meminfo.TEST_MEMINFO, str(tmp_path / "missing"))
    assert meminfo.available_mb() is None  # unreadable: nothing waits for memory


def test_the_waiting_line_is_in_gigabytes() -> None:
    assert waiting_line(1229, 2048) == "waiting for memory: 1.2 GB free, 2 GB needed"
    assert gigabytes(-500) == "0"  # more reserved than available
