"""Test-only engine distribution whose hook module cannot be imported."""
