"""Test-only engine distribution that claims an engine name another distribution claims."""
