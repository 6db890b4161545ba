"""`[[hooks]]` is validated like the rest of the config: every mistake names its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError

STAGE = """
[[pipelines.default.stages]]
name = "research"
worker = ["true"]
"""


def load(tmp_path: Path, hooks: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "orchestrator.toml"
    path.write_text(STAGE + hooks)
    return load_settings(config=str(path), db_url=None, require_config=True)


def test_hooks_parse_with_defaults(tmp_path: Path) -> None:
    settings = load(tmp_path, '[[hooks]]\non = ["halted"]\ncommand = ["notify-send", "x"]\n')
    (hook,) = settings.hooks
    assert hook.name == "notify-send x" and hook.on == ("halted",)
    assert (hook.timeout_seconds, hook.retry_seconds, hook.max_retry_seconds) == (30, 30, 3600)
    assert [hook.backoff(n) for n in (1, 2, 3, 10)] == [30, 60, 120, 3600]
    assert hook.backoff(1025) == hook.backoff(10**6) == 3600  # 2**1024 fits no float


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ('[[hooks]]\non = ["halted"]\n', "hooks[0].command: missing"),
        ('[[hooks]]\ncommand = ["x"]\n', "hooks[0].on: missing"),
        ('[[hooks]]\non = ["halt"]\ncommand = ["x"]\n', "hooks[0].on[0]: unknown event 'halt'"),
        ('[[hooks]]\non = ["halted"]\ncommand = "curl x"\n', "use an argv list"),
        (
            '[[hooks]]\non = ["halted"]\ncommand = ["x"]\ntimeout_seconds = 0\n',
            "hooks[0].timeout_seconds: expected a number in (0, 31536000]",
        ),
        (
            '[[hooks]]\non = ["halted"]\ncommand = ["x"]\nmax_retry_seconds = 1e300\n',
            "hooks[0].max_retry_seconds: expected a number in (0, 31536000]",
        ),
        ('[[hooks]]\non = ["halted"]\ncommand = ["x"]\nwhen = 1\n', "hooks[0].when: unknown key"),
        (
            '[[hooks]]\non = ["halted"]\ncommand = ["x"]\n'
            '[[hooks]]\non = ["complete"]\ncommand = ["x"]\n',
            "hooks[1].name: another hook is already named 'x'",
        ),
    ],
)
def test_hook_mistakes_name_their_key(tmp_path: Path, hooks: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, hooks)
    assert message in str(caught.value)
