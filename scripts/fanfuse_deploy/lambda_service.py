"""The Lambda service's part of a deployment, stood in for one function (moto runs no Lambda code).

    python lambda_service.py --handler aws_lambda.worker --mappings '[...]' [--http-port N]

Run by the rehearsal with the runtime's bare interpreter, the unzipped artifact as its only path
(Lambda's /var/task) and, as its environment, exactly the variables the created function has
(read back from Lambda after the apply), plus only what aims it at moto. It then does what Lambda
does for that function:

- imports the handler its configuration names (`Handler`), once, as a cold start does;
- with --http-port: turns each HTTP request into the event API Gateway's HTTP API sends (payload
  format 2.0) and answers with the handler's `{statusCode, headers, body}`;
- for each event source mapping of the function, as created (queue ARN, batch size, maximum
  concurrency), long-polls that queue with as many pollers, invokes the handler with the records
  and deletes what it did not report in `batchItemFailures`: the very loop of
  `fanfuse.fronts.aws_lambda.local` (`Dispatcher.poll_once`), so nothing is written twice.

A development tool of the rehearsal: it is not in the artifact, and imports from the artifact only
what the Lambda handlers' local front already has.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import threading
from typing import Any


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lambda_service.py")
    parser.add_argument("--handler", required=True, help="module.function, as Lambda's Handler")
    parser.add_argument("--mappings", default="[]", help="JSON list of {arn, url, batch, pollers}")
    parser.add_argument("--http-port", type=int)
    args = parser.parse_args(argv)

    module_name, _, function_name = args.handler.rpartition(".")
    handler = getattr(importlib.import_module(module_name), function_name)

    from werkzeug.serving import make_server
    from werkzeug.wrappers import Request, Response

    from fanfuse.fronts.aws_lambda.local import Dispatcher, answer_of, function_url_event
    from fanfuse.net.aws_clients import sqs_client
    from fanfuse.runtimes import cloud

    settings = cloud.settings()
    client = sqs_client(settings, read_timeout=15)
    dispatcher = Dispatcher(client, settings, [], None)
    mappings: list[dict[str, Any]] = json.loads(args.mappings)
    for mapping in mappings:
        if mapping["batch"] != 1:
            raise SystemExit(f"batch size {mapping['batch']}: this stand-in invokes one record")
        for i in range(int(mapping["pollers"])):
            thread = threading.Thread(
                target=dispatcher.poll,
                args=(mapping["arn"], mapping["url"], mapping["arn"], handler),
                name=f"poll-{mapping['arn'].rsplit(':', 1)[-1]}-{i}",
                daemon=True,
            )
            thread.start()
            dispatcher.threads.append(thread)

    @Request.application  # type: ignore[arg-type]
    def front(request: Request) -> Response:
        return answer_of(handler(function_url_event(request), None))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    server = None
    if args.http_port is not None:
        server = make_server("127.0.0.1", args.http_port, front, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"ready: {args.handler}, {len(mappings)} mappings", flush=True)
    stop.wait()
    dispatcher.stop()
    if server is not None:
        server.shutdown()


if __name__ == "__main__":
    main()
