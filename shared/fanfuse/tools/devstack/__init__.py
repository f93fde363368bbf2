"""The local cloud stack: Firestore emulator, Cloud Tasks emulator and the functions, on 127.0.0.1.

Used by `fanfuse dev` and by the pytest session fixtures, so both run the very same processes.
One module per kind of thing: `processes` (children that always stop, bounded waits, loopback
helpers), `firestore`, `cloud_tasks` (with the launcher's server, run by `__main__`),
`functions`, and `stack`, which starts them together and wires them to each other; `aws`, the
AWS stack (moto's server from `moto_app`, the Lambda handlers' local process); `lifetime`, how
either stack starts and stops (watchdog, signals).

This package imports nothing: import the module you need. The Google clients are imported when
a Cloud Tasks emulator is actually started.
"""
