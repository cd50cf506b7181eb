"""`qm`: the command line over the REST API (see docs/api.md, "The qm CLI")."""
