"""The REST API (Django REST Framework): resources, exports, uploads, token auth and the OpenAPI schema."""
