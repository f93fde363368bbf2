"""The ways in: functions, the Lambda, `fanfuse serve`, `fanfuse mcp`; they never import each
other (`render` is their shared text, `functions` the Flask targets the Lambda also serves)."""
