"""The build pipeline over the stage functions of ``rmb_build.stages``.

- ``build``: the build's logic (``run_pipeline``): the stages position by position, batching, chains, planning,
  resume, the release; it names no stage (what a stage reads and gives is its spec's and its hooks');
- ``context``: the run context (``BuildRun``) and its one step, ``run.call(SPEC, *inputs)``: a batch's key, its
  runner, its record;
- ``executor``: each stage over one batch, timed (what a runner executes);
- ``runner``: the runners (``LocalRunner`` in this process; ``PrefectRunner`` in ``prefect_flow``);
  ``run.run_build`` picks one;
- ``prefect_flow``, ``prefect_tasks``, ``prefect_task_runner``, ``env``, ``watchdog``: Prefect's side (the flow,
  one cached task per batch function, the task runner of ``run.task_runner``, its settings, its child processes);
- ``keys``: the batches' explicit cache keys (inputs, stage code, prompts, models);
- ``stage_stats``: a stage's stats and failures as log lines;
- ``config``, ``preflight``, ``manifest``, ``run_state``, ``set_parts``, ``release_step``: the build config,
  its checks, and what a run writes;
- ``demo.yaml``: the embedded demo config, used by ``rmb build`` with no ``--config``.

Prefect is imported only by the Prefect modules, and only once ``env.configure_prefect`` has run.
"""
