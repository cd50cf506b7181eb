"""Server-rendered pages, one module per page. They present what the control plane stored and
send every change through the REST API or a service; they decide nothing."""
