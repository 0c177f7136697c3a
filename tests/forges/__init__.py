"""Forges for the tests: status API servers and webhook deliveries."""
