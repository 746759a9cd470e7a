# The name search's trigram index. pg_trgm ships with PostgreSQL (the embedded server's and
# Debian's `postgresql` package) and is a trusted extension: the database's owner creates it.
# No pending list (fastupdate off): a workflow's name is in the index once it is committed, so
# a search never scans a backlog of recent names (one row an admission: a small cost).

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0013_group_backend_moved_at'),
    ]

    operations = [
        TrigramExtension(),
        # Written out: Django 5.2 puts the operator class inside the expression's parentheses
        # (`((UPPER(name) gin_trgm_ops))`), which PostgreSQL refuses.
        migrations.RunSQL(
            'CREATE INDEX "workflow_name_trgm" ON "workflows_workflow" '
            'USING gin ((UPPER("name")) gin_trgm_ops) WITH (fastupdate = off)',
            'DROP INDEX "workflow_name_trgm"',
            state_operations=[migrations.AddIndex(
                model_name='workflow',
                index=django.contrib.postgres.indexes.GinIndex(
                    django.contrib.postgres.indexes.OpClass(
                        django.db.models.functions.text.Upper('name'), name='gin_trgm_ops'),
                    name='workflow_name_trgm', fastupdate=False),
            )],
        ),
    ]
