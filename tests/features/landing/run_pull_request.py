"""Run `open_pull_request` in a process of its own, as the landing step
would, so a crash test can kill it at a fault point (`ORCHESTRATOR_TEST_FAULT`)
and run it again. argv[1]: the request as JSON; prints the outcome as JSON."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from orchestrator.features.landing.model import LandRequest, StageReasons
from orchestrator.features.landing.pull_request import open_pull_request


def main() -> None:
    data = json.loads(sys.argv[1])
    data["repository"] = Path(data["repository"])
    data["worktree"] = Path(data["worktree"])
    data["stages"] = tuple(
        StageReasons(s["stage"], s["score"], tuple(s["reasons"])) for s in data["stages"]
    )
    outcome = open_pull_request(LandRequest(**data))
    print(json.dumps({"kind": type(outcome).__name__, **dataclasses.asdict(outcome)}))


if __name__ == "__main__":
    main()
