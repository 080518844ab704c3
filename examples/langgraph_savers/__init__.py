"""Factories for LangGraph's own savers, as ``--langgraph`` takes them (docs/langgraph.md)."""
