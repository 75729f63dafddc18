"""token expiry and rotation

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-02 11:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('api_tokens', sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        'api_tokens',
        sa.Column('rotated_from', postgresql.UUID(as_uuid=True), nullable=True),
    )
    op.create_foreign_key(
        'fk_api_tokens_rotated_from', 'api_tokens', 'api_tokens', ['rotated_from'], ['id'],
        ondelete='SET NULL',
    )


def downgrade() -> None:
    op.drop_constraint('fk_api_tokens_rotated_from', 'api_tokens', type_='foreignkey')
    op.drop_column('api_tokens', 'rotated_from')
    op.drop_column('api_tokens', 'expires_at')
