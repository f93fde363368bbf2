"""`fanfuse bench latency`'s `aws` row: measured on the local AWS stack (moto, the handlers)."""

from __future__ import annotations

from fanfuse.tools.bench.latency import run_latency


def test_the_aws_row_is_measured_on_the_moto_stack(aws_env: None) -> None:
    report = run_latency([0.05, 0.2], runs=2, poll=0.02, stack=False, aws=True)
    assert [s.runtime for s in report.series] == ["embedded", "aws", "sequential"]
    aws = report.get("aws")
    assert aws is not None and len(aws.samples) == 2
    # Only the physical lower bound (no wall-clock comparison on a shared machine): every
    # search waited for its slowest platform, through DynamoDB, SQS and the handlers.
    assert min(aws.samples) >= 0.2
    assert "target aws <= 1.2x the limit" in report.render()
