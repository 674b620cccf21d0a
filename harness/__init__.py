"""A local research-agent harness: plan, recall, research, synthesize, evaluate-revise-verify, remember."""
