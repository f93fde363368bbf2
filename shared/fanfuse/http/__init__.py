"""What both HTTP fronts share, framework-free: the API rules, the route table, the OpenAPI
document; and the API's client side: the client, and the backend the CLI and the MCP tools reach
either runtime through."""
