"""The wire formats: models, errors, the request and its options, modes, inbound parsing."""
