"""The local cloud stack: Firestore emulator, Cloud Tasks emulator and the functions, on 127.0.0.1.

Used by `fanfuse dev` and by the pytest session fixtures, so both run the very same processes.
One module per kind of thing: `processes` (children that always stop, bounded waits, loopback
helpers), `firestore`, `cloud_tasks` (with the launcher's server, run by `__main__`),
`functions`, and `stack`, which starts them together and wires them to each other; `aws`, the
AWS stack (moto's server from `moto_app`, the Lambda handlers' local process); `lifetime`, how
either stack starts and stops (watchdog, signals).

Only the standard library, pydantic (the queue port's naming and the settings) and these modules
are imported here; the Google clients are imported when a Cloud Tasks emulator is actually
started.
"""

from fanfuse.devstack.aws import AwsAddresses, AwsStack
from fanfuse.devstack.cloud_tasks import (
    CloudTasksEmulator,
    queue_path,
    serve_tasks_emulator,
    tasks_client,
)
from fanfuse.devstack.firestore import FirestoreEmulator
from fanfuse.devstack.functions import DEFAULT_FUNCTIONS_SOURCE, FUNCTION_TARGETS, FunctionProcess
from fanfuse.devstack.processes import (
    DEFAULT_LOCATION,
    DEFAULT_PROJECT,
    LOOPBACK,
    ManagedProcess,
    free_port,
    http_request,
    tcp_open,
    wait_until,
)
from fanfuse.devstack.stack import LocalStack, StackAddresses, queue_id
from fanfuse.queue.base import AGGREGATE_QUEUE

__all__ = [
    "AGGREGATE_QUEUE",
    "DEFAULT_FUNCTIONS_SOURCE",
    "DEFAULT_LOCATION",
    "DEFAULT_PROJECT",
    "FUNCTION_TARGETS",
    "LOOPBACK",
    "AwsAddresses",
    "AwsStack",
    "CloudTasksEmulator",
    "FirestoreEmulator",
    "FunctionProcess",
    "LocalStack",
    "ManagedProcess",
    "StackAddresses",
    "free_port",
    "http_request",
    "queue_id",
    "queue_path",
    "serve_tasks_emulator",
    "tasks_client",
    "tcp_open",
    "wait_until",
]
