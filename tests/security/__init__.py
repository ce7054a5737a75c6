"""The threat model's checks (SECURITY.md): tenants, credentials, repositories, Redis."""
