"""compiled jobs; re-placement back-off

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 04:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Jobs submitted before this revision have no compiled form: `suanpan-hub migrate`
    # compiles them against the catalog after the schema change.
    op.add_column('jobs', sa.Column('compiled', postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column('jobs', sa.Column('placement_failures', sa.Integer(), server_default='0', nullable=False))
    op.add_column('jobs', sa.Column('not_before', sa.DateTime(timezone=True), nullable=True))
    op.drop_column('tasks', 'spec')


def downgrade() -> None:
    op.add_column('tasks', sa.Column('spec', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False))
    op.drop_column('jobs', 'not_before')
    op.drop_column('jobs', 'placement_failures')
    op.drop_column('jobs', 'compiled')
