"""Ports planned for a cluster's servers: distinct, free, and out of the kernel's ephemeral range."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from acklab.cluster import layout


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = layout.free_ports(40)
    assert len(set(ports)) == 40
    first_ephemeral = int(layout.EPHEMERAL_RANGE.read_text().split()[0])
    assert all(layout.PORT_FLOOR <= port < first_ephemeral for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_some_server_holds_is_never_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", layout.free_ports(1)[0])) as held:
        port = held.getsockname()[1]
        monkeypatch.setattr(layout, "PORT_FLOOR", port)
        monkeypatch.setattr(layout, "_first_ephemeral_port", lambda: port + 3)
        assert sorted(layout.free_ports(2)) == [port + 1, port + 2]


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text(f"{layout.PORT_FLOOR + 1}\t60999\n")
    monkeypatch.setattr(layout, "EPHEMERAL_RANGE", narrow)
    ports = layout.free_ports(3)
    assert len(set(ports)) == 3 and sum(port > layout.PORT_FLOOR for port in ports) >= 2
