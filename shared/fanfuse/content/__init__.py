"""The later stages of a platform run: resolving URLs, fetching page content, compressing it.

Each stage is `async def stage(run: StageRun, hits: list[Hit]) -> list[Hit]`, registered in
`fanfuse.stages.STAGE_MODULES` and imported only by runs that plan it.
"""
