"""The service: start / run_platform / aggregate / status / cancel over the ports, no framework."""
