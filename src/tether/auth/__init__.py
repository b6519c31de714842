"""API keys, principals and scopes."""

from tether.auth.keys import ALL_SCOPES, KeyVerifier, create_key, parse_scopes

__all__ = ["ALL_SCOPES", "KeyVerifier", "create_key", "parse_scopes"]
