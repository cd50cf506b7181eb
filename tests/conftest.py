"""Suite-wide fixtures. The Django tests run against the real PostgreSQL that `make test` starts."""
