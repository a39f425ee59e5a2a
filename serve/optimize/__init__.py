"""The Optimize use case: `optimizer` (validate -> cache -> candidates -> compile and measure -> rank), the
lists a long unit's largest functions ask for (`unit_lists`), the answer cache's key (`answer_key`)."""
