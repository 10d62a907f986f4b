"""The run ledger: the writer (:mod:`.ledger`), a run and its tasks (:mod:`.run`), the
cancel mailbox, the tables and their migrations, roll-ups, the watchdog, and the questions
(:mod:`.reads`)."""
