"""Rerankers for the `comprehensive` mode: the offline ones (`offline`), the LLM one (`llm`), and
which one a search gets (`choice`); their contracts and the orders they return are pure, in
`fanfuse.fusion.rerank_contract`."""
