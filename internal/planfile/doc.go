// Package planfile answers `converge plan -f FILE` and `POST /v1/plan`:
// what the live planner would do if a file of desired states were
// published now, guest by guest, without publishing anything.
//
// It folds each entry of the file into a copy of the views the planner
// wrote (projector.Restore, then the desired event as the fold takes it),
// plans every guest of the file with planner.Plan under the policy the
// planner published, and then applies the mass-change guard and the node
// slots as the engine would, counting the whole file as one change in the
// file's order (the order `converge desire -f` publishes it in).
//
// Callers may add guests that would be released alongside (Input.Releases:
// a set's prune), and any entry body (an earlier revision: a rollback
// shown before it is made). docs/plan.md says what it does not predict.
package planfile
