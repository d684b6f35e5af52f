// Package revise changes desired state as a whole estate is managed: a
// set's publish (converge desire -f FILE --set NAME [--prune] [--move])
// and a rollback to an earlier desired revision (converge rollback).
//
// Contract:
//   - a guest belongs to one set at a time: publishing it in another set
//     is refused (naming the set that holds it) unless moving;
//   - a pruning publish releases the set's members (guests whose desired
//     state in force says the set) missing from the file: a release, a
//     control request, never a destroy. It first checks that the caller
//     may publish control requests (a fenced publish the journal refuses
//     for its fence, storing nothing) and publishes nothing otherwise;
//   - a rollback publishes the desired state in force at a revision (a
//     journal sequence of the guest's desired events) or at a time as a
//     new revision, with headers saying which revision it restores and
//     which it replaces; a revision retention dropped fails with the
//     reason; disks never shrink (a disk larger now keeps its size, and
//     the rollback says so);
//   - SetReleases and PlanRollback compute without publishing, for plan.
package revise
