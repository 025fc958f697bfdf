"""An auth manager for the api-server tests: Airflow's SimpleAuthManager, plus one user who may read no DAG.

Why: SimpleAuthManager's roles are global (a viewer reads every DAG), so "a user who cannot read the DAG"
needs DAG-level authorization, which real deployments get from the FAB or Keycloak auth managers. This
subclass adds exactly that rule and nothing else; the api-server loads it through ``[core] auth_manager``
like any auth manager, and the plugin under test only ever calls Airflow's ``requires_access_dag``.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: Users of this name may read no DAG (and so nothing under a DAG: task instances, XComs, the tab).
OUTSIDER = "outsider"


class DagDenyingAuthManager(SimpleAuthManager):
    """SimpleAuthManager where :data:`OUTSIDER` is refused every DAG."""

    def is_authorized_dag(
        self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        if user.get_name() == OUTSIDER:
            return False
        return super().is_authorized_dag(
            method=method, user=user, access_entity=access_entity, details=details
        )
