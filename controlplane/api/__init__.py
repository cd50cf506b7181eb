"""The REST API under /api/v1/: serializers, views, urls, permissions, throttling, errors."""
