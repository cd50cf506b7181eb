FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir . && python manage.py collectstatic --noinput
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
