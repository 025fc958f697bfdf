"""The shared pure Kubernetes core: what both the operators' parse-time checks and the local cluster must
agree on, said once.

- :mod:`.names`: DNS-1123 labels and subdomains, DNS-1035 labels, label keys and values (apimachinery's
  rules and messages);
- :mod:`.quantities`: resource quantities parsed to exact decimals, compared and shown canonically;
- :mod:`.cron`: the CronJob schedule grammar (robfig/cron ``ParseStandard``) and time zones;
- :mod:`.selectors`: label selectors (grammar, matching, the ``k=v`` form);
- :mod:`.kinds`: the workload kinds we create and watch (REST resource, name rule, pod label), one row each.

Layer rule (tests/unit/test_layers_local_cluster.py): stdlib and croniter only; no I/O, no Airflow, no
other ``airflow_k8s_ml`` module. ``manifests`` and ``local_cluster`` import it; it imports neither.
"""
