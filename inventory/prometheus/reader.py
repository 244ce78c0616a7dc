"""A fleet read from a Prometheus server: one Snapshot per host from instant queries.

gpuplan's own exporter metrics are preferred; a host with only NVIDIA's DCGM exporter is read from
DCGM_FI_DEV_FB_* (MiB, no per-process data). A host whose data is stale or incomplete is not used.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import json
import math
import netrc
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from pydantic import ValidationError

from inventory.prometheus import metrics as m
from inventory.snapshot import Card, Process, Snapshot, check_consistency, format_utc
from seats.errors import BadInputError, CannotDecideError
from seats.names import shown_name
from seats.units import GiB

MIB = 2**20
# A DCGM framebuffer figure above 16 TiB is no card's MiB count: it is bytes (or KiB) mislabelled.
DCGM_MAX_MIB = 2**24
DCGM_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
# Optional (not in dcgm-exporter's default counters): the exact total, where exported.
DCGM_TOTAL = "DCGM_FI_DEV_FB_TOTAL"

GPUPLAN_QUERY = '{__name__=~"gpuplan_.+"}'
# One scrape carries all of a host's series, so the poll gauge's sample time is the host's.
GPUPLAN_TIMES = f"timestamp({m.POLL_SUCCESS})"
DCGM_QUERY = f'{{__name__=~"{DCGM_USED}|{DCGM_FREE}|{DCGM_RESERVED}|{DCGM_TOTAL}"}}'
DCGM_TIMES = f"timestamp({DCGM_FREE})"
QUERIES = (GPUPLAN_QUERY, GPUPLAN_TIMES, DCGM_QUERY, DCGM_TIMES)


class Sample(NamedTuple):
    """One series of an instant-query answer: its labels, value text and evaluation time (unix s).

    A tuple, not a dataclass: a 128-host fleet is some 13,000 of them per read.
    """

    labels: Mapping[str, str]
    value: str
    at: float

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    def where(self) -> str:
        """`instance … (job …)`, for messages about colliding series."""
        return f"instance {self.labels.get('instance', '?')} (job {self.labels.get('job', '?')})"


@dataclass(frozen=True)
class HostProblem:
    """Why a host is not planned on: kind is stale, incomplete, collision, units, poll or absent."""

    host: str
    kind: str
    text: str


@dataclass(frozen=True)
class Fleet:
    """Usable snapshots (complete and fresh), the stale ones, and every host problem."""

    source: str
    snapshots: tuple[Snapshot, ...]
    stale: tuple[Snapshot, ...] = ()
    problems: tuple[HostProblem, ...] = ()
    warnings: tuple[str, ...] = ()

    def problem(self, host: str) -> HostProblem | None:
        """The problem that keeps `host` out of plans, if any."""
        return next((p for p in self.problems if p.host == host), None)


@dataclass
class QueryResults:
    """The four instant-query answers a fleet is built from."""

    gpuplan: list[Sample] = field(default_factory=list)
    gpuplan_times: list[Sample] = field(default_factory=list)
    dcgm: list[Sample] = field(default_factory=list)
    dcgm_times: list[Sample] = field(default_factory=list)


class _HostFault(Exception):
    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text


Opener = Callable[[str, float], bytes]

USER_ENV = "GPUPLAN_PROMETHEUS_USER"
PASSWORD_ENV = "GPUPLAN_PROMETHEUS_PASSWORD"
# An answer larger than this is no fleet's: refuse it rather than fill memory.
MAX_ANSWER_BYTES = GiB
_CHUNK = 64 * 1024


def public_url(url: str) -> str:
    """`url` as messages and --json may show it: no user, password, query string or fragment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def api_url(base: str, path: str, params: Mapping[str, str]) -> str:
    """`base` + /api/v1/`path` with `params` added to any query string `base` carries."""
    parts = urllib.parse.urlsplit(base)
    query = urllib.parse.urlencode(params)
    if parts.query:
        query = f"{parts.query}&{query}"
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/api/v1/{path}", query, "")
    )


