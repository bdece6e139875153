"""The requirement catalogue, outcomes and verdicts, and the reports written from them."""
