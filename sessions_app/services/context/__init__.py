"""What the model sees now: the runtime context, its cache and its text forms."""
