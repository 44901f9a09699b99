"""Alembic's entry for acklab's history tables: migrates on the connection `acklab.store.history`
passes in `config.attributes["connection"]`, recording its revision in its own version table."""

from alembic import context

from acklab.store.history import METADATA, VERSION_TABLE, ours

context.configure(
    connection=context.config.attributes["connection"], target_metadata=METADATA, version_table=VERSION_TABLE, include_name=ours,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
