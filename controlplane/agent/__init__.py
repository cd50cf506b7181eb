"""The node agent, `qm-agent`: one per GPU node (or N simulated nodes in one process).

It registers its node, heartbeats to keep its lease, runs the node's desired allocations as
real processes (or simulated ones), refuses stale generations, stops its own work when it
cannot renew its lease, and reports starts, exits, progress and device activity. It imports
nothing from Django: it talks to the control plane over HTTP only (controlplane/api/agent.py).
"""
