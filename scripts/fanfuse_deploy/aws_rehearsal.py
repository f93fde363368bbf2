"""The AWS deployment rehearsed end to end: Terraform applies infra/aws to moto's server.

    scripts/deploy-rehearsal aws [VAR_FILE]

The operator's steps of docs/deploy.md, in its order and with its commands (RUNBOOK: the doc
test holds docs/deploy.md to these very strings), on this machine:

1. the state bucket and the provider secrets, made before the first init (with boto3's calls:
   the aws CLI is not installed here);
2. the Lambda zip, built and checked against Lambda's limits by the deploy's own script;
3. `terraform init` on the S3 backend (the state bucket, on moto), the bootstrap plan and apply of
   the artifacts bucket, the upload, then the saved plan and its apply: everything infra/aws
   declares, created by the AWS provider from the machine's mirror;
4. what the apply created, read back and checked (`verify`): the table, the queues and their
   dead-letter queues, the mappings, the functions and their environment, the roles and their
   policies, the log groups against the key's policy, the API (its CORS), the alarms;
5. the first key (`fanfuse keys create --dynamodb` against the created table); the corpus
   platforms' corpus (corpus.py's handbook), published with `fanfuse index --publish` into the
   bucket the apply created (output `corpus_urls`), as an operator would; then one Lambda
   stand-in per created function (lambda_service.py: the installed zip, the function's own
   environment as created, its handler, its mappings' queues and concurrency), a search through
   the HTTP front as an app makes it, one over the corpus platforms (each must find the
   handbook's page, from the published version), and a `vectors` worker's cold start from the
   installed zip with the worker's environment;
6. a second plan, which must find nothing to change;
7. the teardown: deletion protection lifted by a saved plan, then the destroy plan applied.

moto falls short of AWS here, and the rehearsal says so rather than pretend: it runs no Lambda
code (hence the stand-ins), API Gateway's routing, authorization and throttling are not in the
path (the stand-in of `http` answers the API's requests itself), and IAM policies are read back
and checked, not enforced (moto checks no DynamoDB resource). docs/deploy.md lists the rest.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fanfuse_deploy import corpus, limits, package, render
from fanfuse_deploy import terraform as tf

LAMBDA_SERVICE = Path(__file__).with_name("lambda_service.py")
STATE_KEY = "fanfuse.tfstate"
BOOTSTRAP_TARGETS = (
    "aws_s3_bucket.artifacts",
    "aws_s3_bucket_server_side_encryption_configuration.artifacts",
    "aws_s3_bucket_public_access_block.artifacts",
)
TEARDOWN_TARGETS = (
    "aws_dynamodb_table.fanfuse",
    "aws_s3_bucket.artifacts",
    "aws_s3_bucket.corpora",
)

_PLAN = "terraform -chdir=infra/aws plan -input=false -var-file=$VAR_FILE -var=lambda_s3_key=$KEY"
RUNBOOK: dict[str, str] = {
    "package": "scripts/package-functions aws build/lambda.zip infra/examples/aws.tfvars",
    "init": (
        "terraform -chdir=infra/aws init -input=false -backend-config=bucket=$STATE_BUCKET"
        f" -backend-config=key={STATE_KEY} -backend-config=region=$REGION"
        " -backend-config=use_lockfile=true"
    ),
    "bootstrap-plan": _PLAN
    + "".join(f" -target={t}" for t in BOOTSTRAP_TARGETS)
    + " -out=bootstrap.tfplan",
    "bootstrap-apply": "terraform -chdir=infra/aws apply -input=false bootstrap.tfplan",
    "artifact-bucket": "terraform -chdir=infra/aws output -raw artifact_bucket",
    "plan": _PLAN + " -out=fanfuse.tfplan",
    "show": "terraform -chdir=infra/aws show fanfuse.tfplan",
    "apply": "terraform -chdir=infra/aws apply -input=false fanfuse.tfplan",
    "endpoint": "terraform -chdir=infra/aws output -raw api_endpoint",
    "table": "terraform -chdir=infra/aws output -raw table",
    "keys": (
        "FANFUSE_DYNAMODB_TABLE=$TABLE FANFUSE_AWS_REGION=$REGION"
        " fanfuse keys create --owner my-app --dynamodb"
    ),
    "corpus-urls": "terraform -chdir=infra/aws output -json corpus_urls",
    "publish": corpus.PUBLISH,
    "check": (
        "terraform -chdir=infra/aws plan -input=false -detailed-exitcode -var-file=$VAR_FILE"
        " -var=lambda_s3_key=$KEY"
    ),
    "lift-protection": _PLAN
    + " -var=deletion_protection=false"
    + "".join(f" -target={t}" for t in TEARDOWN_TARGETS)
    + " -out=teardown.tfplan",
    "lift-apply": "terraform -chdir=infra/aws apply -input=false teardown.tfplan",
    "destroy-plan": (
        "terraform -chdir=infra/aws plan -destroy -input=false -var-file=$VAR_FILE"
        " -var=lambda_s3_key=$KEY -var=deletion_protection=false -out=destroy.tfplan"
    ),
    "destroy": "terraform -chdir=infra/aws apply -input=false destroy.tfplan",
}
"""docs/deploy.md's AWS commands the rehearsal runs, word for word (placeholders aside)."""


