"""allocation history

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 05:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'allocation_history',
        sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('cluster', sa.String(length=63), nullable=False),
        sa.Column('flavor', sa.String(length=128), nullable=False),
        sa.Column('total', sa.Integer(), nullable=False),
        sa.Column('healthy', sa.Integer(), nullable=False),
        sa.Column('allocated_milli', sa.BigInteger(), nullable=False),
    )
    op.create_index('ix_allocation_history_taken_at', 'allocation_history', ['taken_at'])


def downgrade() -> None:
    op.drop_index('ix_allocation_history_taken_at', table_name='allocation_history')
    op.drop_table('allocation_history')
