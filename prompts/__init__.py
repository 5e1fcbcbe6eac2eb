"""Prompt text shipped with rmb_build (judge, classifier, guard, criteria, leak patterns)."""
