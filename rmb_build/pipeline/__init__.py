"""The build pipeline over the stage functions of rmb_build.stages.

- ``env``: Prefect settings to apply before ``import prefect`` (``configure_prefect``);
- ``build``: the build flow (``build_flow``) and ``run_build``, what ``rmb build`` calls;
- ``tasks``: one cached task per stage, each over a batch of queries;
- ``keys``: the tasks' explicit cache keys (inputs, stage code, prompts, models);
- ``steps``: the small in-flow steps between tasks (selection, cost estimate);
- ``runners``: the task runner named by ``run.task_runner`` (thread or dask);
- ``demo.yaml``: the embedded demo config, used by ``rmb build`` with no ``--config``.

Nothing here imports Prefect at package import time: ``env.configure_prefect`` must run first.
"""
