# One image for every production process (web, worker, beat, scheduler, backend agent); see docker-compose.yml.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY osmo osmo
COPY pools pools
COPY credentials credentials
COPY workflows workflows
COPY workflow_apps workflow_apps
COPY scheduler scheduler
COPY dashboard dashboard
COPY migrations migrations
COPY templates templates
COPY manage.py ./
# Editable: settings find templates/ and the app folders in /app, where the code lives.
RUN pip install --no-cache-dir -e . && SECRET_KEY=build DATABASE_URL=postgresql://build@localhost/build \
    python manage.py collectstatic --noinput
RUN useradd --system --uid 1000 osmo && chown -R osmo /app
USER osmo
EXPOSE 8000
CMD ["gunicorn", "osmo.wsgi:application", "--config", "python:osmo.gunicorn_config", "--bind", "0.0.0.0:8000"]
