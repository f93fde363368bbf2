"""Pure rules the stores run in their transactions: lifecycle, progress, aggregate, breaker,
health, quota, filters, limits, and the mutation types they hand the stores."""
