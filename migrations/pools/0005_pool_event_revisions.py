"""Pool events become the POOL config's revisions: the events there are numbered in the order
they were written, and described as the services describe new ones ("Pool created: team")."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("pools", "0004_backends"),
    ]

    operations = [
        migrations.AddField(
            model_name="poolevent",
            name="revision",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunSQL(
            "UPDATE pool_events SET revision = numbered.n FROM (SELECT id, row_number() OVER "
            "(ORDER BY at, id) AS n FROM pool_events) AS numbered "
            "WHERE pool_events.id = numbered.id",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name="poolevent",
            name="revision",
            field=models.PositiveIntegerField(unique=True),
        ),
        migrations.AddField(
            model_name="poolevent",
            name="description",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="poolevent",
            name="tags",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=63), blank=True, default=list,
                size=None),
        ),
        migrations.AddIndex(
            model_name="poolevent",
            index=models.Index(fields=["pool", "-revision"], name="pool_events_pool_revision"),
        ),
        migrations.AddConstraint(
            model_name="poolevent",
            constraint=models.CheckConstraint(condition=models.Q(revision__gte=1),
                                              name="pool_events_revision_1",
                                              violation_error_message="Revisions count from 1."),
        ),
        # Last: an index cannot be built while the rows' deferred checks are pending.
        migrations.RunSQL(
            "UPDATE pool_events SET description = upper(left(replace(action, '_', ' '), 1)) "
            "|| substr(replace(action, '_', ' '), 2) || ': ' || pools.name "
            "FROM pools WHERE pools.id = pool_events.pool_id",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
