// Package secret reads the credentials converge is given (the Proxmox API
// token secret, NATS passwords) from the three places an operator can put
// them, and says which of them leaks.
//
// Contract:
//   - a secret comes from exactly one of: a file (the safe choice: its
//     mode decides who reads it), the environment (readable only by the
//     process's own user in /proc/PID/environ), or the command line (read
//     by every local user in /proc/PID/cmdline and ps: accepted, with a
//     loud warning that names the alternatives);
//   - giving both a file and a value is an error, never a silent choice;
//   - a file's trailing newline is not part of the secret; an empty file,
//     a file over 64 KiB or one that is readable by group or others is
//     reported (the first two refused, the last warned about);
//   - no error or log line of this package contains the secret itself.
package secret
