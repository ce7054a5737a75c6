"""One router per resource, all under /api/v1 except the open probes (`ops`)."""
