"""cluster reachability: what the agent says of its own kube-apiserver

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 05:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL: the agent reaches its apiserver; else why not, and since when
    op.add_column('clusters', sa.Column('apiserver_problem', sa.String(length=512), nullable=True))
    op.add_column('clusters', sa.Column('unreachable_since', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column('clusters', 'unreachable_since')
    op.drop_column('clusters', 'apiserver_problem')