def say(message: str) -> None:
    print(f"rehearsal: {message}", flush=True)


@dataclass
class Figures:
    """What the closing line reports."""

    seconds: dict[str, float] = field(default_factory=dict)
    resources: int = 0
    sizes: limits.Sizes | None = None
    cold_start: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        times = ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items())
        line = f"{self.resources} resources; {times}; lambda zip {self.sizes}"
        if self.cold_start:
            line += (
                f"; vectors worker cold start: import {self.cold_start['import_s']} s, first "
                f"search {self.cold_start['first_search_s']} s, warm "
                f"{self.cold_start['warm_search_s']} s"
            )
        return line


class Operator:
    """Runs RUNBOOK's commands with the placeholders filled: terraform in the workspace's copy
    of infra/aws (plus the backend's moto endpoint on init), the rest as written."""

    def __init__(self, workspace: tf.Workspace, values: Mapping[str, str]) -> None:
        self.workspace = workspace
        self.values = dict(values)

    def command(self, step: str) -> list[str]:
        text = RUNBOOK[step]
        for name in sorted(self.values, key=len, reverse=True):
            text = text.replace(f"${name}", self.values[name])
        return shlex.split(text)

    def terraform(self, step: str, ok: tuple[int, ...] = (0,)) -> tf.Run:
        say(f"$ {RUNBOOK[step]}")
        argv = self.command(step)
        assert argv[0] == "terraform" and argv[1].startswith("-chdir="), argv
        args = [a for a in argv[2:]]
        args.insert(1, "-no-color")
        if args[0] == "init":
            args += tf.backend_endpoint_flags(self.workspace.endpoint)
        if args[0] == "apply" or "-target" in " ".join(args):
            args.insert(1, "-parallelism=20")
        run = self.workspace.run(args, ok=ok)
        say(f"  {args[0]}: exit {run.code} in {run.seconds:.0f} s")
        return run


def _aws_clients(endpoint: str, region: str) -> Callable[[str], Any]:
    import boto3

    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
    )
    return lambda service: session.client(service, endpoint_url=endpoint)  # type: ignore[call-overload]


def make_state_bucket(client: Callable[[str], Any], bucket: str) -> None:
    """docs/deploy.md, "State": the bucket, versioned, private (boto3's calls of the aws CLI
    commands given there)."""
    s3 = client("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True,
            "BlockPublicPolicy": True, "RestrictPublicBuckets": True,
        },
    )  # fmt: skip


def make_provider_secrets(client: Callable[[str], Any], secrets: Mapping[str, str]) -> None:
    """docs/deploy.md, "Secrets": one secret per provider key (a stand-in value here)."""
    manager = client("secretsmanager")
    for env, name in secrets.items():
        manager.create_secret(Name=name, SecretString=f"rehearsal-{env.lower()}")


# -- What the apply created --------------------------------------------------------------------


