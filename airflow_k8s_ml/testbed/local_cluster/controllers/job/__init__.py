"""batch/v1 Job: admission and validation, the sync (pods, failures, indexes, conditions) and
TTL-after-finished."""
