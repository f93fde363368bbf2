"""The Lambda front: the same service on DynamoDB and SQS, reached through Lambda events.

- `front.py`: the Lambda handlers, thin adapters from Lambda events to the very targets the
  Cloud Functions run (`fanfuse.fronts.functions`), so the HTTP rules, the delivery checks and
  the error mapping exist once; the store and queue are the cloud runtime's
  (`fanfuse.runtimes.aws`, chosen by `fanfuse.runtimes.cloud` when FANFUSE_CLOUD is `aws`);
- `local.py`: what `fanfuse dev --cloud aws` runs instead of Lambda (moto cannot run Lambda code
  without Docker): a local HTTP front that turns requests into function-URL events, and a
  dispatcher that long-polls the queues and invokes the handlers, as an event source mapping
  would.
"""
