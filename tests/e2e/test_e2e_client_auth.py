"""The AWS calling model against the AWS stack's Lambda front (moto,
`fanfuse.fronts.aws_lambda.local`): behind an IAM-authorized API Gateway a backend signs each
request with SigV4, and may send an API key; the gateway checks the signature
(tests/unit/auth/test_outbound_auth.py recomputes it as the gateway does), the function the key.
Here the front gets exactly those requests (Authorization: AWS4-HMAC-SHA256 ..., X-Api-Key) and runs
the search for the key's owner. No gateway stands in front of the local stack, so its events
carry no verified IAM principal: a signature alone names no caller there, and is 401. Deployed
with `api_access = "iam"`, the principal API Gateway verified is the caller
(tests/aws/test_aws_front.py, with the events the gateway sends)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from fanfuse.auth.outbound import AuthMode, ClientAuth
from fanfuse.http.client import HttpSearchClient
from fanfuse.wire.errors import ApiError
from tests.support.e2e.aws import AwsCloud

REQUEST = {"query": "laser", "platform": "docs", "max_results": 2}


async def test_a_sigv4_signed_request_with_an_api_key_runs_for_the_keys_owner(
    e2e_aws: AwsCloud,
) -> None:
    key = e2e_aws.addresses.api_key
    assert key is not None
    url = e2e_aws.url("start_search")
    auth = ClientAuth(mode=AuthMode.SIGV4, api_key=SecretStr(key), aws_region="us-east-1")
    view = await HttpSearchClient(url, poll=0.05, auth=auth.build(url)).search(REQUEST)
    assert view.status.value == "completed" and view.results
    assert view.owner is not None and view.owner.endswith("local")


async def test_a_signature_alone_is_no_caller_to_the_function(e2e_aws: AwsCloud) -> None:
    url = e2e_aws.url("start_search")
    auth = ClientAuth(mode=AuthMode.SIGV4, aws_region="us-east-1").build(url)
    with pytest.raises(ApiError) as refused:
        await HttpSearchClient(url, auth=auth).start(REQUEST)
    assert refused.value.status_code == 401
