"""AWS Lambda entry points: `aws_lambda.http`, `aws_lambda.worker`, `aws_lambda.aggregator`.

Thin on purpose, as functions/main.py is: the handlers live in `fanfuse.fronts.aws_lambda.front`,
over the very targets the Cloud Functions run. Every function is deployed with FANFUSE_CLOUD=aws
(its service then runs on DynamoDB and SQS); infra/aws/lambda.tf names these handlers. On Lambda
every file is written under /tmp (`front.use_scratch`, before any handler runs).
"""

from __future__ import annotations

from fanfuse.fronts.aws_lambda import front
from fanfuse.runtimes import cloud
from fanfuse.support.logs import install_json_logging
from fanfuse.support.redact import install_log_redaction
from fanfuse.tracing import setup as tracing

front.use_scratch()  # the caches under /tmp: the only writable place on Lambda

if cloud.settings().cloud != "aws":
    raise RuntimeError("the Lambda handlers run on DynamoDB and SQS: set FANFUSE_CLOUD=aws")

install_log_redaction()  # no log record of these processes shows a secret
install_json_logging(cloud.settings().project)
tracing.configure()  # on when OTEL_* says so (fanfuse/tracing/setup.py)

http = front.http
"""Function URL / API Gateway HTTP API: the three public calls and the OpenAPI document."""
worker = front.worker
"""SQS event source mapping of each platform's queue: run that platform once."""
aggregator = front.aggregator
"""SQS event source mapping of the aggregate queue: finalize the search, exactly once."""
