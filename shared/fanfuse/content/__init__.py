"""What the later stages do to one result: resolve its link, fetch its page, compress its text.

Pure work on one URL or one text, over the network layer; the stages in `fanfuse.stages` loop
over a run's hits, report progress and record failures. Nothing here knows a platform.
"""
