"""A platform run's stages: searching -> resolving -> fetching_content -> compressing.

`base` holds what every stage shares (the run, the progress reporter), one module per stage
does its work over the run's hits, and `pipeline` plans and runs them in order.
"""
