// Command healthcheck is the compose file's container health check: the
// converge image (deploy/compose/Dockerfile) is distroless, without a shell,
// curl or wget, so it carries this probe. It GETs each URL given and exits 0
// when every one answers 2xx, else 1 (the reason on stderr).
//
//	healthcheck http://127.0.0.1:8080/readyz
package main
