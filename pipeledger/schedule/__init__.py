"""When nodes run unattended: cron schedules (:mod:`.cron`), which intervals are due
(:mod:`.due`), and the long-running loop of ``pipeledger serve`` (:mod:`.serve`)."""
