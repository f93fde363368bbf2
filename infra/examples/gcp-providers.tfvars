# Every provider platform with its quota and settings (docs/platforms.md): a reference to copy
# from. tests/infra check that each deployed platform gets the settings it requires.

platforms = {
  docs           = { rate = 50, concurrency = 20, max_attempts = 3 }
  google         = { rate = 1, concurrency = 5, max_attempts = 3 } # Custom Search: 100 queries/min
  weixin         = { rate = 1, concurrency = 2, max_attempts = 3 }
  perplexity     = { rate = 0.8, concurrency = 5, max_attempts = 3 } # ~50 requests/min
  builtin        = { rate = 5, concurrency = 10, max_attempts = 3 }
  tavily         = { rate = 1.5, concurrency = 5, max_attempts = 3 } # ~100 requests/min
  brave          = { rate = 1, concurrency = 1, max_attempts = 3 }   # free plan: 1 request/s
  searxng        = { rate = 5, concurrency = 5, max_attempts = 3 }
  linkup         = { rate = 5, concurrency = 5, max_attempts = 3 }
  exa            = { rate = 5, concurrency = 5, max_attempts = 3 }
  sec_edgar      = { rate = 10, concurrency = 5, max_attempts = 3 }   # SEC fair access: 10 requests/s
  arxiv          = { rate = 0.33, concurrency = 1, max_attempts = 3 } # arXiv API: 1 request every 3 s
  wikipedia      = { rate = 10, concurrency = 10, max_attempts = 3 }
  web_search_mcp = { rate = 2, concurrency = 2, max_attempts = 3 }
}

platform_settings = {
  FANFUSE_GOOGLE_CX            = "0123456789abcdef0"
  FANFUSE_WEIXIN_ENABLED       = "true"
  FANFUSE_SEARXNG_BASE_URL     = "https://searx.example.com"
  FANFUSE_SEC_EDGAR_USER_AGENT = "Example Corp ops@example.com"
  FANFUSE_ARXIV_ENABLED        = "true"
  FANFUSE_WIKIPEDIA_USER_AGENT = "fanfuse-example/0.1 (ops@example.com)"
  FANFUSE_WEB_SEARCH_MCP_URL   = "https://mcp.example.com/mcp"
}
