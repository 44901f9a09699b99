"""The Great Expectations project acklab validates with: a File Data Context whose JSON is committed
(``expectations/gx``), holding the suites of `acklab.checker.gx_suites`, one validation definition
and one checkpoint per suite, over a pandas datasource of matrix rows. Validation results and Data
Docs go to its ``uncommitted/`` directory, next to a page with the model's tables (``guarantees.html``).

Great Expectations is imported inside functions: importing it takes seconds, importing this
module should not.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from acklab.base.paths import expectations_dir
from acklab.checker.gx_suites import MODEL_PAGE, build_suites
from acklab.model.tables import default_tables, to_html

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite
    from great_expectations.data_context import FileDataContext

DATASOURCE = "acklab"
ASSET = "delivery_matrix_row"
BATCH_DEFINITION = "whole_row"
SITE = "local_site"
SITE_DIR = Path("uncommitted/data_docs/local_site")  # as in great_expectations.yml
logging.getLogger("great_expectations").setLevel(logging.WARNING)  # its import alone logs ~200 INFO lines, none of use


def data_docs_site() -> Path:
    """The folder of the local Data Docs site (of the GX project at `expectations_dir()`)."""
    return expectations_dir() / "gx" / SITE_DIR


def ensure_project(root: Path | None = None) -> FileDataContext:
    """Create or update the GX project under ``root/gx`` (default: ``expectations_dir()``).

    Idempotent: existing datasource, asset and batch definition are reused (their ids stay
    stable), suites, validation definitions and checkpoints are added or updated by name (and
    deleted when the model no longer has them), and expectations keep their ids while unchanged.
    Also writes the model page into the site.
    """
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=Path(root or expectations_dir()))
    # Metric progress bars would flood task logs with one bar per expectation run.
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.variables.save()
    try:
        datasource = context.data_sources.get(DATASOURCE)
    except KeyError:
        datasource = context.data_sources.add_pandas(DATASOURCE)
    try:
        asset = datasource.get_asset(ASSET)
    except LookupError:
        asset = datasource.add_dataframe_asset(ASSET)
    try:
        batch_definition = asset.get_batch_definition(BATCH_DEFINITION)
    except KeyError:
        batch_definition = asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)

    stored = {suite.name: suite for suite in context.suites.all()}
    suites = build_suites()
    for name in stored.keys() - {suite.name for suite in suites}:  # no longer in the model
        context.checkpoints.delete(name)
        context.validation_definitions.delete(name)
        context.suites.delete(name)
    for suite in suites:
        if suite.name in stored:
            _keep_expectation_ids(suite, stored[suite.name])
        suite = context.suites.add_or_update(suite)
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=suite)
        )
        # Every suite judges several rows at once: its failures must name their rows.
        by_row = {"result_format": "COMPLETE", "unexpected_index_column_names": ["scenario"]}
        context.checkpoints.add_or_update(
            gx.Checkpoint(name=suite.name, validation_definitions=[definition], result_format=by_row)
        )
    site = Path(context.root_directory) / SITE_DIR
    site.mkdir(parents=True, exist_ok=True)
    (site / MODEL_PAGE).write_text(to_html(default_tables()))
    return context


_CONTEXTS: dict[Path, FileDataContext] = {}


def project_context(root: Path) -> FileDataContext:
    """The context of ``root``, ensured once per process (the model does not change while it runs)."""
    key = Path(root).resolve()
    if key not in _CONTEXTS:
        _CONTEXTS[key] = ensure_project(root)
    return _CONTEXTS[key]


def _keep_expectation_ids(suite: ExpectationSuite, stored: ExpectationSuite) -> None:
    """Give each unchanged expectation of ``suite`` the id it has in ``stored``.

    ``suites.add_or_update`` means to do this, but in GX 1.24 expectation equality includes the
    id, so a suite built in code would get fresh ids (and a JSON diff) on every call.
    """
    for expectation in suite.expectations:
        for old in stored.expectations:
            if old == expectation.copy(update={"id": old.id}):
                expectation.id = old.id
                break



@contextmanager
def project_lock(root: Path) -> Iterator[None]:
    """Hold the exclusive lock of the GX project under `root` (an flock on `gx/uncommitted/validation.lock`,
    so among the processes of one host): a validation rewrites the project's suites, validation
    definitions and checkpoints (`ensure_project`), its results and Data Docs, which a concurrent
    validation (the version DAG's pairs validated on two workers at once) would read half written."""
    path = root / "gx" / "uncommitted" / "validation.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
