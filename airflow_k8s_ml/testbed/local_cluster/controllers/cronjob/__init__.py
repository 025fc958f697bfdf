"""batch/v1 CronJob: admission, the controller's schedule arithmetic over the shared grammar, the sync and
the Jobs it creates."""
