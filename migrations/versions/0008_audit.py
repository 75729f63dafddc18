"""audit log

Revision ID: 0008
Revises: 0005
Create Date: 2026-12-02 11:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'audit_log',
        sa.Column('id', sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor', sa.String(length=128), nullable=True),
        sa.Column('role', sa.String(length=16), nullable=True),
        sa.Column('tenant_id', postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column('tenant', sa.String(length=63), nullable=True),
        sa.Column('action', sa.String(length=96), nullable=False),
        sa.Column('object', sa.String(length=256), nullable=True),
        sa.Column('request_id', sa.String(length=128), nullable=False),
        sa.Column('source', sa.String(length=64), nullable=False),
        sa.Column('status', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_log')),
    )
    op.create_index('ix_audit_log_at', 'audit_log', ['at'])
    op.create_index('ix_audit_log_tenant_id', 'audit_log', ['tenant_id', 'id'])


def downgrade() -> None:
    op.drop_index('ix_audit_log_tenant_id', table_name='audit_log')
    op.drop_index('ix_audit_log_at', table_name='audit_log')
    op.drop_table('audit_log')
