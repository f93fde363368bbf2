"""`fanfuse eval`: retrieval quality of the platforms, fusers and pipelines."""