def arn_like(pattern: str, arn: str) -> bool:
    """IAM's ArnLike: `*` any run of characters, `?` one."""
    import fnmatch

    return fnmatch.fnmatchcase(arn, pattern)


def log_group_allowed(policy: dict[str, Any], log_group_arn: str, region: str) -> bool:
    """Whether a key policy lets CloudWatch Logs of `region` use the key for `log_group_arn`
    (the encryption context it presents), as KMS decides: an Allow statement for the service
    whose conditions on `kms:EncryptionContext:aws:logs:arn` the ARN meets."""
    service = f"logs.{region}.amazonaws.com"
    for statement in policy.get("Statement", []):
        principals = statement.get("Principal", {}).get("Service", [])
        principals = [principals] if isinstance(principals, str) else principals
        if statement.get("Effect") != "Allow" or service not in principals:
            continue
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(arn_like(a, "kms:GenerateDataKey") for a in actions):
            continue
        conditions = statement.get("Condition", {})
        if not conditions:
            return True
        verdicts = []
        for test, pairs in conditions.items():
            values = pairs.get("kms:EncryptionContext:aws:logs:arn")
            if values is None:
                continue
            values = [values] if isinstance(values, str) else values
            if test in ("ArnLike", "StringLike"):
                verdicts.append(any(arn_like(v, log_group_arn) for v in values))
            elif test in ("ArnEquals", "StringEquals"):
                verdicts.append(log_group_arn in values)
            else:
                verdicts.append(False)
        if verdicts and all(verdicts):
            return True
    return False


