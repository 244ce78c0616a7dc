"""Which cards a compose service gets: device requests, `gpus:`, the visible-devices variables.

`read_devices` reads what the file says; `resolve_cards` turns it into NVML indices on a host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from inventory.snapshot import Card
from placement.check.compose.model import ComposeError, ComposeService
from placement.fit.engines.registry import engine as registry_engine

DEVICES_FIELD = "deploy.resources.reservations.devices"


class Reader(Protocol):
    """What reading devices needs from a service reader: interpolated text and errors that name it."""

    def text(self, value: object, where: str) -> str: ...

    def fail(self, argument: str | None, msg: str) -> ComposeError: ...


Devices = tuple[tuple[str, ...] | None, str | None, int | None]


_CDI = "nvidia.com/gpu="
_DEVICE_NODE = re.compile(r"/dev/nvidia(\d+)(?::.*)?")


def asks_for_gpu(body: dict[str, object]) -> bool:
    """True when the service asks for NVIDIA cards in any form docker knows (DESIGN.md)."""
    if body.get("gpus") is not None or _cdi_entries(body):
        return True
    if str(body.get("runtime", "")).strip() == "nvidia":
        return True
    if any(_is_gpu_request(item) for item in _raw_requests(body)):
        return True
    environment = body.get("environment")
    keys = (
        [str(key) for key in environment]
        if isinstance(environment, dict)
        else [str(item).split("=", 1)[0] for item in environment]
        if isinstance(environment, list)
        else []
    )
    return "NVIDIA_VISIBLE_DEVICES" in keys


def _is_gpu_request(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    capabilities = item.get("capabilities")
    if isinstance(capabilities, list) and "gpu" in [str(c) for c in capabilities]:
        return True
    return str(item.get("driver", "")) in {"nvidia", "cdi"}


def _raw_requests(body: dict[str, object]) -> list[object]:
    deploy = body.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    listed = reservations.get("devices") if isinstance(reservations, dict) else None
    return list(listed) if isinstance(listed, list) else []


def _cdi_entries(body: dict[str, object]) -> list[tuple[int, str]]:
    """`devices: [nvidia.com/gpu=0, /dev/nvidia1]`: the service-level entries that name a card."""
    listed = body.get("devices")
    if not isinstance(listed, list):
        return []
    return [
        (i, str(item))
        for i, item in enumerate(listed)
        if isinstance(item, str) and (_CDI in item or _DEVICE_NODE.fullmatch(item))
    ]


def read_devices(reader: Reader, body: dict[str, object]) -> Devices:
    """(device ids, where they were written, count) from deploy reservations, `gpus:` or CDI devices.

    A count of -1 is every card (`count: all`, `gpus: all`, `nvidia.com/gpu=all`).
    """
    cdi = _read_cdi(reader, body)
    if cdi is not None:
        return cdi
    requests = _reservation_requests(reader, body)
    gpus = _gpus_requests(reader, body.get("gpus"))
    if gpus is None:
        return None, "gpus: all", -1
    requests.extend(gpus)
    ids: list[str] = []
    where: str | None = None
    count: int | None = None
    for at, item in requests:
        if not isinstance(item, dict):
            raise reader.fail(at, "expected a mapping (driver, count, device_ids, capabilities)")
        capabilities = item.get("capabilities")
        if isinstance(capabilities, list) and "gpu" not in [str(c) for c in capabilities]:
            continue
        if item.get("device_ids") is not None:
            where = f"{at}.device_ids"
            found = _device_ids(reader, item["device_ids"], where)
            if "all" in found:
                return None, where, -1
            ids.extend(found)
        elif item.get("count") is not None:
            count, where = _count(reader, item["count"], f"{at}.count"), f"{at}.count"
    if ids:
        # Several requests (an override file's appended to the base file's, as compose-go
        # merges a list) name a card once: the container holds each card once.
        return tuple(dict.fromkeys(ids)), where, None
    return None, where, count


def _gpus_requests(reader: Reader, gpus: object) -> list[tuple[str, object]] | None:
    """`gpus:` as device requests; None for `gpus: all`."""
    if gpus is None:
        return []
    if isinstance(gpus, str) and reader.text(gpus, "gpus").strip().lower() == "all":
        return None
    if not isinstance(gpus, list):
        raise reader.fail("gpus", "expected `all` or a list of device requests")
    return [(f"gpus[{i}]", item) for i, item in enumerate(gpus)]


def _reservation_requests(reader: Reader, body: dict[str, object]) -> list[tuple[str, object]]:
    deploy = body.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    listed = reservations.get("devices") if isinstance(reservations, dict) else None
    if listed is None:
        return []
    if not isinstance(listed, list):
        raise reader.fail(DEVICES_FIELD, "expected a list")
    return [(f"{DEVICES_FIELD}[{i}]", item) for i, item in enumerate(listed)]


def _device_ids(reader: Reader, listed: object, where: str) -> list[str]:
    """Card ids as docker reads them: the list joined with commas (`["0,1"]` is cards 0 and 1)."""
    if not isinstance(listed, list) or not listed:
        raise reader.fail(where, "expected a non-empty list of card ids")
    joined = ",".join(reader.text(v, where) for v in listed)
    ids = [part.strip().removeprefix(_CDI) for part in joined.split(",") if part.strip()]
    if not ids:
        raise reader.fail(where, "expected a non-empty list of card ids")
    return ids


def _read_cdi(reader: Reader, body: dict[str, object]) -> Devices | None:
    """`devices: [nvidia.com/gpu=0|GPU-uuid|all]` (CDI) or `/dev/nvidiaN` device nodes."""
    entries = _cdi_entries(body)
    if not entries:
        return None
    ids: list[str] = []
    for i, raw in entries:
        where = f"devices[{i}]"
        text = reader.text(raw, where).strip()
        node = _DEVICE_NODE.fullmatch(text)
        card = node.group(1) if node else text.split(_CDI, 1)[-1].split(":", 1)[0]
        if card == "all":
            return None, where, -1
        ids.append(card)
    return tuple(ids), "devices", None


def _count(reader: Reader, value: object, where: str) -> int:
    raw = reader.text(value, where).strip().lower()
    if raw == "all":
        return -1
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    raise reader.fail(where, f"{raw!r} is neither a positive number nor all")


def device_list(text: str) -> tuple[str, ...] | None:
    """'0,1' → ('0', '1'); None for 'all', 'none', 'void' or empty (the caller decides)."""
    cleaned = text.strip()
    if cleaned.lower() in {"", "all", "none", "void", "-1"}:
        return None
    return tuple(part.strip() for part in cleaned.split(",") if part.strip())


class _HostCards:
    """A host's cards by index and UUID, for one service: errors name the service and field."""

    def __init__(self, service: ComposeService, host: str, cards: Sequence[Card]) -> None:
        self.service = service
        self.host = host
        self.indices = sorted(card.index for card in cards)
        self.by_uuid = {card.uuid: card.index for card in cards if card.uuid}

    def fail(self, where: str | None, msg: str) -> ComposeError:
        return ComposeError(self.service.path, self.service.name, where, msg)

    def card(self, token: str, where: str) -> int:
        if token.isdigit():
            if int(token) not in self.indices:
                raise self.fail(
                    where, f"host {self.host} has {self.span}; there is no card {token}"
                )
            return int(token)
        if token in self.by_uuid:
            return self.by_uuid[token]
        raise self.fail(where, f"host {self.host} has no card {token!r} (by index or UUID)")

    @property
    def span(self) -> str:
        indices = self.indices
        if indices == list(range(len(indices))):
            return f"cards 0–{indices[-1]}"
        return f"cards {indices}"


