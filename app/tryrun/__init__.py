"""Try runs (issue 27): edit a snippet and run it, from the browser and from an agent, with tokens and quotas."""
