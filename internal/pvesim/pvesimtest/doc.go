// Package pvesimtest is test support for code that talks to Proxmox: it
// starts a simulator (package pvesim) on 127.0.0.1:0 for one test, with a
// known API token (TokenID, TokenSecret) and root@pam password (Password),
// closes it at the test's cleanup, builds a *pve.Client for it, and gives a
// context bound to the test.
//
// It is imported only by tests.
package pvesimtest
