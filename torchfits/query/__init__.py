"""Where-expressions: one tree for both where dialects and pyarrow filters, and the pushdown
planner that splits a predicate between the row kernel and pyarrow.
"""