def resolve_cards(
    service: ComposeService, host: str, cards: Sequence[Card], *, every: bool = False
) -> tuple[int, ...]:
    """The NVML indices the service's engine will use on `host`, or `ComposeError` naming the card.

    Host cards come from device ids (or all cards); CUDA_VISIBLE_DEVICES picks among them by
    position; vLLM then takes the first tensor × pipeline parallel of what it sees. With
    `every`, all the cards the container sees (a service whose engine gpuplan cannot tell:
    nothing says it takes fewer; `count: all` is every card of the host).
    """
    host_cards = _HostCards(service, host, cards)
    if not service.names_cards:
        raise host_cards.fail(
            DEVICES_FIELD,
            "the service names no card; give device_ids, CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES",
        )
    seen = _container_cards(service, host_cards)
    if service.visible is not None:
        seen = _visible_cards(service, host_cards, seen)
    if every or service.all_cards:
        return tuple(seen)
    if len(seen) < service.cards_needed:
        flag = service.cards_from or registry_engine(service.engine or "other").flag_of(
            "data_parallel_size" if service.data_parallel_size > 1 else "tensor_parallel_size"
        )
        engines = (
            f"its {service.data_parallel_size} engines need {service.world_size} card(s) each, "
            f"{service.cards_needed} in all,"
            if service.data_parallel_size > 1
            else f"the engine needs {service.world_size} cards"
        )
        if service.cards_from is not None:
            # Named as written: `--dp 4`, `environment NUM_SHARD 4` (issue 31: not as vLLM's
            # --tensor-parallel-size).
            engines = f"{service.cards_from} starts it on {service.cards_needed} cards"
        raise host_cards.fail(flag, f"{engines} and the container sees {len(seen)}")
    return tuple(seen[: service.cards_needed])


def _container_cards(service: ComposeService, host_cards: _HostCards) -> list[int]:
    """The host cards the container gets, in the order it sees them."""
    indices = host_cards.indices
    if service.devices is not None:
        where = service.devices_from or "devices"
        return [host_cards.card(token, where) for token in service.devices]
    if service.device_count is not None and service.device_count > 0:
        if service.device_count > len(indices):
            raise host_cards.fail(
                service.devices_from,
                f"asks for {service.device_count} cards; host {host_cards.host} has {len(indices)}",
            )
        return indices[: service.device_count]
    return list(indices)


def _visible_cards(service: ComposeService, host_cards: _HostCards, seen: list[int]) -> list[int]:
    """CUDA_VISIBLE_DEVICES inside the container: positions among its cards, or UUIDs."""
    where = "environment CUDA_VISIBLE_DEVICES"
    every_card = service.devices is None and service.device_count is None
    chosen: list[int] = []
    for token in service.visible or ():
        if token.isdigit() and every_card:
            # The container sees every card of the host: positions are host indices.
            chosen.append(host_cards.card(token, where))
        elif token.isdigit():
            position = int(token)
            if position >= len(seen):
                raise host_cards.fail(
                    where,
                    f"index {position} but the container sees {len(seen)} card(s) "
                    f"({', '.join(map(str, seen))} on {host_cards.host})",
                )
            chosen.append(seen[position])
        else:
            card = host_cards.card(token, where)
            if card not in seen:
                raise host_cards.fail(where, f"{token!r} is not among the container's cards")
            chosen.append(card)
    return chosen
