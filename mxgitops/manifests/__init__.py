"""Manifests: YAML -> one model -> checks (schema, rules, policy, Pod Security)."""
