"""A hook module that fails on import, as a plugin with a missing dependency would."""

raise RuntimeError("aworld_train_broken always fails to import")