def statements_of(document: Any) -> list[dict[str, Any]]:
    parsed = json.loads(document) if isinstance(document, str) else document
    statements = parsed.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        resources = statement.get("Resource", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if any(arn_like(a, action) for a in actions) and any(
            arn_like(r, resource) for r in resources
        ):
            return True
    return False


@dataclass
class Created:
    """The deployment as AWS (moto) describes it after the apply."""

    functions: dict[str, dict[str, Any]]
    mappings: dict[str, list[dict[str, Any]]]
    queues: dict[str, str]
    table: str


def verify(
    client: Callable[[str], Any], outputs: Mapping[str, Any], module: Any, region: str
) -> Created:
    """Reads back what the apply created and checks it is what the code expects."""
    problems: list[str] = []
    dynamodb, sqs, lam, iam = client("dynamodb"), client("sqs"), client("lambda"), client("iam")
    table_name = str(outputs["table"])
    table = dynamodb.describe_table(TableName=table_name)["Table"]
    keys = {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]}
    if keys != {"pk": "HASH", "sk": "RANGE"}:
        problems.append(f"table keys {keys}")
    from fanfuse.store import dynamodb_codec as codec

    indexes = [i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])]
    if indexes != [codec.OWNER_INDEX]:
        problems.append(f"table indexes {indexes}")
    ttl = dynamodb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    if ttl.get("AttributeName") != codec.TTL_ATTRIBUTE or ttl.get("TimeToLiveStatus") != "ENABLED":
        problems.append(f"table TTL {ttl}")
    if not table.get("DeletionProtectionEnabled"):
        problems.append("the table is not protected from deletion")
    if table.get("SSEDescription", {}).get("SSEType") != "KMS":
        problems.append(f"table encryption {table.get('SSEDescription')}")

    queues: dict[str, str] = dict(outputs["queues"])  # type: ignore[arg-type]
    dead: dict[str, str] = dict(outputs["dead_letter_queues"])  # type: ignore[arg-type]
    max_receives = int(module.variables["max_receives"])
    for name, url in queues.items():
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dead[name], AttributeNames=["QueueArn"])
        redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
        if redrive != {
            "deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
            "maxReceiveCount": max_receives,
        }:
            problems.append(f"queue {name}: redrive {redrive}")
        if not attributes.get("KmsMasterKeyId"):
            problems.append(f"queue {name} is not encrypted")

    functions: dict[str, dict[str, Any]] = {}
    mappings: dict[str, list[dict[str, Any]]] = {}
    policies: dict[str, list[dict[str, Any]]] = {}
    for name, function_name in dict(outputs["functions"]).items():  # type: ignore[arg-type]
        config = lam.get_function_configuration(FunctionName=function_name)
        functions[name] = config
        variables = config.get("Environment", {}).get("Variables", {})
        problems += limits.check_lambda_environment(function_name, variables)
        if config["Handler"] != f"aws_lambda.{name}":
            problems.append(f"{function_name}: handler {config['Handler']}")
        found = lam.list_event_source_mappings(FunctionName=config["FunctionArn"])[
            "EventSourceMappings"
        ]
        mappings[name] = []
        for mapping in found:
            arn = mapping["EventSourceArn"]
            url = sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]
            pollers = (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
            if mapping.get("BatchSize") != 1 or mapping.get("FunctionResponseTypes") != [
                "ReportBatchItemFailures"
            ]:
                problems.append(f"mapping {arn} -> {function_name}: {mapping}")
            if pollers is None:
                problems.append(f"mapping {arn} -> {function_name}: no maximum concurrency")
            mappings[name].append(
                {"arn": arn, "url": url, "batch": mapping["BatchSize"], "pollers": pollers or 2}
            )
        # The role and its policy, as written: what each handler does must be allowed.
        role_name = config["Role"].rsplit("/", 1)[-1]
        statements: list[dict[str, Any]] = []
        for policy_name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
            document = iam.get_role_policy(RoleName=role_name, PolicyName=policy_name)[
                "PolicyDocument"
            ]
            statements += statements_of(document)
        policies[name] = statements
        table_arn = table["TableArn"]
        needed = [
            ("dynamodb:GetItem", table_arn),
            ("dynamodb:Query", f"{table_arn}/index/{codec.OWNER_INDEX}"),
        ]
        if name == "http":
            needed += [("dynamodb:Scan", table_arn)]  # an operator's stats (DynamoStore.recent)
        for action, resource in needed:
            if not allows(statements, action, resource):
                problems.append(f"role {role_name} may not {action} on {resource}")
    consumed = {m["arn"] for found in mappings.values() for m in found}
    queue_arns = {
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        for url in queues.values()
    }
    if consumed != queue_arns:
        problems.append(f"queues without a mapping: {sorted(queue_arns - consumed)}")
    problems += corpus_problems(client, outputs, module, functions, policies)

    # Every encrypted log group is one the key's policy lets CloudWatch Logs use the key for.
    logs, kms = client("logs"), client("kms")
    for group in logs.describe_log_groups(logGroupNamePrefix="/aws/")["logGroups"]:
        key = group.get("kmsKeyId")
        if not key:
            continue
        policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
        arn = group["arn"].removesuffix(":*")
        if not log_group_allowed(policy, arn, region):
            problems.append(
                f"log group {group['logGroupName']} is encrypted with a key whose policy"
                " refuses CloudWatch Logs"
            )

    origins = list(module.variables.get("cors_origins") or [])
    if origins:
        api_id = str(outputs["api_endpoint"]).split("//", 1)[1].split(".", 1)[0]
        cors = client("apigatewayv2").get_api(ApiId=api_id).get("CorsConfiguration", {})
        if cors.get("AllowOrigins") != origins:
            problems.append(f"API CORS {cors}")
    alarms = client("cloudwatch").describe_alarms()["MetricAlarms"]
    if len(alarms) < len(queues) + len(functions) + 2:
        problems.append(f"{len(alarms)} alarms")
    if problems:
        raise SystemExit("rehearsal FAILED: what the apply created:\n  " + "\n  ".join(problems))
    return Created(functions, mappings, queues, table_name)


def corpus_problems(
    client: Callable[[str], Any], outputs: Mapping[str, Any], module: Any,
    functions: Mapping[str, dict[str, Any]], policies: Mapping[str, list[dict[str, Any]]],
) -> list[str]:  # fmt: skip
    """The corpus platforms as created (corpus.tf): each function told its corpus URL, the
    bucket private, versioned and encrypted (when Terraform made it), only the worker may read
    it, and no function may write it (the operator publishes)."""
    urls: dict[str, str] = dict(outputs.get("corpus_urls") or {})
    declared = dict(module.variables.get("corpus_platforms") or {})
    if set(urls) != set(declared):
        return [f"corpus_urls {sorted(urls)} are not the corpus platforms {sorted(declared)}"]
    problems: list[str] = []
    for config in functions.values():
        variables = config.get("Environment", {}).get("Variables", {})
        told = json.loads(variables.get("FANFUSE_EXTRA_PLATFORMS") or "{}")
        seen = {
            p: (s.get("engine"), s.get("settings", {}).get("corpus_url")) for p, s in told.items()
        }
        wanted = {p: (declared[p]["engine"], url) for p, url in urls.items()}
        if seen != wanted:
            problems.append(f"{config['FunctionName']}: corpus platforms {seen}, not {wanted}")
    s3 = client("s3")
    for bucket in sorted({url.split("/")[2] for url in urls.values()}):
        if module.variables.get("corpus_bucket") is not None:
            continue  # an existing bucket, used as it is
        versioning = s3.get_bucket_versioning(Bucket=bucket).get("Status")
        blocked = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
        algorithms = {
            r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in rules["Rules"]
        }
        if versioning != "Enabled" or not all(blocked.values()) or algorithms != {"aws:kms"}:
            problems.append(
                f"corpus bucket {bucket}: versioning {versioning}, public access block "
                f"{blocked}, encryption {algorithms}"
            )
    for url in sorted(set(urls.values())):
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        pointer = f"arn:aws:s3:::{bucket}/{prefix}/CURRENT"
        for name, statements in policies.items():
            reads = allows(statements, "s3:GetObject", pointer) and allows(
                statements, "s3:ListBucket", f"arn:aws:s3:::{bucket}"
            )
            if reads != (name == "worker"):
                problems.append(f"{name} {'may' if reads else 'may not'} read {url}")
            if allows(statements, "s3:PutObject", pointer):
                problems.append(f"{name} may write {url}")
    return problems


# -- The functions, on the stand-in Lambda service ------------------------------------------------


def stand_in_env(
    config: Mapping[str, Any], task_root: Path, endpoint: str, region: str
) -> dict[str, str]:
    """A created function's environment, as Lambda gives it, plus only what aims it at moto
    (fanfuse's clients by FANFUSE_AWS_ENDPOINT_URL, boto3's S3 client of the published corpora
    by AWS_ENDPOINT_URL_S3) and what the Lambda runtime itself sets."""
    from fanfuse.tools.devstack.aws_stack import AWS_DUMMY_ENV

    return {
        **config.get("Environment", {}).get("Variables", {}),
        **AWS_DUMMY_ENV,
        "AWS_DEFAULT_REGION": region,
        "AWS_LAMBDA_FUNCTION_NAME": config["FunctionName"],
        "FANFUSE_AWS_ENDPOINT_URL": endpoint,
        "AWS_ENDPOINT_URL_S3": endpoint,
        "PYTHONPATH": str(task_root),
    }


@contextmanager
def lambda_stand_ins(
    created: Created, python: str, task_root: Path, endpoint: str, region: str, http_port: int,
    log_dir: Path, clean_env: Callable[[Mapping[str, str]], dict[str, str]],
) -> Iterator[None]:  # fmt: skip
    """One process per created function: its environment, its handler, its mappings."""
    from fanfuse.tools.devstack.processes import http_request, wait_until

    processes: list[subprocess.Popen[bytes]] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        for name, config in created.functions.items():
            env = clean_env(stand_in_env(config, task_root, endpoint, region))
            argv = [python, str(LAMBDA_SERVICE), "--handler", config["Handler"],
                    "--mappings", json.dumps(created.mappings[name])]  # fmt: skip
            if name == "http":
                argv += ["--http-port", str(http_port)]
            log = (log_dir / f"lambda-{name}.log").open("wb")
            processes.append(
                subprocess.Popen(argv, cwd=task_root, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        url = f"http://127.0.0.1:{http_port}/robots.txt"
        wait_until(lambda: http_request("GET", url, timeout=1.0)[0] > 0, 60.0, "the http function")
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def publish_corpora(
    corpus_urls: Mapping[str, str], work: Path, endpoint: str, region: str
) -> dict[str, str]:
    """Each corpus the deployment names, published as docs/deploy.md says (corpus.PUBLISH),
    into the bucket the apply created, from the operator's machine: corpus URL -> version."""
    from fanfuse.tools.devstack.aws_stack import AWS_DUMMY_ENV

    if not corpus_urls:
        say("no corpus platforms (corpus_platforms): nothing to publish")
        return {}
    env = {**AWS_DUMMY_ENV, "AWS_DEFAULT_REGION": region, "AWS_ENDPOINT_URL_S3": endpoint}
    return {url: corpus.publish(url, work, env) for url in sorted(set(corpus_urls.values()))}


def refused_plan(workspace: tf.Workspace, values: Mapping[str, str], module: Any) -> None:
    """A plan whose pollers exceed the account's concurrency fails, naming the numbers: the
    deployment as given, on an account of a tenth of the pollers it needs."""
    pollers = dict(module.local("pollers"))
    quota = max(1, sum(pollers.values()) // 10)
    args = [
        "plan", "-input=false", "-no-color", f"-var-file={values['VAR_FILE']}",
        f"-var=lambda_s3_key={values['KEY']}", f"-var=account_concurrency={quota}",
    ]  # fmt: skip
    run = workspace.run(args, ok=(1,))
    if "exceed what the functions may run" not in run.output:
        raise SystemExit(f"rehearsal FAILED: the plan failed otherwise:\n{run.output[-3000:]}")
    say(f"a plan on an account of {quota} concurrent executions fails: the pollers "
        f"({pollers}) exceed what the functions may run ({run.seconds:.0f} s)")  # fmt: skip


def rehearse(work: Path, var_files: list[Path], hooks: Any) -> Figures:
    """The whole AWS rehearsal; `hooks` is rehearsal.py's (build, key, search, clean_env)."""
    from fanfuse.tools.devstack.aws_stack import MotoProcess
    from fanfuse.tools.devstack.processes import free_port

    if len(var_files) != 1:
        raise SystemExit("rehearsal FAILED: the AWS rehearsal applies one var file at a time")
    figures = Figures()
    tf.check_installed()  # before anything is built: no terraform, no rehearsal
    _, python, _, archive = hooks.build_artifact("aws", work, var_files)
    figures.sizes = limits.Sizes.of(archive)
    say(f"lambda zip: {figures.sizes} (limits: {limits.LAMBDA_UNZIPPED // limits.MB} MB unzipped; "
        f"{limits.LAMBDA_DIRECT_UPLOAD_ZIPPED // limits.MB} MB zipped for a direct upload, "
        "so through S3)")  # fmt: skip
    if package.development_files(archive):
        raise SystemExit("rehearsal FAILED: the zip ships fanfuse/tools")
    task_root = hooks.unzip(archive, work / "task")
    runtime = work / "runtime"
    subprocess.run([python, "-m", "venv", "--without-pip", str(runtime)], check=True)
    runtime_python = str(runtime / "bin" / "python")

    module = render.aws_module(var_files)
    region = str(module.variables["region"])
    moto = MotoProcess(log_dir=work / "logs")
    moto.launch()
    try:
        moto.wait_ready()
        client = _aws_clients(moto.url, region)
        state_bucket = f"fanfuse-tf-state-rehearsal-{region}"
        key = package.lambda_s3_key(archive)
        var_file = var_files[0].resolve()
        workspace = tf.Workspace(render.AWS_INFRA, work / "terraform", moto.url)
        values = {
            "VAR_FILE": str(var_file),
            "KEY": key,
            "STATE_BUCKET": state_bucket,
            "REGION": region,
        }
        operator = Operator(workspace, values)
        make_state_bucket(client, state_bucket)
        secrets = dict(module.variables.get("provider_secrets") or {})
        make_provider_secrets(client, secrets)
        say(f"state bucket {state_bucket} and {len(secrets)} provider secrets made")
        operator.terraform("init")
        refused_plan(workspace, values, module)
        figures.seconds["bootstrap"] = operator.terraform("bootstrap-plan").seconds
        figures.seconds["bootstrap"] += operator.terraform("bootstrap-apply").seconds
        bucket = operator.terraform("artifact-bucket").output.strip().splitlines()[-1]
        client("s3").upload_file(str(archive), bucket, key)
        say(f"uploaded s3://{bucket}/{key}")
        figures.seconds["plan"] = operator.terraform("plan").seconds
        shown = operator.terraform("show").output
        if "fanfuse.tfplan" in shown or "Plan:" not in shown:
            raise SystemExit(f"rehearsal FAILED: the saved plan shows no plan:\n{shown[-2000:]}")
        say(tf.plan_summary(shown).splitlines()[-1])
        started = time.monotonic()
        operator.terraform("apply")
        figures.seconds["apply"] = time.monotonic() - started
        figures.resources = len(workspace.state_resources())
        say(f"applied: {figures.resources} resources in {figures.seconds['apply']:.0f} s")
        created = verify(client, workspace.outputs(), module, region)
        corpora = sorted(module.variables["corpus_platforms"])
        say(f"verified: table {created.table}, {len(created.queues)} queues each with its "
            f"dead-letter queue, {sum(len(m) for m in created.mappings.values())} mappings, "
            f"{len(created.functions)} functions, their roles, log groups and the key's policy"
            + (f"; the corpus bucket of {', '.join(corpora)}, read by the worker only"
               if corpora else ""))  # fmt: skip
        endpoint = operator.terraform("endpoint").output.strip().splitlines()[-1]
        say(f"the API: {endpoint} (API Gateway is not in the rehearsal's path)")
        table = operator.terraform("table").output.strip().splitlines()[-1]
        api_key = hooks.create_key_aws({
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": region,
            "FANFUSE_AWS_ENDPOINT_URL": moto.url, "FANFUSE_DYNAMODB_TABLE": table,
            "FANFUSE_AWS_REGION": region,
        })  # fmt: skip
        corpus_urls: dict[str, str] = json.loads(operator.terraform("corpus-urls").stdout)
        started = time.monotonic()
        versions = publish_corpora(corpus_urls, work, moto.url, region)
        if versions:
            figures.seconds["publish"] = time.monotonic() - started
        port = free_port()
        with lambda_stand_ins(created, runtime_python, task_root, moto.url, region, port,
                              work / "logs", hooks.clean_env):  # fmt: skip
            say("the three functions run on the stand-in Lambda service, from the installed zip")
            local = f"http://127.0.0.1:{port}"
            hooks.search_as_an_app(f"{local}/start_search", api_key, public=(endpoint, local))
            if corpus_urls:
                corpus.search(f"{local}/start_search", api_key, set(versions.values()),
                              sorted(corpus_urls), public=(endpoint, local))  # fmt: skip
        engines = {n: p["engine"] for n, p in module.variables["corpus_platforms"].items()}
        vectors = sorted(name for name, engine in engines.items() if engine == "vectors")
        if vectors:
            worker_env = hooks.clean_env(
                stand_in_env(created.functions["worker"], task_root, moto.url, region)
            )
            figures.cold_start = corpus.vectors_cold_start(
                runtime_python, task_root, worker_env, "aws_lambda",
                versions[corpus_urls[vectors[0]]], platform=vectors[0],
            )  # fmt: skip
        run = operator.terraform("check", ok=(0, 2))
        figures.seconds["second plan"] = run.seconds
        if run.code == 2:
            raise SystemExit(
                "rehearsal FAILED: the second plan is not empty:\n" + tf.plan_summary(run.output)
            )
        say(f"second plan: no changes ({run.seconds:.0f} s)")
        started = time.monotonic()
        for step in ("lift-protection", "lift-apply", "destroy-plan", "destroy"):
            operator.terraform(step)
        figures.seconds["teardown"] = time.monotonic() - started
        left = workspace.state_resources()
        if left:
            raise SystemExit(f"rehearsal FAILED: destroy left {left}")
        say(f"destroyed ({figures.seconds['teardown']:.0f} s)")
    finally:
        moto.stop()
    say(f"figures: {figures.line()}")
    return figures


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run scripts/deploy-rehearsal aws")