def credentials(url: str) -> tuple[str, str] | None:
    """Basic-auth user and password for `url`: its userinfo, else the environment, else a netrc.

    $GPUPLAN_PROMETHEUS_USER / $GPUPLAN_PROMETHEUS_PASSWORD, else the machine entry of $NETRC
    (default ~/.netrc) for the URL's host. None: no authentication.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:
        return urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    user = os.environ.get(USER_ENV)
    if user:
        return user, os.environ.get(PASSWORD_ENV, "")
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    if not parts.hostname or not os.path.isfile(path):
        return None
    try:
        entry = netrc.netrc(path).authenticators(parts.hostname)
    except (netrc.NetrcParseError, OSError):
        return None
    if entry is None:
        return None
    login, _, password = entry
    return login, password or ""


class AnswerError(Exception):
    """An answer that did not arrive whole: cut short, too slow for the deadline, or too large."""


def urlopen_json(url: str, timeout: float) -> bytes:
    """GET `url` and read the whole answer within `timeout` seconds, connecting included.

    One deadline for the whole answer, not each read: a server that trickles one byte at a
    time is cut off at the deadline (a watchdog shuts the socket down however the reads are
    split). A status of 400 or more is an HTTPError carrying the body (Prometheus explains a
    refused query there). AnswerError when the answer is truncated, late or too large.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None:
        raise urllib.error.URLError("no host in the URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    headers = _headers(url)
    target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    late = f"the answer did not arrive whole within {timeout:g} s"
    expired = threading.Event()

    def cut_off() -> None:
        expired.set()
        if connection.sock is not None:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout, cut_off)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        body = _read_whole(connection, response, time.monotonic() + timeout, expired, late)
    except http.client.IncompleteRead as exc:
        if expired.is_set():
            raise AnswerError(late) from exc
        raise AnswerError(
            f"the answer was cut short ({len(exc.partial)} bytes read, {exc.expected} more expected)"
        ) from exc
    except (http.client.HTTPException, OSError) as exc:
        # A socket timeout, or the watchdog's shutdown seen as a reset or a bad status line.
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise AnswerError(late) from exc
        if isinstance(exc, OSError):
            raise
        raise AnswerError(f"the answer is not valid HTTP ({type(exc).__name__})") from exc
    finally:
        watchdog.cancel()
        connection.close()
    if response.status >= 400:
        raise urllib.error.HTTPError(
            public_url(url), response.status, response.reason, response.headers, io.BytesIO(body)
        )
    return body


