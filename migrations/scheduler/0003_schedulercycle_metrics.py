from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0002_clusterbackendstatus_groupdispatch'),
    ]

    operations = [
        migrations.AddField(
            model_name='schedulercycle',
            name='metrics',
            field=models.JSONField(blank=True, default=dict, help_text="OSMO_PLACEMENT=osmo: the cycle's timings and API calls"),
        ),
    ]
