"""Repository tools: scripts run by hand or by tests, not part of the installed package."""
