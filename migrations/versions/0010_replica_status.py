"""replica status

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'replica_status',
        sa.Column('job_id', sa.UUID(), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('task', sa.String(length=63), nullable=False),
        sa.Column('replica', sa.Integer(), nullable=False),
        sa.Column('attempt', sa.Integer(), server_default='1', nullable=False),
        sa.Column('pod', sa.String(length=253), nullable=False),
        sa.Column('node', sa.String(length=253), server_default='', nullable=False),
        sa.Column('phase', sa.String(length=16), nullable=False),
        sa.Column('exit_code', sa.Integer(), nullable=True),
        sa.Column('reason', sa.String(length=63), server_default='', nullable=False),
        sa.Column('restarts', sa.Integer(), server_default='0', nullable=False),
        sa.Column('message', sa.Text(), server_default='', nullable=False),
        sa.Column('last', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            'updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ['job_id'], ['jobs.id'], name='fk_replica_status_job_id', ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('job_id', 'epoch', 'task', 'replica', name='pk_replica_status'),
    )


def downgrade() -> None:
    op.drop_table('replica_status')
