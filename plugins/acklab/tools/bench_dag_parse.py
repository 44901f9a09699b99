"""`make bench-dag-parse`: what the DAG processor pays to parse acklab's DAG files.

In each of `--interpreters` fresh interpreters: `import airflow.sdk` (not timed), then the wall time
of importing every file in dags/. Prints each time and, last, `dag parse seconds: X`, their median."""

from __future__ import annotations

import statistics
import subprocess
import sys

import typer

from acklab.base.paths import PROJECT_ROOT

PROBE = """
import importlib.util, pathlib, time
import airflow.sdk
started = time.perf_counter()
for path in sorted(pathlib.Path({dags!r}).glob("*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(time.perf_counter() - started)
"""


def main(interpreters: int = typer.Option(5, help="fresh interpreters to measure in")) -> None:
    probe = PROBE.format(dags=str(PROJECT_ROOT / "dags"))
    times = []
    for _ in range(interpreters):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    print("parse seconds per interpreter: " + ", ".join(f"{t:.3f}" for t in times))
    print(f"dag parse seconds: {statistics.median(times):.3f}")


if __name__ == "__main__":
    typer.run(main)
