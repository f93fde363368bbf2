"""Where published corpora live: one small object-store port and its three implementations.

A published corpus (`fanfuse.retrieval.published`) needs three things of a store: read an
object whole, create one that must not exist yet (a version's objects are immutable), and
replace one (the pointer to the current version). `S3Bucket` does them with boto3,
`GcsBucket` with google-cloud-storage (the clouds' official clients), `FolderBucket` in a local
or mounted folder (`file://`, for a shared drive and for tests).

Endpoints come from each client's own standard settings, so the emulators need no fanfuse
setting: `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) points boto3 at moto's server,
`STORAGE_EMULATOR_HOST` points google-cloud-storage at a Cloud Storage emulator. Credentials are
the clients' usual chains (a Lambda's role, a function's service account).

Errors say which object (by URL) and what went wrong: `MissingObject` when it is not there (or
the bucket is not), `BucketError` for everything else (denied, unreachable, refused to create).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote, urlsplit

from fanfuse.wire.errors import CorpusError

if TYPE_CHECKING:
    from google.cloud.storage import Client as GcsClient
    from types_boto3_s3 import S3Client

SCHEMES = {"s3": "boto3", "gs": "google.cloud.storage", "file": None}
"""URL scheme -> the client module it needs (None: the standard library)."""
INSTALL = {"s3": "pip install 'fanfuse[aws]'", "gs": "pip install 'fanfuse[cloud]'"}
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
"""Per request: a corpus version's largest object (the embeddings) is tens of MB at most, read
in one go from the same region; far below a worker's own timeout."""


class BucketError(CorpusError):
    """An object store refused or failed a request; the message names the object's URL."""


class MissingObject(BucketError):
    """The object (or its bucket) does not exist."""


class Bucket(ABC):
    """One bucket of one store; keys are `/`-separated paths inside it."""

    scheme: ClassVar[str]

    def __init__(self, name: str) -> None:
        self.name = name

    def url(self, key: str) -> str:
        return f"{self.scheme}://{self.name}/{key}"

    @abstractmethod
    def read(self, key: str) -> bytes:
        """The object's bytes; MissingObject when there is no such object (or bucket)."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> None:
        """Write a new object; BucketError when it exists already (where the store can tell:
        S3 and Cloud Storage refuse by a write precondition, a folder by an exclusive link)."""

    @abstractmethod
    def replace(self, key: str, data: bytes) -> None:
        """Write the object whole, replacing any; a reader sees the old or the new one."""


def parse_url(url: str) -> tuple[str, str, str]:
    """`s3://bucket/prefix`, `gs://bucket/prefix`, `file:///folder` -> (scheme, bucket, prefix).

    A file URL's "bucket" is its folder and its prefix is empty. Raises CorpusError saying
    what is wrong with the URL.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise CorpusError(
            f"{url}: a corpus URL is s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or file:///FOLDER"
        )
    if parts.query or parts.fragment:
        raise CorpusError(f"{url}: a corpus URL has no query or fragment")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise CorpusError(f"{url}: a file URL names a local folder (file:///FOLDER)")
        folder = unquote(parts.path)
        if not folder.startswith("/") or folder.rstrip("/") == "":
            raise CorpusError(f"{url}: a file URL names an absolute folder (file:///FOLDER)")
        return scheme, folder.rstrip("/"), ""
    prefix = parts.path.strip("/")
    if not parts.netloc:
        raise CorpusError(f"{url}: no bucket name ({scheme}://BUCKET/PREFIX)")
    if not prefix:
        raise CorpusError(f"{url}: name the corpus's prefix in the bucket ({scheme}://BUCKET/NAME)")
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        raise CorpusError(f"{url}: the prefix has an empty, `.` or `..` part")
    return scheme, parts.netloc, prefix


def bucket_problem(url: str) -> str | None:
    """Why `url` cannot be read here (a bad URL, a client not installed), without any request."""
    try:
        scheme, _, _ = parse_url(url)
    except CorpusError as exc:
        return str(exc)
    module = SCHEMES[scheme]
    if module is not None and not _installed(module):
        return f"{url}: not installed: {module} ({INSTALL[scheme]})"
    return None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # google.cloud without its storage package
        return False


def open_bucket(url: str) -> tuple[Bucket, str]:
    """The bucket `url` names and the prefix inside it."""
    problem = bucket_problem(url)
    if problem is not None:
        raise CorpusError(problem)
    scheme, name, prefix = parse_url(url)
    if scheme == "s3":
        return S3Bucket(name), prefix
    if scheme == "gs":
        return GcsBucket(name), prefix
    return FolderBucket(name), prefix


