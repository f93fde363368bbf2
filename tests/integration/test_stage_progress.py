"""Stage progress as the platform document sees it: every stage's messages, in order."""

from __future__ import annotations

from typing import Any

from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import TaskStatus
from tests.support.fakes import FakePlatform, hits


class RecordingStore(SqliteStore):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        self.patches.append((name, fields))
        return super().patch_run(task_id, name, fields, lease=lease)


class WithContent(FakePlatform):
    """Brings its own content, so the run plans searching then compressing."""

    capabilities = FakePlatform.capabilities.model_copy(update={"content": True})


async def test_searching_result_is_written_before_the_next_stage(settings: Settings) -> None:
    page = [
        h.model_copy(update={"content": "Short text. Nothing to compress."}) for h in hits("p", 3)
    ]
    platform = WithContent("docs", page)
    store = RecordingStore(settings.db_path)
    runtime = EmbeddedRuntime(settings, registry=Registry.of([platform]), store=store)
    async with runtime as rt:
        view = await rt.search({"query": "q", "include_content": True})
    assert view.status is TaskStatus.COMPLETED
    messages = [f["message"] for _, f in store.patches]
    assert messages[0] == "Searching: Found 3 results"
    assert store.patches[0][1]["percent"] == 50.0
    assert messages[1].startswith("Compressing")
    assert view.platform_runs[0].stages == ["searching", "compressing"]
