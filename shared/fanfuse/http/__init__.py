"""What both HTTP fronts share, framework-free: the API rules, the OpenAPI document, the client."""
