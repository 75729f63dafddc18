"""cluster registration: bootstrap tokens, per-cluster credentials, acceptance

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 11:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        'clusters', sa.Column('accepted', sa.Boolean(), server_default='false', nullable=False)
    )
    # clusters registered before acceptance existed were all set up by an administrator
    op.execute('UPDATE clusters SET accepted = true')
    for table in ('bootstrap_tokens', 'cluster_credentials'):
        op.create_table(
            table,
            sa.Column(
                'id',
                postgresql.UUID(as_uuid=True),
                server_default=sa.text('gen_random_uuid()'),
                nullable=False,
            ),
            sa.Column('cluster_id', postgresql.UUID(as_uuid=True), nullable=False),
            sa.Column('token_hash', sa.String(length=64), nullable=False),
            sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
            sa.Column(
                'used_at' if table == 'bootstrap_tokens' else 'revoked_at',
                sa.DateTime(timezone=True),
                nullable=True,
            ),
            sa.Column(
                'created_at',
                sa.DateTime(timezone=True),
                server_default=sa.text('now()'),
                nullable=False,
            ),
            sa.ForeignKeyConstraint(
                ['cluster_id'],
                ['clusters.id'],
                name=f'fk_{table}_cluster_id',
                ondelete='CASCADE',
            ),
            sa.PrimaryKeyConstraint('id', name=f'pk_{table}'),
            sa.UniqueConstraint('token_hash', name=f'uq_{table}_token_hash'),
        )
    op.create_index(
        'ix_cluster_credentials_cluster_id', 'cluster_credentials', ['cluster_id']
    )


def downgrade() -> None:
    op.drop_index('ix_cluster_credentials_cluster_id', table_name='cluster_credentials')
    op.drop_table('cluster_credentials')
    op.drop_table('bootstrap_tokens')
    op.drop_column('clusters', 'accepted')
