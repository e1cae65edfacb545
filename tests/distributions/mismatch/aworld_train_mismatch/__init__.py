"""Test-only engine distribution whose hook implementation breaks the spec."""
