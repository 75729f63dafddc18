"""services

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'services',
        sa.Column('id', sa.UUID(), nullable=False),
        sa.Column('seq', sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column('tenant_id', sa.UUID(), nullable=False),
        sa.Column('queue_id', sa.UUID(), nullable=False),
        sa.Column('name', sa.String(length=63), nullable=False),
        sa.Column(
            'labels', postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column('spec', postgresql.JSONB(), nullable=False),
        sa.Column('compiled', postgresql.JSONB(), nullable=False),
        sa.Column('priority', sa.Integer(), nullable=False),
        sa.Column('priority_class', sa.String(length=63), nullable=False),
        sa.Column('preemptible', sa.Boolean(), nullable=False),
        sa.Column('state', sa.String(length=16), server_default='Active', nullable=False),
        sa.Column('desired', sa.Integer(), nullable=False),
        sa.Column('generation', sa.Integer(), server_default='1', nullable=False),
        sa.Column('idempotency_key', sa.String(length=128), nullable=True),
        sa.Column('request_hash', sa.String(length=64), nullable=True),
        sa.Column('version', sa.Integer(), server_default='1', nullable=False),
        sa.Column(
            'updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            'created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ['tenant_id'], ['tenants.id'], name='fk_services_tenant_id', ondelete='RESTRICT'
        ),
        sa.ForeignKeyConstraint(
            ['queue_id'], ['queues.id'], name='fk_services_queue_id', ondelete='RESTRICT'
        ),
        sa.PrimaryKeyConstraint('id', name='pk_services'),
        sa.UniqueConstraint('seq', name='uq_services_seq'),
        sa.UniqueConstraint('tenant_id', 'idempotency_key', name='uq_services_tenant_id'),
    )
    op.create_index(
        'ux_services_tenant_name',
        'services',
        ['tenant_id', 'name'],
        unique=True,
        postgresql_where=sa.text('deleted_at IS NULL'),
    )
    op.add_column('jobs', sa.Column('service_id', sa.UUID(), nullable=True))
    op.add_column('jobs', sa.Column('replica_cap', sa.Integer(), nullable=True))
    op.create_foreign_key(
        'fk_jobs_service_id', 'jobs', 'services', ['service_id'], ['id'], ondelete='CASCADE'
    )
    op.create_index(
        'ix_jobs_service_id',
        'jobs',
        ['service_id'],
        postgresql_where=sa.text('service_id IS NOT NULL'),
    )
    op.add_column('events', sa.Column('service_id', sa.UUID(), nullable=True))
    op.create_foreign_key(
        'fk_events_service_id', 'events', 'services', ['service_id'], ['id'], ondelete='CASCADE'
    )
    op.create_index(
        'ix_events_service_id',
        'events',
        ['service_id', 'id'],
        postgresql_where=sa.text('service_id IS NOT NULL'),
    )
    op.create_table(
        'service_endpoints',
        sa.Column('job_id', sa.UUID(), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('cluster_id', sa.UUID(), nullable=False),
        sa.Column('address', sa.String(length=253), nullable=False),
        sa.Column('cluster_ip', sa.String(length=45), server_default='', nullable=False),
        sa.Column(
            'ports', postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
        sa.Column('ready', sa.Integer(), server_default='0', nullable=False),
        sa.Column('updated', sa.Integer(), server_default='0', nullable=False),
        sa.Column('generation', sa.Integer(), server_default='1', nullable=False),
        sa.Column('metric_sum', sa.Float(), nullable=True),
        sa.Column('sampled', sa.Integer(), server_default='0', nullable=False),
        sa.Column(
            'reported_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ['job_id'], ['jobs.id'], name='fk_service_endpoints_job_id', ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['cluster_id'],
            ['clusters.id'],
            name='fk_service_endpoints_cluster_id',
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('job_id', name='pk_service_endpoints'),
    )


def downgrade() -> None:
    op.drop_table('service_endpoints')
    op.drop_index('ix_events_service_id', table_name='events')
    op.drop_constraint('fk_events_service_id', 'events', type_='foreignkey')
    op.drop_column('events', 'service_id')
    op.drop_index('ix_jobs_service_id', table_name='jobs')
    op.drop_constraint('fk_jobs_service_id', 'jobs', type_='foreignkey')
    op.drop_column('jobs', 'replica_cap')
    op.drop_column('jobs', 'service_id')
    op.drop_index('ux_services_tenant_name', table_name='services')
    op.drop_table('services')
