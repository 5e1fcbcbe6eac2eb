"""Prefect flows over the stage functions of rmb_build.stages."""
