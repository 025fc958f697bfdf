"""The Airflow UI plugin: the "Training" tab on training task instances and the approved-checkpoint page.

Layers, each module one job:

* :mod:`.plugin`   - the ``AirflowPlugin`` Airflow discovers through the ``airflow.plugins`` entry point;
  tiny, because every Airflow process that loads plugins (workers for macros, the dag processor for
  timetables) imports it. The FastAPI app is built on first access, in the api-server only;
* :mod:`.app`      - the FastAPI app: routes, Airflow's auth dependencies, the thread pool;
* :mod:`.facts`    - what Airflow recorded for a task instance (state, the workload record in
  ``task_state_store``, the XCom, the rendered fields, the trigger's kwargs), read from the metadata DB;
* :mod:`.history`  - the checkpoints a run committed: one listing plus the manifests, read in parallel and
  cached by ETag;
* :mod:`.live`     - a running workload's live state and phase from Kubernetes (optional);
* :mod:`.view`     - the pure view model (what the tab says), :mod:`.svg` and :mod:`.page` - pure rendering.
"""
