"""The Kubernetes side: the sidecar injector, a mutating admission webhook
(:mod:`repeat_failure.kube.injector`, ``repeat-failure inject-webhook``), and the core/v1 Events
the sidecar and the fixloop post on their own pod (:mod:`repeat_failure.kube.events`)."""
