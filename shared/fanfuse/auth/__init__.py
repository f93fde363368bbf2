"""Who may call: verified callers of the public endpoints, and Cloud Tasks' deliveries.

- `tokens`: Firebase and Google-signed ID tokens, and Cloud Tasks' OIDC tokens, verified with
  google-auth against the issuers' published certificates (`certs`: cached per their max-age).
- `keys`: API keys, stored hashed with their owner and quota (`fanfuse keys`).
- `callers`: the one decision for a public request: which credential, whose, or 401/403.
- `tasks`: the task targets' check: OIDC in production, an HMAC of the body locally.
"""
