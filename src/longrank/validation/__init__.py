"""A config checked whole: the JSON schema with messages that name the key, defaults filled in, and the checks the
schema cannot make (against the data, the first stages, the measures). Torch-free: the workflow's parse runs it."""
