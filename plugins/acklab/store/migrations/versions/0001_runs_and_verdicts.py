"""The history's runs and their verdicts; a SQLite history written before Alembic is taken over.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "acklab_runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("finished", sa.Float, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("topology", sa.String(200), nullable=False),
        sa.Column("kafka_version", sa.String(50), nullable=False),
        sa.Column("client_version", sa.String(100), nullable=False, server_default=""),
        sa.Column("dag_id", sa.String(250)),
        sa.Column("dag_run_id", sa.String(250)),
        sa.Column("report", sa.Text),
    )
    op.create_table(
        "acklab_verdicts",
        sa.Column("run_id", sa.String(200), sa.ForeignKey("acklab_runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("scenario", sa.String(250), primary_key=True),
        sa.Column("profile", sa.String(100), nullable=False),
        sa.Column("fault", sa.String(100), nullable=False),
        sa.Column("guarantee", sa.String(100), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("row_json", sa.Text, nullable=False),
    )
    _take_over_pre_alembic_sqlite()


def _take_over_pre_alembic_sqlite() -> None:
    """Copy a SQLite history of the tables `runs` and `verdicts` (acklab before Alembic) and drop them."""
    bind = op.get_bind()
    tables = set(sa.inspect(bind).get_table_names())
    if bind.dialect.name != "sqlite" or not {"runs", "verdicts"} <= tables:
        return
    client = "client_version" if "client_version" in {c["name"] for c in sa.inspect(bind).get_columns("runs")} else "''"
    op.execute(
        "INSERT INTO acklab_runs (run_id, finished, status, topology, kafka_version, client_version) "
        f"SELECT run_id, finished, status, topology, kafka_version, {client} FROM runs"
    )
    op.execute(
        "INSERT INTO acklab_verdicts (run_id, scenario, profile, fault, guarantee, status, row_json) "
        "SELECT run_id, scenario, profile, fault, guarantee, status, row_json FROM verdicts"
    )
    op.drop_table("verdicts")
    op.drop_table("runs")


def downgrade() -> None:
    op.drop_table("acklab_verdicts")
    op.drop_table("acklab_runs")
