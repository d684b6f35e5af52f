// Package scenario runs scripted scenario tests (rsc.io/script, the engine
// of the Go command's own script tests): txtar files under a package's
// testdata/, each a script of commands that drive an engine and assert on
// what it printed, with the files of the archive beside them. A package
// provides the commands of its harness; this package runs the scripts,
// one subtest each, a fresh harness per script. Nothing here is used
// outside tests.
package scenario
