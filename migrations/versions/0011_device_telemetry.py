"""device telemetry

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-03 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('clusters', sa.Column('telemetry_at', sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        'device_telemetry',
        sa.Column('cluster_id', sa.UUID(), nullable=False),
        sa.Column('node_name', sa.String(length=253), nullable=False),
        sa.Column('flavor', sa.String(length=128), nullable=False),
        sa.Column('index', sa.Integer(), nullable=False),
        sa.Column('utilization', sa.Float(), nullable=True),
        sa.Column('memory_used_mib', sa.BigInteger(), nullable=True),
        sa.Column('memory_total_mib', sa.BigInteger(), nullable=True),
        sa.Column('temperature_c', sa.Float(), nullable=True),
        sa.Column('fault', sa.String(length=256), server_default='', nullable=False),
        sa.Column(
            'reported_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ['cluster_id'],
            ['clusters.id'],
            name='fk_device_telemetry_cluster_id',
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint(
            'cluster_id', 'node_name', 'flavor', 'index', name='pk_device_telemetry'
        ),
    )


def downgrade() -> None:
    op.drop_table('device_telemetry')
    op.drop_column('clusters', 'telemetry_at')
