// The pod sandbox ("pause") program of the real-node tests (tests/kube): no image registry here,
// so the kubelet's sandbox image is this static binary in a scratch image.
module repeat-failure.test/pause

go 1.24.0
