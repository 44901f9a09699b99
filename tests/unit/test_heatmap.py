"""The heatmap stays readable as the matrix grows: the standard matrix's 21 faults x 7 profiles, for
two client families, is one panel per client, each about as wide as a laptop screen."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from acklab.plan.params import standard_matrix
from acklab.report.charts import heatmap


def test_the_standard_matrix_for_two_clients_is_two_panels_a_laptop_shows(tmp_path: Path) -> None:
    params = standard_matrix()
    clients = {"": {"client_family": "librdkafka", "client_version": "2.16.1", "librdkafka_version": "2.16.0"},
               "@java": {"client_family": "java", "client_version": "4.3.1"}}
    rows = [
        {"scenario": f"{profile}{tag}__{fault}", "fault": fault, "lost": 0, "duplicates": 0, "failed": 12, **client}
        for tag, client in clients.items() for profile in params.profiles for fault in params.faults
    ]
    assert len(rows) == 2 * 7 * 21
    png = heatmap(rows, {r["scenario"]: "pass" for r in rows}, tmp_path / "heatmap.png")
    width, height = Image.open(png).size
    assert 1000 <= width <= 1500, width  # was 4,565 px at 21 faults side by side
    one_panel = height / 2
    assert one_panel / 21 >= 50, height  # a fault's row of cells keeps >= 50 px: its three lines of 8-point text