def _headers(url: str) -> dict[str, str]:
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    found = credentials(url)
    if found is not None:
        token = base64.b64encode(f"{found[0]}:{found[1]}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
    return headers


def _read_whole(
    connection: http.client.HTTPConnection,
    response: http.client.HTTPResponse,
    deadline: float,
    expired: threading.Event,
    late: str,
) -> bytes:
    """The whole body, each read given only the time left before `deadline`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or expired.is_set():
            raise AnswerError(late)
        if connection.sock is not None:
            connection.sock.settimeout(left)
        chunk = response.read1(_CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise AnswerError("the answer is over 1 GiB")
        chunks.append(chunk)
    if expired.is_set():
        raise AnswerError(late)
    if response.length:
        # read1 ends quietly where the server closed early: Content-Length says what is missing.
        raise AnswerError(
            f"the answer was cut short ({size} bytes read, {response.length} more expected)"
        )
    return b"".join(chunks)


def query_url(base: str, promql: str, at: datetime) -> str:
    """The /api/v1/query URL for `promql` evaluated at `at`."""
    return api_url(base, "query", {"query": promql, "time": f"{at.timestamp():.3f}"})


def check_url(base: str) -> None:
    """Exit 2 for a URL that is not http(s)://host[:port][/prefix]."""
    parts = urllib.parse.urlsplit(base)
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInputError(
            f"--prometheus {public_url(base)!r}: expected a URL like http://prometheus:9090 "
            "(scheme and host)"
        )


def query(
    base: str, promql: str, *, at: datetime, timeout: float = 10.0, opener: Opener = urlopen_json
) -> list[Sample]:
    """Run one instant query; exit 3 (CannotDecideError) when Prometheus is unreachable or refuses."""
    body = fetch(base, query_url(base, promql, at), promql, timeout=timeout, opener=opener)
    return parse_response(body, base, promql)


def fetch(
    base: str, url: str, promql: str, *, timeout: float, opener: Opener = urlopen_json
) -> bytes:
    """The body Prometheus answers at `url` (an error body too); exit 3 when it cannot be reached.

    Messages name `base` without its credentials or query string (`public_url`).
    """
    shown = public_url(base)
    try:
        return opener(url, timeout)
    except urllib.error.HTTPError as exc:
        # Prometheus answers a bad or refused query with 4xx/5xx and a JSON error body.
        body = exc.read()
        if exc.code == 401:
            raise CannotDecideError(
                f"Prometheus at {shown}: query {promql} failed with HTTP 401 {exc.reason}: set "
                f"{USER_ENV} and {PASSWORD_ENV}, or a netrc entry for its host"
            ) from exc
        if not body:
            raise CannotDecideError(
                f"Prometheus at {shown}: query {promql} failed with HTTP {exc.code} {exc.reason}"
            ) from exc
        return bytes(body)
    except AnswerError as exc:
        raise CannotDecideError(f"Prometheus at {shown}: query {promql}: {exc}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CannotDecideError(
            f"Prometheus at {shown} is unreachable ({reason}) while querying {promql}"
        ) from exc


def successful_answer(
    body: bytes, base: str, promql: str, refused: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The JSON object of a successful Prometheus answer, or CannotDecideError naming the query.

    Where Prometheus says the query failed, `refused` (if given) sees its error text first and
    may raise a more helpful error of its own.
    """
    shown = public_url(base)
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CannotDecideError(
            f"Prometheus at {shown}: the answer to {promql} is not JSON, or was cut short "
            "(is this a Prometheus URL?)"
        ) from exc
    except (RecursionError, ValueError) as exc:
        raise CannotDecideError(
            f"Prometheus at {shown}: the answer to {promql} is malformed ({type(exc).__name__})"
        ) from exc
    if not isinstance(data, dict) or data.get("status") != "success":
        error = (
            str(data.get("error", "no error text")) if isinstance(data, dict) else "not an object"
        )
        kind = data.get("errorType", "error") if isinstance(data, dict) else "error"
        if refused is not None:
            refused(error)
        raise CannotDecideError(f"Prometheus at {shown}: query {promql} failed: {kind}: {error}")
    return data


def parse_response(body: bytes, base: str, promql: str) -> list[Sample]:
    """The samples of an instant-query JSON answer, or CannotDecideError naming the query."""
    result = successful_answer(body, base, promql).get("data", {})
    if (
        not isinstance(result, dict)
        or result.get("resultType") != "vector"
        or not isinstance(result.get("result"), list)
    ):
        raise CannotDecideError(
            f"Prometheus at {public_url(base)}: query {promql} did not return an instant vector"
        )
    samples: list[Sample] = []
    for series in result["result"]:
        try:
            at, value = series["value"]
            labels = series["metric"]
            if not isinstance(labels, dict):
                raise TypeError("labels are not an object")
            samples.append(Sample(labels, str(value), float(at)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CannotDecideError(
                f"Prometheus at {public_url(base)}: query {promql} returned a malformed series: {series!r:.200}"
            ) from exc
    return samples


def read_fleet(
    base: str,
    *,
    now: datetime,
    max_age: timedelta,
    expected_cards: Mapping[str, int] | None = None,
    card_totals: Mapping[str, int] | None = None,
    host_label: str | None = None,
    timeout: float = 10.0,
    opener: Opener = urlopen_json,
) -> Fleet:
    """Query Prometheus at `base` and build the fleet (see `build_fleet`)."""
    check_url(base)
    answers = [query(base, q, at=now, timeout=timeout, opener=opener) for q in QUERIES]
    results = QueryResults(*answers)
    fleet = build_fleet(
        results,
        now=now,
        max_age=max_age,
        expected_cards=expected_cards,
        card_totals=card_totals,
        host_label=host_label,
        source=public_url(base),
    )
    # Impossible figures are bad input here as in a file (DESIGN.md "Never yes by accident"), for
    # the catalogue's hosts: a host outside it decides nothing, so its figures refuse nothing.
    warnings = [
        warning
        for snapshot in (*fleet.snapshots, *fleet.stale)
        if expected_cards is None or snapshot.host in expected_cards
        for warning in check_consistency(
            snapshot, f"Prometheus at {public_url(base)}: host {snapshot.host}", now
        )
    ]
    return replace(fleet, warnings=(*fleet.warnings, *warnings)) if warnings else fleet


@dataclass(frozen=True)
class _Expected:
    """What the catalogue says of its hosts, and which label names a host."""

    cards: Mapping[str, int]
    totals: Mapping[str, int]
    host_label: str | None


def build_fleet(
    results: QueryResults,
    *,
    now: datetime,
    max_age: timedelta,
    expected_cards: Mapping[str, int] | None = None,
    card_totals: Mapping[str, int] | None = None,
    host_label: str | None = None,
    source: str = "Prometheus",
) -> Fleet:
    """One snapshot per host from the query answers.

    `taken_at` is the oldest sample time of the host (for gpuplan's exporter also no later than
    `gpuplan_snapshot_timestamp_seconds`, so a recorded snapshot keeps its age). A host older
    than `max_age` is stale; a host with a missing card or figure, colliding series, MIG or
    time-sliced cards, implausible DCGM units or a failed poll is reported as a problem and not
    used. `expected_cards` (from the catalogue) names hosts that must be present and how many
    cards each has; `card_totals` their `card_total` (DCGM's summed totals are checked against
    it); `host_label` the one label that names a host (else `HOST_LABELS`, then `instance`).
    """
    expected = _Expected(dict(expected_cards or {}), dict(card_totals or {}), host_label)
    built, problems, warnings = _host_snapshots(results, expected)
    fresh: list[Snapshot] = []
    stale: list[Snapshot] = []
    for snapshot in sorted(built, key=lambda s: s.host):
        age = now - snapshot.taken_at
        if age > max_age:
            stale.append(snapshot)
            problems.append(_stale(snapshot, age, max_age))
        else:
            fresh.append(snapshot)
    return Fleet(
        source=source,
        snapshots=tuple(fresh),
        stale=tuple(stale),
        problems=tuple(sorted(problems, key=lambda p: p.host)),
        warnings=tuple(warnings),
    )


def _host_snapshots(
    results: QueryResults, expected: _Expected
) -> tuple[list[Snapshot], list[HostProblem], list[str]]:
    """A snapshot per host, the hosts that could not be read or are absent, and warnings.

    gpuplan's exporter wins where both answer for a host; a host read from DCGM alone is warned of.
    """
    problems: list[HostProblem] = []
    warnings: list[str] = []
    built: list[Snapshot] = []
    label = expected.host_label
    gpuplan_hosts = _group(results.gpuplan, label, warnings)
    gpuplan_times = _group(results.gpuplan_times, label)
    dcgm_hosts = _group(results.dcgm, label, warnings)
    dcgm_times = _group(results.dcgm_times, label)

    for host in sorted(gpuplan_hosts):
        try:
            snapshot = _gpuplan_snapshot(
                host, gpuplan_hosts[host], gpuplan_times.get(host, []), expected.cards
            )
        except _HostFault as fault:
            problems.append(HostProblem(host, fault.kind, f"{host}: {fault.text}"))
            continue
        built.append(snapshot)
        if any(card.ok and card.reserved_bytes is None for card in snapshot.cards):
            warnings.append(
                f"{host}: driver reserve unknown (NVML v1 figures); "
                "used includes the reserve and CUDA total is taken as NVML total"
            )
    for host in sorted(set(dcgm_hosts) - set(gpuplan_hosts)):
        try:
            snapshot, notes = _dcgm_snapshot(
                host, dcgm_hosts[host], dcgm_times.get(host, []), expected
            )
        except _HostFault as fault:
            problems.append(HostProblem(host, fault.kind, f"{host}: {fault.text}"))
            continue
        built.append(snapshot)
        warnings.append(
            f"{host}: read from DCGM exporter ({DCGM_USED}/{DCGM_FREE}); no per-process data, "
            "so running seats with a `match` there count as absent (held)"
        )
        warnings.extend(notes)
    seen = set(gpuplan_hosts) | set(dcgm_hosts)
    for host in sorted(set(expected.cards) - seen):
        problems.append(_absent(host, sorted(seen - set(expected.cards)), label))
    return built, problems, warnings


def _absent(host: str, others: list[str], host_label: str | None) -> HostProblem:
    """A catalogue host with no series, and where its series may be hiding."""
    how = (
        f"label {host_label} (--host-label)"
        if host_label
        else f"labels {', '.join(HOST_LABELS)}, else instance without its port"
    )
    text = (
        f"{host}: absent: no gpuplan_* or {DCGM_FREE} series names it (hosts are read from {how})"
    )
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        text += f"; Prometheus has series of hosts outside the catalogue: {shown}"
    return HostProblem(host, "absent", text)


def _stale(snapshot: Snapshot, age: timedelta, max_age: timedelta) -> HostProblem:
    return HostProblem(
        snapshot.host,
        "stale",
        f"{snapshot.host}: stale: its figures date from "
        f"{format_utc(snapshot.taken_at)}, {int(age.total_seconds())} s ago, "
        f"older than --max-age {int(max_age.total_seconds())} s",
    )


# DESIGN.md "Fleets": Prometheus renames gpuplan's own `host` to `exported_host` when the scrape
# target sets one; dcgm-exporter names the node `Hostname` (`hostname` on its main branch since
# it renamed the label); with none of them, the scrape target's address is all there is.
HOST_LABELS = ("exported_host", "host", "Hostname", "hostname")


def host_of(labels: Mapping[str, str], host_label: str | None = None) -> str | None:
    """The host a series belongs to: `host_label` alone when given, else DESIGN.md's order.

    A label holding a line break or an escape sequence is escaped (`'a\\u000ab'`): it names a
    host no catalogue has, and cannot print a line of its own (DESIGN.md "Text from outside").
    """
    host = _host_label_value(labels, host_label)
    return None if host is None else shown_name(host)


def _host_label_value(labels: Mapping[str, str], host_label: str | None) -> str | None:
    if host_label is not None:
        return labels.get(host_label) or None
    for name in HOST_LABELS:
        value = labels.get(name)
        if value:
            return value
    instance = labels.get("instance", "")
    if instance.startswith("[") and "]" in instance:  # [::1]:9400
        return instance[1 : instance.index("]")] or None
    return instance.rsplit(":", 1)[0] if ":" in instance else (instance or None)


def _group(
    samples: Iterable[Sample], host_label: str | None, warnings: list[str] | None = None
) -> dict[str, list[Sample]]:
    """Samples by host; with --host-label, series lacking that label are counted in a warning."""
    grouped: dict[str, list[Sample]] = defaultdict(list)
    unnamed: list[Sample] = []
    for sample in samples:
        host = host_of(sample.labels, host_label)
        if host is None:
            unnamed.append(sample)
        else:
            grouped[host].append(sample)
    if unnamed and warnings is not None:
        first = unnamed[0]
        lacking = f"no {host_label} label" if host_label else "no host label and no instance"
        warnings.append(
            f"{len(unnamed)} series have {lacking} and are left out "
            f"(first: {first.name} from {first.where()})"
        )
    return grouped


# Labels that tell two series of one card apart, in the order a collision message names them.
# dcgm-exporter writes MIG instances as GPU_I_ID / GPU_I_PROFILE, and a card time-sliced among
# pods once per pod (pod, namespace, container, vgpu; exported_* after a Kubernetes scrape).
_MIG_LABELS = ("GPU_I_ID", "GPU_I_PROFILE")
_POD_LABELS = ("pod", "exported_pod", "namespace", "exported_namespace", "container", "vgpu")
_WHERE_LABELS = ("instance", "job", *_MIG_LABELS, *_POD_LABELS)
WHOLE_CARDS = "MIG / time-slicing: gpuplan plans whole cards"


def _index(samples: list[Sample], keys: tuple[str, ...]) -> dict[tuple[str, ...], Sample]:
    """Samples by (metric name, *keys); two series with one identity is a collision."""
    seen: dict[tuple[str, ...], Sample] = {}
    for sample in samples:
        key = (sample.name, *(sample.labels.get(k, "") for k in keys))
        if key in seen:
            ident = ",".join(f'{k}="{v}"' for k, v in zip(keys, key[1:], strict=True))
            raise _collision(
                f"{sample.name}{{{ident}}}" if ident else sample.name, seen[key], sample
            )
        seen[key] = sample
    return seen


def _collision(series: str, first: Sample, second: Sample) -> _HostFault:
    """Two series with one identity: name the labels that differ, and MIG or time-slicing as such."""
    differing = [
        name
        for name in sorted(set(first.labels) | set(second.labels), key=_label_rank)
        if name != "__name__" and first.labels.get(name, "") != second.labels.get(name, "")
    ]
    shown = ", ".join(
        f"{name} {first.labels.get(name, '')!r} vs {second.labels.get(name, '')!r}"
        for name in differing[:4]
    )
    text = f"{series} comes from two series that differ in {shown or 'nothing but their samples'}"
    if any(name in _MIG_LABELS or name in _POD_LABELS for name in differing):
        return _HostFault("mig", f"{text}: the card is shared out; {WHOLE_CARDS}")
    return _HostFault(
        "collision",
        f"{text}: two exporters answer for one host; give each its own host label "
        "(or pick another with --host-label)",
    )


def _label_rank(name: str) -> tuple[int, str]:
    return (_WHERE_LABELS.index(name) if name in _WHERE_LABELS else len(_WHERE_LABELS), name)


def _no_mig(samples: list[Sample]) -> None:
    """A DCGM series of a MIG instance describes a slice of the card, never the whole of it."""
    for sample in samples:
        labels = sample.labels
        if labels.get("GPU_I_ID") or labels.get("GPU_I_PROFILE"):
            raise _HostFault(
                "mig",
                f"gpu {labels.get('gpu', '?')} is in MIG mode ({sample.name} has GPU_I_PROFILE "
                f"{labels.get('GPU_I_PROFILE', '')!r}, GPU_I_ID {labels.get('GPU_I_ID', '')!r}); "
                f"{WHOLE_CARDS}",
            )


def _number(sample: Sample, host: str) -> float:
    try:
        return float(sample.value)
    except ValueError as exc:
        raise _HostFault("units", f"{sample.name} has value {sample.value!r}") from exc


def _bytes(sample: Sample | None, host: str, *, scale: int = 1) -> int | None:
    if sample is None:
        return None
    value = _number(sample, host)
    if math.isnan(value):
        return None
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise _HostFault(
            "units",
            f'{sample.name}{{gpu="{sample.labels.get("gpu", "")}"}} = {sample.value} '
            "is not a whole, non-negative count",
        )
    return int(value) * scale


def _card_index(sample: Sample) -> int:
    text = sample.labels.get("gpu", "")
    if not text.isdigit():
        raise _HostFault("incomplete", f"{sample.name} has gpu label {text!r}, not a card index")
    return int(text)


def _missing_cards(seen: Iterable[int], count: int | None) -> list[int]:
    indices = set(seen)
    top = count if count is not None else (max(indices) + 1 if indices else 0)
    return [i for i in range(top) if i not in indices]


def _gpuplan_snapshot(
    host: str, samples: list[Sample], times: list[Sample], expected: Mapping[str, int]
) -> Snapshot:
    per_host, per_card, per_process = _gpuplan_series(samples)
    # Grouped by host already: a host's series are told apart by name, card and pid.
    host_series = _index(per_host, ())
    card_series = _index(per_card, ("gpu",))
    process_series = _index(per_process, ("gpu", "pid"))

    success = host_series.get((m.POLL_SUCCESS,))
    if success is not None and _number(success, host) != 1:
        raise _HostFault(
            "poll", f"the exporter at {success.where()} could not read NVML ({m.POLL_SUCCESS} 0)"
        )

    declared = host_series.get((m.HOST_CARDS,))
    count = _bytes(declared, host) if declared is not None else expected.get(host)
    by_card = _gpuplan_by_card(card_series, samples, count)
    processes = _gpuplan_processes(process_series, host)
    cards = [
        _gpuplan_card(host, index, by_card[index], processes.get(index, []))
        for index in sorted(by_card)
    ]
    stray = sorted(set(processes) - set(by_card))
    if stray:
        raise _HostFault(
            "incomplete", f"{m.PROCESS_USED} names gpu {stray[0]}, which has no card series"
        )

    moments = [_number(t, host) for t in times]
    recorded = host_series.get((m.SNAPSHOT_TIMESTAMP,))
    if recorded is not None:
        moments.append(_number(recorded, host))
    info = host_series.get((m.HOST_INFO,))
    labels = info.labels if info is not None else {}
    return _snapshot(
        host,
        moments,
        cards,
        driver=labels.get("driver") or None,
        nvml_version=labels.get("nvml_version") or None,
    )


def _gpuplan_series(
    samples: list[Sample],
) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """One host's gpuplan samples split into per-host, per-card and per-process series."""
    per_host: list[Sample] = []
    per_card: list[Sample] = []
    per_process: list[Sample] = []
    for sample in samples:
        name = sample.name
        if name.startswith("gpuplan_card_"):
            per_card.append(sample)
        elif name == m.PROCESS_USED:
            per_process.append(sample)
        else:
            per_host.append(sample)
    return per_host, per_card, per_process


def _gpuplan_by_card(
    card_series: Mapping[tuple[str, ...], Sample], samples: list[Sample], count: int | None
) -> dict[int, dict[str, Sample]]:
    """Card index -> metric -> sample; every card up to `count` must have series."""
    by_card: dict[int, dict[str, Sample]] = defaultdict(dict)
    for (metric, _gpu), sample in card_series.items():
        by_card[_card_index(sample)][metric] = sample
    if not by_card:
        raise _HostFault(
            "incomplete",
            f"no gpuplan_card_* series (only {', '.join(sorted({s.name for s in samples}))})",
        )
    missing = _missing_cards(by_card, count)
    if missing:
        raise _HostFault(
            "incomplete",
            f"has {len(by_card)} of {count if count is not None else max(by_card) + 1} cards: "
            f"no {m.CARD_ERROR} series for gpu {', '.join(map(str, missing))}",
        )
    return by_card


def _gpuplan_processes(
    process_series: Mapping[tuple[str, ...], Sample], host: str
) -> dict[int, list[Process]]:
    """Card index -> the processes the exporter saw on it; the foreign label means no seat."""
    processes: dict[int, list[Process]] = defaultdict(list)
    for sample in process_series.values():
        seat = sample.labels.get("seat", m.FOREIGN)
        pid_text = sample.labels.get("pid", "")
        if not pid_text.isdigit():
            raise _HostFault("incomplete", f"{m.PROCESS_USED} has pid label {pid_text!r}")
        processes[_card_index(sample)].append(
            Process(
                pid=int(pid_text),
                used_bytes=_bytes(sample, host),
                seat=None if seat in ("", m.FOREIGN) else seat,
            )
        )
    return processes


def _gpuplan_card(
    host: str, index: int, series: Mapping[str, Sample], processes: list[Process]
) -> Card:
    """One card from its gpuplan series: an error card, or memory figures that must be there."""
    error_sample = series.get(m.CARD_ERROR)
    if error_sample is None:
        raise _HostFault("incomplete", f"gpu {index} has no {m.CARD_ERROR} series")
    uuid = error_sample.labels.get("uuid") or None
    card_info = series.get(m.CARD_INFO)
    card_name = (card_info.labels.get("name") or None) if card_info is not None else None
    if _number(error_sample, host) != 0:
        error = error_sample.labels.get("error") or "unknown"
        return Card(index=index, uuid=uuid, name=card_name, error=error)
    need = [m.CARD_TOTAL, m.CARD_USED, m.CARD_FREE]
    version = series.get(m.CARD_MEMORY_VERSION)
    if version is None or _number(version, host) != 1:
        need.append(m.CARD_RESERVED)  # only a v1-only card may lack the reserve
    absent = [metric for metric in need if metric not in series]
    if absent:
        raise _HostFault("incomplete", f"gpu {index} lacks {', '.join(absent)}")
    ratio = series.get(m.CARD_UTILIZATION)
    utilization = None if ratio is None else round(_number(ratio, host) * 100)
    return _card(
        host,
        index=index,
        uuid=uuid,
        name=card_name,
        total_bytes=_bytes(series[m.CARD_TOTAL], host),
        reserved_bytes=_bytes(series.get(m.CARD_RESERVED), host),
        used_bytes=_bytes(series[m.CARD_USED], host),
        free_bytes=_bytes(series[m.CARD_FREE], host),
        utilization_percent=utilization,
        processes=tuple(sorted(processes, key=lambda p: p.pid)),
    )


# DCGM rounds used, free and reserved to whole MiB each: their sum may miss the card's total by
# up to 3 MiB (1 MiB short on real L40S figures), so a catalogue card_total this close is the card's.
DCGM_TOTAL_TOLERANCE_BYTES = 4 * MIB


def _dcgm_snapshot(
    host: str, samples: list[Sample], times: list[Sample], expected: _Expected
) -> tuple[Snapshot, list[str]]:
    """The host's snapshot from DCGM's figures, and what the reader had to assume to build it."""
    _no_mig(samples)
    series = _index(samples, ("gpu",))
    by_card: dict[int, dict[str, Sample]] = defaultdict(dict)
    for (name, _gpu), sample in series.items():
        by_card[_card_index(sample)][name] = sample
    missing = _missing_cards(by_card, expected.cards.get(host))
    if missing:
        raise _HostFault(
            "incomplete",
            f"DCGM exporter shows {len(by_card)} cards; no series for gpu {', '.join(map(str, missing))}",
        )
    with_reserve = [i for i, s in by_card.items() if DCGM_RESERVED in s]
    if with_reserve and len(with_reserve) != len(by_card):
        without = sorted(set(by_card) - set(with_reserve))
        raise _HostFault(
            "incomplete", f"gpu {without[0]} lacks {DCGM_RESERVED} (other cards have it)"
        )
    card_total = expected.totals.get(host)
    cards = [_dcgm_card(host, index, by_card[index], card_total) for index in sorted(by_card)]
    moments = [_number(t, host) for t in times]
    driver = next(
        (
            s.labels["DCGM_FI_DRIVER_VERSION"]
            for s in samples
            if s.labels.get("DCGM_FI_DRIVER_VERSION")
        ),
        None,
    )
    notes = _dcgm_notes(host, by_card, card_total)
    return _snapshot(host, moments, cards, driver=driver, nvml_version=None), notes


def _dcgm_notes(
    host: str, by_card: Mapping[int, Mapping[str, Sample]], card_total: int | None
) -> list[str]:
    """What a DCGM host's figures leave unknown: the driver reserve, where it is not exported."""
    if any(DCGM_RESERVED in figures for figures in by_card.values()):
        return []
    total = (
        f"NVML total taken from hosts.{host}.card_total"
        if card_total is not None
        else "NVML total taken as used + free, which leaves out the unknown reserve"
    )
    return [
        f"{host}: no {DCGM_RESERVED} series, so the driver reserve is unknown; {total}, and the "
        f"CUDA total as that total (the stricter for vLLM's gate); export {DCGM_RESERVED} to know it"
    ]


def _dcgm_card(
    host: str, index: int, card_series: Mapping[str, Sample], card_total: int | None
) -> Card:
    """One card from DCGM's MiB figures: used and free must be there, total is summed if absent."""
    lacking = [n for n in (DCGM_USED, DCGM_FREE) if n not in card_series]
    if lacking:
        raise _HostFault("incomplete", f"gpu {index} lacks {', '.join(lacking)}")
    figures = {
        key: _dcgm_bytes(host, index, card_series.get(metric))
        for key, metric in (
            ("used", DCGM_USED),
            ("free", DCGM_FREE),
            ("reserved", DCGM_RESERVED),
            ("total", DCGM_TOTAL),
        )
    }
    used, free, reserved = figures["used"], figures["free"], figures["reserved"]
    if used is None or free is None:
        raise _HostFault("incomplete", f"gpu {index}: {DCGM_USED} or {DCGM_FREE} is NaN")
    first = card_series[DCGM_FREE]
    return _card(
        host,
        index=index,
        uuid=first.labels.get("UUID") or None,
        name=first.labels.get("modelName") or None,
        total_bytes=figures["total"] or _dcgm_total(used, free, reserved, card_total),
        reserved_bytes=reserved,
        used_bytes=used,
        free_bytes=free,
        utilization_percent=None,
        processes=(),
    )


def _dcgm_total(used: int, free: int, reserved: int | None, card_total: int | None) -> int:
    """NVML total = reserved + used + free (v2), each part in whole MiB.

    With the reserve, a catalogue card_total within DCGM_TOTAL_TOLERANCE_BYTES of the sum is
    the exact total. Without it the sum lacks the reserve: card_total, when the sum is not above
    it, is the total; else the sum (and the catalogue check says how far apart they are).
    """
    summed = used + free + (reserved or 0)
    if card_total is None:
        return summed
    if reserved is not None:
        return card_total if abs(summed - card_total) <= DCGM_TOTAL_TOLERANCE_BYTES else summed
    return card_total if summed <= card_total + DCGM_TOTAL_TOLERANCE_BYTES else summed


def _dcgm_bytes(host: str, index: int, reading: Sample | None) -> int | None:
    """Bytes from a DCGM figure in MiB; None when absent or NaN; a byte-sized value is refused."""
    if reading is None:
        return None
    mib = _bytes(reading, host)
    if mib is not None and mib >= DCGM_MAX_MIB:
        raise _HostFault(
            "units",
            f'{reading.name}{{gpu="{index}"}} = {reading.value}: DCGM reports MiB and no card has '
            f"{DCGM_MAX_MIB} MiB; is the exporter sending bytes?",
        )
    return None if mib is None else mib * MIB


def _card(host: str, **fields: Any) -> Card:
    try:
        return Card(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise _HostFault(
            "incomplete",
            f"gpu {fields.get('index')}: {str(first['msg']).removeprefix('Value error, ')}",
        ) from exc


def _snapshot(
    host: str,
    moments: list[float],
    cards: list[Card],
    *,
    driver: str | None,
    nvml_version: str | None,
) -> Snapshot:
    if not moments:
        raise _HostFault("incomplete", "no sample time for the host")
    taken_at = datetime.fromtimestamp(int(min(moments)), UTC)
    return Snapshot(
        host=host, taken_at=taken_at, driver=driver, nvml_version=nvml_version, cards=tuple(cards)
    )
