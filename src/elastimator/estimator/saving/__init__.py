"""What outlives a process: checkpoints (where to resume, which files, whether they are whole) and SavedModels."""
