"""Prometheus for the telemetry tests: Debian's real server (`/usr/bin/prometheus`, package
`prometheus`, installed by .ci/setup-interop) scraping one target, and a parser for a /metrics
page (PyPI `prometheus-client`).

    with Prometheus("127.0.0.1:9464") as prom:          # scrapes http://127.0.0.1:9464/metrics every 1 s
        prom.wait_until("up", lambda v: v == 1)
        assert prom.value('loom_tool_calls_total{tool="echo"}') == 3

    samples = fetch_metrics("http://127.0.0.1:9464/metrics")
    samples.value("loom_requests_total", method="tools/call", outcome="ok")

The server runs without a service manager: its config, TSDB and log live in a temp directory
removed on stop; its web/API port is a free one on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

PROMETHEUS_BIN = os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus")

# How long Prometheus may take to answer /-/ready (TSDB set-up, config load), and the default
# bound on `wait_until`: a few scrapes at 1 s.
READY_WITHIN = 30.0
DEFAULT_WAIT = 20.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Prometheus:
    """Debian's Prometheus scraping `target` (host:port) at `metrics_path` every
    `scrape_interval`. `bearer_token`: sent as `Authorization: Bearer …` on every scrape (for a
    /metrics behind the HTTP face's token rules)."""

    def __init__(
        self,
        target: str,
        *,
        metrics_path: str = "/metrics",
        scrape_interval: str = "1s",
        bearer_token: str | None = None,
        job: str = "loom",
    ) -> None:
        self.target = target
        self.metrics_path = metrics_path
        self.scrape_interval = scrape_interval
        self.bearer_token = bearer_token
        self.job = job
        self.url = ""
        self.workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def _config(self) -> str:
        # JSON is valid YAML, so the config is written with json.dumps (no YAML library needed).
        # scrape_timeout must not exceed the interval, and the global default (10 s) would.
        scrape: dict[str, Any] = {
            "job_name": self.job,
            "scrape_interval": self.scrape_interval,
            "scrape_timeout": self.scrape_interval,
            "metrics_path": self.metrics_path,
            "static_configs": [{"targets": [self.target]}],
        }
        if self.bearer_token:
            scrape["authorization"] = {"type": "Bearer", "credentials": self.bearer_token}
        return json.dumps({"global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval}, "scrape_configs": [scrape]}, indent=2)

    def start(self) -> Prometheus:
        if not os.access(PROMETHEUS_BIN, os.X_OK):
            raise RuntimeError(f"{PROMETHEUS_BIN} is missing: install Debian's `prometheus` package (.ci/setup-interop does)")
        self.workdir = Path(tempfile.mkdtemp(prefix="loom-prometheus-"))
        config = self.workdir / "prometheus.yml"
        config.write_text(self._config())
        # A port picked free may be taken before Prometheus binds it; try a few.
        for _attempt in range(3):
            port = _free_port()
            self.url = f"http://127.0.0.1:{port}"
            with (self.workdir / "prometheus.log").open("ab") as log:
                self._process = subprocess.Popen(
                    [
                        PROMETHEUS_BIN,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={self.workdir / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                        # Debian's default points at /usr/share/prometheus/…; the API needs none of it.
                        f"--web.console.templates={self.workdir}",
                        f"--web.console.libraries={self.workdir}",
                        "--log.level=warn",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            if self._wait_ready():
                return self
            self._terminate()
        raise RuntimeError(f"prometheus did not become ready: {self.log()[-3000:]}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        return False

    def _terminate(self) -> None:
        if self._process is None:
            return
        self._process.terminate()  # SIGTERM: Prometheus shuts down cleanly
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def stop(self) -> None:
        self._terminate()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self) -> str:
        """Prometheus's own log (warnings and errors), for a failure message."""
        if self.workdir is None or not (self.workdir / "prometheus.log").exists():
            return ""
        return (self.workdir / "prometheus.log").read_text(errors="replace")

    # -- the HTTP API ------------------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>?params; the `data` of a successful answer."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:  # a bad query answers 400 with a JSON error
            body = json.load(error)
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: each series of the result as (labels, value). A scalar result is
        one series without labels."""
        data = self.api("query", query=expr)
        if data["resultType"] == "vector":
            return [(series["metric"], float(series["value"][1])) for series in data["result"]]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        raise RuntimeError(f"prometheus query {expr!r} gave a {data['resultType']}, not an instant vector")

    def value(self, expr: str) -> float | None:
        """The value of an instant query with one series, None with none; an error with more
        (wrap the expression in sum(…) to add them up)."""
        result = self.query(expr)
        if len(result) > 1:
            raise RuntimeError(f"prometheus query {expr!r} gave {len(result)} series: {result}")
        return result[0][1] if result else None

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets with health, lastError, lastScrape (why `up` is 0)."""
        return self.api("targets")["activeTargets"]

    def wait_until(self, expr: str, condition: Callable[[float | None], bool], timeout: float = DEFAULT_WAIT) -> float | None:
        """Queries `expr` (one series, see `value`) until `condition(value)` holds; the value
        then. An AssertionError after `timeout`, naming the last value and the target's state."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.value(expr)
            if condition(current):
                return current
            if time.monotonic() >= deadline:
                states = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in self.targets()]
                raise AssertionError(f"prometheus: {expr!r} is {current} after {timeout} s; targets: {states}")
            time.sleep(0.25)


# -- a /metrics page -------------------------------------------------------------------------


class Samples(dict[tuple[str, frozenset[tuple[str, str]]], float]):
    """A /metrics page's samples: {(sample name, frozenset(labels.items())): value}. Sample
    names are as exposed (`x_total`, `h_bucket`, `h_count`, `h_sum`, and `x_created` in
    OpenMetrics), not the family names."""

    content_type: str = ""

    def value(self, name: str, **labels: str) -> float | None:
        """The sample with exactly these labels, or None."""
        return self.get((name, frozenset(labels.items())))

    def matching(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of `name` whose labels include these, by its full label set."""
        wanted = set(labels.items())
        return {key_labels: v for (key_name, key_labels), v in self.items() if key_name == name and wanted <= key_labels}

    def total(self, name: str, **labels: str) -> float:
        """The sum of `matching(name, **labels)` (0 when none match)."""
        return sum(self.matching(name, **labels).values())

    def names(self) -> set[str]:
        return {name for name, _labels in self}


def parse_metrics(text: str, content_type: str = "text/plain") -> Samples:
    """Parses a metrics page: OpenMetrics (with its mandatory `# EOF`) when `content_type` is
    application/openmetrics-text, else the Prometheus text format. A sample that repeats (name
    and labels) is an error, as it is to Prometheus."""
    openmetrics = content_type.split(";")[0].strip().lower() == "application/openmetrics-text"
    families: Iterable[Any] = parse_openmetrics(text) if openmetrics else parse_text(text)
    samples = Samples()
    samples.content_type = content_type
    for family in families:
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            if key in samples:
                raise ValueError(f"sample {sample.name}{dict(sample.labels)} appears twice")
            samples[key] = float(sample.value)
    return samples


def fetch_metrics(url: str, *, headers: dict[str, str] | None = None, accept: str | None = None, timeout: float = 10.0) -> Samples:
    """GETs a /metrics URL and parses it by its Content-Type (see `parse_metrics`). `accept`:
    an Accept header, e.g. "application/openmetrics-text;version=1.0.0" to ask for OpenMetrics
    as Prometheus does. A non-200 answer raises urllib.error.HTTPError."""
    request = urllib.request.Request(url, headers={**(headers or {}), **({"Accept": accept} if accept else {})})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        content_type = answer.headers.get("Content-Type", "text/plain")
        return parse_metrics(answer.read().decode(), content_type)
