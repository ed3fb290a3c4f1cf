"""REST API routers, one per resource."""
