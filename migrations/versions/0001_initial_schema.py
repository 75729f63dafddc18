"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30 00:23:38.516985
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(sa.schema.CreateSequence(sa.Sequence("placement_revision_seq")))
    op.create_table('clusters',
    sa.Column('id', sa.UUID(), server_default=sa.text('gen_random_uuid()'), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('region', sa.String(length=63), server_default='', nullable=False),
    sa.Column('zone', sa.String(length=63), server_default='', nullable=False),
    sa.Column('labels', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('state', sa.String(length=16), server_default='Pending', nullable=False),
    sa.Column('cordoned', sa.Boolean(), server_default='false', nullable=False),
    sa.Column('draining', sa.Boolean(), server_default='false', nullable=False),
    sa.Column('kubernetes_version', sa.String(length=64), server_default='', nullable=False),
    sa.Column('agent_version', sa.String(length=64), server_default='', nullable=False),
    sa.Column('last_heartbeat', sa.DateTime(timezone=True), nullable=True),
    sa.Column('inventory_generation', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('version', sa.Integer(), server_default='1', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_clusters')),
    sa.UniqueConstraint('name', name=op.f('uq_clusters_name'))
    )
    op.create_table('priority_classes',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('value', sa.Integer(), nullable=False),
    sa.Column('preemptible_default', sa.Boolean(), server_default='false', nullable=False),
    sa.Column('description', sa.Text(), server_default='', nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_priority_classes'))
    )
    op.create_table('tenants',
    sa.Column('id', sa.UUID(), server_default=sa.text('gen_random_uuid()'), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('display_name', sa.String(length=256), server_default='', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tenants')),
    sa.UniqueConstraint('name', name=op.f('uq_tenants_name'))
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.UUID(), server_default=sa.text('gen_random_uuid()'), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('tenant_id', sa.UUID(), nullable=True),
    sa.Column('cluster_id', sa.UUID(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("role <> 'agent' OR cluster_id IS NOT NULL", name=op.f('ck_api_tokens_agent_has_cluster')),
    sa.CheckConstraint("role <> 'member' OR tenant_id IS NOT NULL", name=op.f('ck_api_tokens_member_has_tenant')),
    sa.CheckConstraint("role IN ('admin', 'member', 'viewer', 'agent')", name=op.f('ck_api_tokens_role_known')),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_api_tokens_cluster_id'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_api_tokens_tenant_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_table('nodes',
    sa.Column('cluster_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=253), nullable=False),
    sa.Column('labels', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('taints', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('ready', sa.Boolean(), server_default='true', nullable=False),
    sa.Column('unschedulable', sa.Boolean(), server_default='false', nullable=False),
    sa.Column('cpu_milli', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('cpu_milli_used', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('memory_mib', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('memory_mib_used', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('pods', sa.Integer(), server_default='110', nullable=False),
    sa.Column('pods_used', sa.Integer(), server_default='0', nullable=False),
    sa.Column('generation', sa.BigInteger(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_nodes_cluster_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('cluster_id', 'name', name=op.f('pk_nodes'))
    )
    op.create_table('queues',
    sa.Column('id', sa.UUID(), server_default=sa.text('gen_random_uuid()'), nullable=False),
    sa.Column('tenant_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('cohort', sa.String(length=63), nullable=True),
    sa.Column('weight', sa.Float(), server_default='1', nullable=False),
    sa.Column('quota', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('version', sa.Integer(), server_default='1', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_queues_tenant_id'), ondelete='RESTRICT'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_queues')),
    sa.UniqueConstraint('tenant_id', 'name', name=op.f('uq_queues_tenant_id'))
    )
    op.create_table('devices',
    sa.Column('cluster_id', sa.UUID(), nullable=False),
    sa.Column('node_name', sa.String(length=253), nullable=False),
    sa.Column('flavor', sa.String(length=128), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('memory_mib', sa.BigInteger(), nullable=False),
    sa.Column('healthy', sa.Boolean(), server_default='true', nullable=False),
    sa.Column('used_milli', sa.Integer(), server_default='0', nullable=False),
    sa.Column('used_memory_mib', sa.BigInteger(), server_default='0', nullable=False),
    sa.CheckConstraint('used_milli BETWEEN 0 AND 1000', name=op.f('ck_devices_used_milli_range')),
    sa.ForeignKeyConstraint(['cluster_id', 'node_name'], ['nodes.cluster_id', 'nodes.name'], name=op.f('fk_devices_cluster_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('cluster_id', 'node_name', 'flavor', 'index', name=op.f('pk_devices'))
    )
    op.create_table('jobs',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('seq', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('tenant_id', sa.UUID(), nullable=False),
    sa.Column('queue_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('labels', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('spec', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('priority_class', sa.String(length=63), nullable=False),
    sa.Column('preemptible', sa.Boolean(), nullable=False),
    sa.Column('reason', sa.Text(), server_default='', nullable=False),
    sa.Column('pending_reasons', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('cluster_id', sa.UUID(), nullable=True),
    sa.Column('epoch', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('idempotency_key', sa.String(length=128), nullable=True),
    sa.Column('request_hash', sa.String(length=64), nullable=True),
    sa.Column('version', sa.Integer(), server_default='1', nullable=False),
    sa.Column('queued_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_jobs_cluster_id'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['queue_id'], ['queues.id'], name=op.f('fk_jobs_queue_id'), ondelete='RESTRICT'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_jobs_tenant_id'), ondelete='RESTRICT'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('seq', name=op.f('uq_jobs_seq')),
    sa.UniqueConstraint('tenant_id', 'idempotency_key', name=op.f('uq_jobs_tenant_id'))
    )
    op.create_index('ix_jobs_state_priority', 'jobs', ['state', 'priority'], unique=False)
    op.create_index('ix_jobs_tenant_seq', 'jobs', ['tenant_id', 'seq'], unique=False)
    op.create_table('events',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_id', sa.UUID(), nullable=True),
    sa.Column('cluster_id', sa.UUID(), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.String(length=63), nullable=False),
    sa.Column('message', sa.Text(), server_default='', nullable=False),
    sa.Column('data', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_events_cluster_id'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_events_job_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    op.create_index('ix_events_job_id', 'events', ['job_id', 'id'], unique=False)
    op.create_table('placements',
    sa.Column('job_id', sa.UUID(), nullable=False),
    sa.Column('epoch', sa.BigInteger(), nullable=False),
    sa.Column('cluster_id', sa.UUID(), nullable=False),
    sa.Column('assignment', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('state', sa.String(length=16), server_default='Active', nullable=False),
    sa.Column('revision', sa.BigInteger(), server_default=sa.text("nextval('placement_revision_seq')"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('released_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_placements_cluster_id'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_placements_job_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'epoch', name=op.f('pk_placements'))
    )
    op.create_index('ix_placements_cluster_revision', 'placements', ['cluster_id', 'revision'], unique=False)
    op.create_table('tasks',
    sa.Column('job_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('replicas', sa.Integer(), nullable=False),
    sa.Column('spec', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('flavor', sa.String(length=128), nullable=True),
    sa.Column('running', sa.Integer(), server_default='0', nullable=False),
    sa.Column('succeeded', sa.Integer(), server_default='0', nullable=False),
    sa.Column('failed', sa.Integer(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_tasks_job_id'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'name', name=op.f('pk_tasks'))
    )

    priority = sa.table(
        "priority_classes",
        sa.column("name", sa.String),
        sa.column("value", sa.Integer),
        sa.column("preemptible_default", sa.Boolean),
        sa.column("description", sa.Text),
    )
    op.bulk_insert(
        priority,
        [
            {"name": "critical", "value": 1000, "preemptible_default": False,
             "description": "urgent production work; preempts everything below"},
            {"name": "high", "value": 100, "preemptible_default": False,
             "description": "important work"},
            {"name": "normal", "value": 0, "preemptible_default": False,
             "description": "the default"},
            {"name": "low", "value": -100, "preemptible_default": True,
             "description": "batch work that yields when needed"},
            {"name": "best-effort", "value": -1000, "preemptible_default": True,
             "description": "fills idle capacity; first to be preempted"},
        ],
    )

def downgrade() -> None:
    op.drop_table('tasks')
    op.drop_index('ix_placements_cluster_revision', table_name='placements')
    op.drop_table('placements')
    op.drop_index('ix_events_job_id', table_name='events')
    op.drop_table('events')
    op.drop_index('ix_jobs_tenant_seq', table_name='jobs')
    op.drop_index('ix_jobs_state_priority', table_name='jobs')
    op.drop_table('jobs')
    op.drop_table('devices')
    op.drop_table('queues')
    op.drop_table('nodes')
    op.drop_table('api_tokens')
    op.drop_table('tenants')
    op.drop_table('priority_classes')
    op.drop_table('clusters')
    op.execute(sa.schema.DropSequence(sa.Sequence("placement_revision_seq")))
