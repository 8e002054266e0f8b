"""Prometheus in tests: the alert rule files, and a real server and its HTTP API."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class Process:
    """A child process with its output in a file (no pipe to fill), ended by its pid."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.log = log_dir / f"{name}.log"
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._out.close()
        return self.proc.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def query(base: str, promql: str) -> list[dict[str, Any]]:
    answer = http_json(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def alert(base: str, name: str, state: str) -> dict[str, Any] | None:
    for item in http_json(f"{base}/api/v1/alerts")["data"]["alerts"]:
        if item["labels"]["alertname"] == name and item["state"] == state:
            return dict(item)
    return None


ROOT = Path(__file__).resolve().parents[2]


RULES = ROOT / "deploy" / "prometheus" / "resolver-alerts.yml"


RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))


RUNBOOK = ROOT / "docs" / "runbook.md"
