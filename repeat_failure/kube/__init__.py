"""``repeat-failure inject-webhook``: the sidecar injector, a mutating admission webhook
(:mod:`repeat_failure.kube.injector`; its names and config in ``injector_config``, the decision
and patch in ``injector_patch``, its metrics in ``injector_metrics``). The core/v1 Events the
sidecar and the fix loop post on their own pod are a shared module, :mod:`repeat_failure.events`
(issue 30: no program imports another's modules)."""
