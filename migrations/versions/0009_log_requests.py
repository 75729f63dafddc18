"""log requests

Revision ID: 0009
Revises: 0005
Create Date: 2026-12-02 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'log_requests',
        sa.Column('id', postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column('cluster_id', sa.UUID(), nullable=False),
        sa.Column('job_id', sa.UUID(), nullable=False),
        sa.Column('request', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column('state', sa.String(length=16), server_default='Pending', nullable=False),
        sa.Column(
            'created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ['cluster_id'], ['clusters.id'], name='fk_log_requests_cluster_id', ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['job_id'], ['jobs.id'], name='fk_log_requests_job_id', ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name='pk_log_requests'),
    )
    op.create_index(
        'ix_log_requests_cluster_id', 'log_requests', ['cluster_id', 'state'], unique=False
    )


def downgrade() -> None:
    op.drop_index('ix_log_requests_cluster_id', table_name='log_requests')
    op.drop_table('log_requests')
