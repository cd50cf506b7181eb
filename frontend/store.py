"""The shared store the pages keep their reads in: controlplane/shared_store.py, where the
control plane's services (the ETA record the job page and the API's explain both read) find it
too. One store, one home; the pages import it from here as they did."""

from __future__ import annotations

from controlplane.shared_store import Store, shared_store

__all__ = ["Store", "shared_store"]
