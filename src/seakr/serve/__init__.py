"""Front doors over the public API: the HTTP service and the trace viewer (assets ship in the package)."""
