"""Test-only extension plugin (entry-point group ``aworld_train.plugins``)."""
