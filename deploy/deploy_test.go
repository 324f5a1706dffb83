// Package deploy tests the deployment files beside it, as far as a machine
// without Docker, Kubernetes or a running systemd can: README.md says what
// each test checks.
package deploy

// root is the repository's root, the Dockerfile's build context.
const root = ".."