class S3Bucket(Bucket):
    scheme = "s3"

    def __init__(self, name: str, client: S3Client | None = None) -> None:
        super().__init__(name)
        self._client = client or _s3_client()

    def read(self, key: str) -> bytes:
        try:
            answer = self._client.get_object(Bucket=self.name, Key=key)
            data: bytes = answer["Body"].read()
            return data
        except Exception as exc:
            raise self._error(key, exc, "read") from exc

    def create(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.name, Key=key, Body=data, IfNoneMatch="*")
        except Exception as exc:
            raise self._error(key, exc, "create") from exc

    def replace(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.name, Key=key, Body=data)
        except Exception as exc:
            raise self._error(key, exc, "write") from exc

    def _error(self, key: str, exc: Exception, action: str) -> BucketError:
        code = _s3_code(exc)
        if code in ("NoSuchKey", "NoSuchBucket", "404"):
            what = "no such bucket" if code == "NoSuchBucket" else "no such object"
            return MissingObject(f"{self.url(key)}: {what}")
        if code in ("PreconditionFailed", "412"):
            return BucketError(f"{self.url(key)}: exists already (a version is never rewritten)")
        if code in ("AccessDenied", "403"):
            return BucketError(
                f"{self.url(key)}: access denied ({action}; a missing object reads as denied "
                "without s3:ListBucket)"
            )
        return BucketError(f"{self.url(key)}: cannot {action}: {code or type(exc).__name__}: {exc}")


def _s3_client() -> S3Client:
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"max_attempts": 3, "mode": "standard"},
    )
    return boto3.client("s3", config=config)


def _s3_code(exc: Exception) -> str | None:
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code") or "") or None
    return None


class GcsBucket(Bucket):
    scheme = "gs"

    def __init__(self, name: str, client: GcsClient | None = None) -> None:
        super().__init__(name)
        if client is None:
            from google.cloud import storage

            client = storage.Client()
        self._bucket = client.bucket(name)

    def read(self, key: str) -> bytes:
        try:
            data: bytes = self._bucket.blob(key).download_as_bytes(timeout=self._timeout())
            return data
        except Exception as exc:
            raise self._error(key, exc, "read") from exc

    def create(self, key: str, data: bytes) -> None:
        try:
            self._bucket.blob(key).upload_from_string(
                data, if_generation_match=0, timeout=self._timeout()
            )
        except Exception as exc:
            raise self._error(key, exc, "create") from exc

    def replace(self, key: str, data: bytes) -> None:
        try:
            self._bucket.blob(key).upload_from_string(data, timeout=self._timeout())
        except Exception as exc:
            raise self._error(key, exc, "write") from exc

    @staticmethod
    def _timeout() -> tuple[float, float]:
        return (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)

    def _error(self, key: str, exc: Exception, action: str) -> BucketError:
        from google.api_core import exceptions

        if isinstance(exc, exceptions.NotFound):
            return MissingObject(f"{self.url(key)}: no such object or bucket")
        if isinstance(exc, exceptions.PreconditionFailed):
            return BucketError(f"{self.url(key)}: exists already (a version is never rewritten)")
        if isinstance(exc, exceptions.Forbidden):
            return BucketError(f"{self.url(key)}: access denied ({action})")
        return BucketError(f"{self.url(key)}: cannot {action}: {type(exc).__name__}: {exc}")


class FolderBucket(Bucket):
    """A folder as a bucket: keys are relative paths; writes go through a temporary file."""

    scheme = "file"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.root = Path(name)

    def url(self, key: str) -> str:
        return f"file://{self.root / key}"

    def read(self, key: str) -> bytes:
        path = self.root / key
        try:
            return path.read_bytes()
        except FileNotFoundError as exc:
            raise MissingObject(f"{self.url(key)}: no such file") from exc
        except OSError as exc:
            raise BucketError(f"{self.url(key)}: cannot read: {exc.strerror or exc}") from exc

    def create(self, key: str, data: bytes) -> None:
        tmp = self._staged(key, data)
        try:
            os.link(tmp, self.root / key)  # fails if the name exists: never replaces
        except FileExistsError as exc:
            raise BucketError(
                f"{self.url(key)}: exists already (a version is never rewritten)"
            ) from exc
        except OSError as exc:
            raise BucketError(f"{self.url(key)}: cannot create: {exc.strerror or exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def replace(self, key: str, data: bytes) -> None:
        tmp = self._staged(key, data)
        try:
            os.replace(tmp, self.root / key)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise BucketError(f"{self.url(key)}: cannot write: {exc.strerror or exc}") from exc

    def _staged(self, key: str, data: bytes) -> Path:
        target = self.root / key
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise BucketError(f"{self.url(key)}: cannot write: {exc.strerror or exc}") from exc
        return Path(name)
